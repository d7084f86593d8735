"""The staff console: the escalation queue and one conversation, where an agent reads everything
(internal reasoning collapsed), replies to the customer and hands the conversation back to the AI.

Plain Django views with session login (allauth); who is acting for which client is resolved by
`access.py`, as for every console page. Pages refresh themselves from two small
JSON endpoints (static/console/console.js): when Redis is configured and the app is served over
ASGI (the Procfile's `web`), a live doorbell stream (`…/events`, server-sent events fed by the
same Redis pub/sub as the widget's streams, `apps.conversations.events`) tells the page to fetch
at once when something changed; otherwise (the demo, runserver) the page polls every few seconds.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from django import forms
from django.contrib import messages
from django.core.handlers.asgi import ASGIRequest
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    JsonResponse,
    StreamingHttpResponse,
)
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.timesince import timesince
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_POST

from apps.api.admin import pretty_json
from apps.api.permissions import SUPPORT
from apps.console.access import (
    POLL_SECONDS,
    PUSHED_POLL_SECONDS,
    ConsoleAccess,
    console_view,
    conversation_or_404,
    conversation_url,
    json_error,
    json_view,
    refresh_context,
)
from apps.console.inbox import conversation_actions_context
from apps.console.inbox_selectors import conversation_title
from apps.conversations import events
from apps.conversations.models import Channel, ConversationStatus, Message, Visibility
from apps.conversations.rendering import message_html, message_sources
from apps.conversations.selectors import (
    conversation_get,
    message_list_after,
)
from apps.conversations.serializers import MessageSerializer
from apps.conversations.services import MAX_MESSAGE_CHARS
from apps.core.exceptions import ApplicationError
from apps.escalations.models import Escalation
from apps.escalations.selectors import escalation_open_for_conversation, escalation_queue
from apps.escalations.services import staff_reply
from apps.mail.downloads import attachment_response
from apps.mail.thread import mail_attachment_get, mail_thread
from apps.reasoning.handback import escalation_hand_back
from apps.reasoning.models import ReasoningStep, ReasoningTrace
from apps.reasoning.selectors import conversation_detail

# A doorbell rings at most once per this many seconds (a turn writes several times at once).
DOORBELL_COALESCE_SECONDS = {"conversation": 0.15, "queue": 0.3}
DOORBELL_STREAM_SECONDS = 300
DOORBELL_HEARTBEAT_SECONDS = 15
DOORBELL_RETRY_MS = 3000

# ---------------------------------------------------------------------------------------------
# The queue
# ---------------------------------------------------------------------------------------------


def _queue_row(access: ConsoleAccess, escalation: Any) -> dict[str, Any]:
    now = timezone.now()
    last_at = getattr(escalation, "last_customer_at", None)
    return {
        "id": str(escalation.public_id),
        "conversation": str(escalation.conversation.public_id),
        "title": conversation_title(
            escalation.conversation, getattr(escalation, "first_customer_text", None) or ""
        ),
        "url": conversation_url(access, escalation.conversation),
        "status": escalation.status,
        "reason": escalation.get_reason_display(),
        "detail": escalation.detail,
        "created_at": escalation.created_at.isoformat(),
        "age": timesince(escalation.created_at, now),
        "resolved_at": escalation.resolved_at.isoformat() if escalation.resolved_at else None,
        "last_customer_text": getattr(escalation, "last_customer_text", None) or "",
        "last_customer_age": timesince(last_at, now) if last_at else "",
        "assigned_to": escalation.assigned_to.email if escalation.assigned_to else None,
    }


def _queue_rows(access: ConsoleAccess) -> dict[str, list[dict[str, Any]]]:
    queue = escalation_queue(client=access.client)
    return {
        "open": [_queue_row(access, e) for e in queue.open],
        "recently_resolved": [_queue_row(access, e) for e in queue.recently_resolved],
    }


@require_GET
@console_view()
def queue(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    rows = _queue_rows(access)
    return render(
        request,
        "console/queue.html",
        {
            "access": access,
            "open_rows": rows["open"],
            "resolved_rows": rows["recently_resolved"],
            **refresh_context(access, reverse("console-queue-poll") + access.query),
        },
    )


@require_GET
@json_view
def queue_poll(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    return JsonResponse(_queue_rows(access))


# ---------------------------------------------------------------------------------------------
# One conversation
# ---------------------------------------------------------------------------------------------


class MessageTextField(forms.CharField):
    """A message typed into a console form (a staff reply, a playground question): a small text
    box that, like the API, takes at most a message's characters."""

    widget = forms.Textarea(attrs={"rows": 3, "maxlength": MAX_MESSAGE_CHARS})

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_length=MAX_MESSAGE_CHARS, strip=True, **kwargs)


class ReplyForm(forms.Form):
    text = MessageTextField(label=gettext_lazy("Reply to the customer"))


@dataclass(frozen=True)
class MessageRow:
    message: Message
    internal: bool
    data_json: str
    author: str
    # A visible assistant's or staff reply as the customer sees it: its Markdown rendered
    # ("" for other messages, shown as text) and the articles it came from.
    html: str = ""
    sources: list[dict[str, str]] = field(default_factory=list)


def _message_rows(conversation_messages: list[Message]) -> list[MessageRow]:
    rows = []
    for m in conversation_messages:
        internal = m.visibility == Visibility.INTERNAL
        rows.append(
            MessageRow(
                message=m,
                internal=internal,
                data_json=pretty_json(m.data),
                author=str((m.data or {}).get("author") or ""),
                html="" if internal else message_html(m.role, m.text),
                sources=[] if internal else message_sources(m.data),
            )
        )
    return rows


@dataclass(frozen=True)
class TurnRow:
    trace: ReasoningTrace
    steps: list[tuple[ReasoningStep, str]]


def _turn_rows(traces: list[ReasoningTrace]) -> list[TurnRow]:
    return [
        TurnRow(trace=t, steps=[(s, pretty_json(s.output)) for s in t.steps.all()]) for t in traces
    ]


def _escalation_json(escalation: Escalation | None) -> dict[str, Any] | None:
    if escalation is None:
        return None
    return {
        "id": str(escalation.public_id),
        "reason": escalation.get_reason_display(),
        "detail": escalation.detail,
        "created_at": escalation.created_at.isoformat(),
        "age": timesince(escalation.created_at, timezone.now()),
        "assigned_to": escalation.assigned_to.email if escalation.assigned_to else None,
    }


def _render_conversation(
    request: HttpRequest,
    access: ConsoleAccess,
    public_id: str,
    form: ReplyForm | None = None,
    status: int = 200,
) -> HttpResponse:
    conversation = conversation_detail(client=access.client, public_id=public_id)
    if conversation is None:
        raise Http404("No such conversation.")
    all_messages = list(conversation.messages.all())
    escalations = list(conversation.escalations.all())
    open_escalation = next((e for e in escalations if e.status == "open"), None)
    base = reverse("console-conversation", args=[conversation.public_id])
    mails = (
        list(mail_thread(client=access.client, conversation=conversation))
        if conversation.channel == Channel.EMAIL
        else None
    )
    return render(
        request,
        "console/conversation.html",
        {
            "access": access,
            "inbox": conversation_actions_context(
                access,
                conversation,
                first_customer_text=next((m.text for m in all_messages if m.role == "user"), ""),
            ),
            "conversation": conversation,
            "rows": _message_rows(all_messages),
            "internal_count": sum(1 for m in all_messages if m.visibility == Visibility.INTERNAL),
            "turns": _turn_rows(list(conversation.traces.all())),
            "escalations": escalations,
            "open_escalation": open_escalation,
            "form": form or ReplyForm(),
            "last_seq": all_messages[-1].seq if all_messages else 0,
            "poll_url": base + "poll" + access.query,
            "events_url": base + "events" + access.query,
            "pushed_poll_seconds": PUSHED_POLL_SECONDS,
            "reply_url": base + "reply" + access.query,
            "resolve_url": base + "resolve" + access.query,
            "queue_url": reverse("console-queue") + access.query,
            "poll_seconds": POLL_SECONDS,
            "max_chars": MAX_MESSAGE_CHARS,
            "escalated_status": ConversationStatus.ESCALATED,
            "mails": mails,
            "attachments_url": base + "attachments/",
        },
        status=status,
    )


@require_GET
@console_view()
def conversation_page(request: HttpRequest, access: ConsoleAccess, public_id: str) -> HttpResponse:
    return _render_conversation(request, access, public_id)


@require_POST
@console_view(minimum=SUPPORT)
def conversation_reply(request: HttpRequest, access: ConsoleAccess, public_id: str) -> HttpResponse:
    conversation = conversation_or_404(access, public_id)
    form = ReplyForm(request.POST)
    if not form.is_valid():
        return _render_conversation(request, access, public_id, form=form, status=400)
    try:
        staff_reply(
            client=access.client,
            conversation=conversation,
            text=form.cleaned_data["text"],
            author=request.user,
        )
    except ApplicationError as error:
        form.add_error("text", error.message)
        return _render_conversation(request, access, public_id, form=form, status=error.status)
    messages.success(request, _("Reply sent. You own this conversation until you resolve it."))
    return redirect(conversation_url(access, conversation) + "#reply")


@require_POST
@console_view(minimum=SUPPORT)
def conversation_resolve(
    request: HttpRequest, access: ConsoleAccess, public_id: str
) -> HttpResponse:
    conversation = conversation_or_404(access, public_id)
    escalation = escalation_open_for_conversation(client=access.client, conversation=conversation)
    if escalation is None:
        messages.info(
            request, _("Nothing to resolve: the assistant already owns this conversation.")
        )
    else:
        escalation_hand_back(client=access.client, escalation=escalation, actor=request.user)
        messages.success(request, _("Resolved: the assistant answers this conversation again."))
    return redirect(conversation_url(access, conversation))


@require_GET
@console_view()
def conversation_attachment(
    request: HttpRequest, access: ConsoleAccess, public_id: str, attachment_id: str
) -> HttpResponseBase:
    """An attachment of one of the conversation's e-mails, for staff of its client (another
    client's, a refused or an unknown one is a 404). Sent as a download the browser will not
    run (apps/mail/downloads.py)."""
    conversation = conversation_or_404(access, public_id)
    attachment = mail_attachment_get(
        client=access.client, conversation=conversation, attachment_id=attachment_id
    )
    if attachment is None:
        raise Http404("No such attachment.")
    return attachment_response(attachment)


@require_GET
@json_view
def conversation_poll(request: HttpRequest, access: ConsoleAccess, public_id: str) -> HttpResponse:
    """New messages after `?after=<seq>` plus the conversation's current state."""
    after_raw = request.GET.get("after", "0")
    if not after_raw.isascii() or not after_raw.isdigit() or len(after_raw) > 9:
        return json_error(400, "invalid", "after must be a message seq (a whole number).")
    conversation = conversation_get(client=access.client, public_id=public_id)
    if conversation is None:
        return json_error(404, "not_found", _("Not found."))
    new_messages = message_list_after(
        client=access.client, conversation=conversation, after_seq=int(after_raw)
    )
    escalation = escalation_open_for_conversation(client=access.client, conversation=conversation)
    payload = {
        "status": conversation.status,
        "status_label": conversation.get_status_display(),
        "last_seq": conversation.last_seq,
        "open_escalation": _escalation_json(escalation),
        "messages": [
            {
                **MessageSerializer(m).data,
                "author": str((m.data or {}).get("author") or ""),
                "role_label": m.get_role_display(),
                "kind_label": m.get_kind_display(),
                "data_json": pretty_json(m.data),
                "html": "" if m.visibility == Visibility.INTERNAL else message_html(m.role, m.text),
                "sources": [] if m.visibility == Visibility.INTERNAL else message_sources(m.data),
            }
            for m in new_messages
        ],
    }
    return HttpResponse(
        json.dumps(payload, default=str, ensure_ascii=False),
        content_type="application/json",
    )


# ---------------------------------------------------------------------------------------------
# Live doorbells (server-sent events)
# ---------------------------------------------------------------------------------------------


async def doorbell_stream(key: str, *, coalesce: float) -> AsyncIterator[str]:
    """`event: changed` each time a writer publishes a change under `key` (at most once per
    `coalesce` seconds), heart-beats in between, for DOORBELL_STREAM_SECONDS; the browser then
    reconnects. Reads nothing: the page fetches what changed from its JSON endpoint, so the
    console's content comes from one place whether pushed or polled."""
    hub = events.hub()
    if hub is None:  # pragma: no cover - the view answers 204 without Redis
        return
    started = time.monotonic()
    woken = hub.register_key(key)
    try:
        yield f"retry: {DOORBELL_RETRY_MS}\n\n"
        last_sent = time.monotonic()
        while True:
            now = time.monotonic()
            remaining = DOORBELL_STREAM_SECONDS - (now - started)
            if remaining <= 0:
                return
            wait = max(0.0, min(remaining, DOORBELL_HEARTBEAT_SECONDS - (now - last_sent)))
            try:
                await asyncio.wait_for(woken.wait(), timeout=wait)
            except TimeoutError:
                yield ": keep-alive\n\n"
                last_sent = time.monotonic()
                continue
            await asyncio.sleep(coalesce)  # let the rest of the burst arrive
            woken.clear()
            yield "event: changed\ndata: {}\n\n"
            last_sent = time.monotonic()
    finally:
        hub.unregister_key(key, woken)


def _doorbell(request: HttpRequest, key: str, *, coalesce: float) -> HttpResponseBase:
    if not isinstance(request, ASGIRequest) or not events.push_enabled():
        # No push here (the demo's runserver, no Redis): 204 tells EventSource not to
        # reconnect, and the page keeps polling.
        return HttpResponse(status=204)
    response = StreamingHttpResponse(
        doorbell_stream(key, coalesce=coalesce), content_type="text/event-stream; charset=utf-8"
    )
    response["Cache-Control"] = "no-cache, no-store"
    response["X-Accel-Buffering"] = "no"
    return response


@require_GET
@json_view
def queue_events(request: HttpRequest, access: ConsoleAccess) -> HttpResponseBase:
    """Rings when any conversation of the client changes (new escalations among them)."""
    return _doorbell(
        request, events.client_key(access.client.pk), coalesce=DOORBELL_COALESCE_SECONDS["queue"]
    )


@require_GET
@json_view
def conversation_events(
    request: HttpRequest, access: ConsoleAccess, public_id: str
) -> HttpResponseBase:
    """Rings when this conversation changes (a message, a status change, a turn starting or
    ending)."""
    conversation = conversation_get(client=access.client, public_id=public_id)
    if conversation is None:
        return json_error(404, "not_found", _("Not found."))
    return _doorbell(
        request,
        events.conversation_key(conversation.pk),
        coalesce=DOORBELL_COALESCE_SECONDS["conversation"],
    )
