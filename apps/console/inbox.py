"""The console's inbox — every conversation of the client, not only escalations — and the
actions on one conversation: take over, assign / claim, hand back (with or without the assistant
answering what the customer wrote meanwhile) and staff notes.

The inbox refreshes itself like the queue (static/console/inbox.js): the client's doorbell
stream (`console-queue-events`) rings on any change to any of its conversations and the page
fetches `inbox.json` with its filters; without push it polls. Reads: apps/console/
inbox_selectors.py; writes: apps/escalations/services.py and apps/reasoning/handback.py."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.timesince import timesince
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from apps.api.permissions import SUPPORT
from apps.console.access import (
    ConsoleAccess,
    console_view,
    conversation_or_404,
    conversation_url,
    json_view,
    refresh_context,
)
from apps.console.inbox_selectors import (
    CHANNELS,
    MAX_SEARCH_CHARS,
    STATES,
    InboxFilters,
    InboxPage,
    conversation_customer,
    conversation_state,
    conversation_title,
    inbox_filter_choices,
    inbox_page,
    inbox_teammates,
)
from apps.conversations.models import Conversation, Role
from apps.core.exceptions import ApplicationError
from apps.escalations.services import (
    conversation_assign,
    conversation_note_add,
    conversation_takeover,
)
from apps.reasoning.handback import conversation_hand_back

FILTER_KEYS = ("state", "assignee", "mode", "tool", "flagged", "q", "channel")


def parse_filters(params: QueryDict) -> InboxFilters:
    """The inbox's filters from the query string; unknown values mean "no filter"."""
    state = params.get("state", "")
    page_raw = params.get("page", "1")
    return InboxFilters(
        state=state if state in STATES else "",
        assignee=params.get("assignee", "")[:20],
        mode=params.get("mode", "")[:20],
        tool=params.get("tool", "")[:64],
        flagged=params.get("flagged") in ("1", "on", "true"),
        q=params.get("q", "").strip()[:MAX_SEARCH_CHARS],
        channel=params.get("channel", "") if params.get("channel", "") in CHANNELS else "",
        page=int(page_raw)
        if page_raw.isascii() and page_raw.isdigit() and len(page_raw) < 6
        else 1,
    )


def _query(access: ConsoleAccess, filters: InboxFilters, **changes: Any) -> str:
    values: dict[str, Any] = {"client": access.client.slug}
    for key in FILTER_KEYS:
        value = changes.get(key, getattr(filters, key))
        if value:
            values[key] = "1" if value is True else value
    page = changes.get("page", filters.page)
    if page and page > 1:
        values["page"] = page
    return "?" + urlencode(values)


def _row(access: ConsoleAccess, conversation: Conversation, now: Any) -> dict[str, Any]:
    state = conversation_state(conversation, now)
    last_at = conversation.last_message_at
    last_role = getattr(conversation, "last_role", "") or ""
    return {
        "id": str(conversation.public_id),
        "url": conversation_url(access, conversation),
        "title": conversation_title(conversation),
        "channel": conversation.channel,
        "channel_label": str(CHANNELS.get(conversation.channel, conversation.channel)),
        "email": conversation.contact_email,
        "customer": conversation_customer(conversation),
        "state": state,
        "waiting": state == "waiting",
        "state_label": str(STATES[state]),
        "assignee": conversation.assignee.email if conversation.assignee else None,
        "last_text": getattr(conversation, "last_text", "") or "",
        "last_role": last_role,
        "last_role_label": str(Role(last_role).label) if last_role in Role.values else "",
        "last_at": last_at.isoformat() if last_at else None,
        "age": timesince(last_at, now) if last_at else "",
    }


def _page_json(access: ConsoleAccess, page: InboxPage) -> dict[str, Any]:
    now = timezone.now()
    return {
        "rows": [_row(access, c, now) for c in page.rows],
        "page": page.page,
        "has_next": page.has_next,
        "waiting": page.counts.get("waiting", 0),
    }


@require_GET
@console_view()
def inbox(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    filters = parse_filters(request.GET)
    page = inbox_page(client=access.client, filters=filters, user=request.user)
    data = _page_json(access, page)
    choices = inbox_filter_choices(client=access.client)
    return render(
        request,
        "console/inbox.html",
        {
            "access": access,
            "filters": filters,
            "rows": data["rows"],
            "page": page,
            "waiting": data["waiting"],
            "states": [(key, str(label)) for key, label in STATES.items()],
            "channels": [(key, str(label)) for key, label in CHANNELS.items()],
            "teammates": inbox_teammates(client=access.client),
            "modes": choices["modes"],
            "tools": choices["tools"],
            "next_url": _query(access, filters, page=page.page + 1) if page.has_next else "",
            "previous_url": _query(access, filters, page=page.page - 1) if page.page > 1 else "",
            "waiting_url": reverse("console-queue") + _query(access, InboxFilters(state="waiting")),
            **refresh_context(access, reverse("console-inbox-poll") + _query(access, filters)),
        },
    )


@require_GET
@json_view
def inbox_poll(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    filters = parse_filters(request.GET)
    page = inbox_page(client=access.client, filters=filters, user=request.user)
    return JsonResponse(_page_json(access, page))


# ---------------------------------------------------------------------------------------------
# Actions on one conversation (the conversation page's forms)
# ---------------------------------------------------------------------------------------------


@require_POST
@console_view(minimum=SUPPORT)
def conversation_takeover_view(
    request: HttpRequest, access: ConsoleAccess, public_id: str
) -> HttpResponse:
    conversation = conversation_or_404(access, public_id)
    conversation_takeover(client=access.client, conversation=conversation, actor=request.user)
    messages.success(
        request, _("You took over: the assistant is silent and the customer sees you joined.")
    )
    return redirect(conversation_url(access, conversation) + "#reply")


@require_POST
@console_view(minimum=SUPPORT)
def conversation_assign_view(
    request: HttpRequest, access: ConsoleAccess, public_id: str
) -> HttpResponse:
    conversation = conversation_or_404(access, public_id)
    # The Claim button and the "Assign to" select share one form: a click on Claim posts the
    # select's value too, so Claim has a name of its own and wins.
    choice = "me" if request.POST.get("claim") == "me" else request.POST.get("assignee", "")
    if choice == "me":
        assignee: Any = request.user
    elif choice == "":
        assignee = None
    else:
        assignee = next(
            (u for u in inbox_teammates(client=access.client) if str(u.pk) == choice), None
        )
        if assignee is None:
            messages.error(request, _("Pick a teammate of this client."))
            return redirect(conversation_url(access, conversation))
    conversation_assign(
        client=access.client, conversation=conversation, assignee=assignee, actor=request.user
    )
    if assignee is None:
        messages.success(request, _("Nobody is assigned now."))
    else:
        messages.success(request, _("Assigned to %(who)s.") % {"who": assignee.email})
    return redirect(conversation_url(access, conversation))


@require_POST
@console_view(minimum=SUPPORT)
def conversation_handback_view(
    request: HttpRequest, access: ConsoleAccess, public_id: str
) -> HttpResponse:
    conversation = conversation_or_404(access, public_id)
    answer_waiting = request.POST.get("answer_waiting", "1") != "0"
    escalation = conversation_hand_back(
        client=access.client,
        conversation=conversation,
        actor=request.user,
        answer_waiting=answer_waiting,
    )
    if escalation is None:
        messages.info(
            request, _("Nothing to hand back: the assistant already owns this conversation.")
        )
    elif answer_waiting:
        messages.success(
            request,
            _("Handed back: the assistant answers what the customer is still waiting for."),
        )
    else:
        messages.success(
            request, _("Handed back without answering: the assistant waits for the customer.")
        )
    return redirect(conversation_url(access, conversation))


@require_POST
@console_view(minimum=SUPPORT)
def conversation_note_view(
    request: HttpRequest, access: ConsoleAccess, public_id: str
) -> HttpResponse:
    conversation = conversation_or_404(access, public_id)
    try:
        conversation_note_add(
            client=access.client,
            conversation=conversation,
            text=request.POST.get("text", ""),
            author=request.user,
        )
    except ApplicationError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, _("Note added. Only your team sees it."))
    return redirect(conversation_url(access, conversation) + "#notes")


def conversation_actions_context(
    access: ConsoleAccess, conversation: Conversation, *, first_customer_text: str | None = None
) -> dict[str, Any]:
    """What templates/console/_inbox_actions.html needs on the conversation page."""
    base = reverse("console-conversation", args=[conversation.public_id])
    return {
        "title": conversation_title(conversation, first_customer_text),
        "state": conversation_state(conversation),
        "state_label": str(STATES[conversation_state(conversation)]),
        "teammates": inbox_teammates(client=access.client),
        "takeover_url": base + "takeover" + access.query,
        "assign_url": base + "assign" + access.query,
        "handback_url": base + "handback" + access.query,
        "note_url": base + "note" + access.query,
        "inbox_url": reverse("console-queue") + access.query,
    }
