"""The inbox's reads: every conversation of one client, latest activity first, in the four
states staff work with, filtered and searched — one page in a fixed number of queries.

States (`InboxState`, docs/console.md "The inbox"):
- **assistant** — the assistant answers (status open) and the conversation is active;
- **waiting** — escalated (a person owns it) and no teammate is assigned;
- **teammate** — escalated and assigned to a teammate;
- **resolved** — closed, or the assistant's and idle for `RESOLVED_AFTER_IDLE`.

Conversations waiting for staff are pinned above the rest on the first page (longest waiting
first), so the team sees them before any assistant conversation with newer activity.

Search matches the customer's e-mail or any message text (`icontains`; on PostgreSQL the
trigram indexes of migration conversations 0010 serve both; `_search` picks the plan)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone
from django.utils.translation import gettext, pgettext_lazy
from django.utils.translation import gettext_lazy as _

from apps.accounts.models import Membership, User
from apps.accounts.models import Role as StaffRole
from apps.clients import modes as mode_registry
from apps.clients.models import Client
from apps.conversations.models import (
    Channel,
    Conversation,
    ConversationStatus,
    Kind,
    Message,
    Role,
    Visibility,
)
from apps.flags.selectors import conversations_flagged
from apps.reasoning.models import ReasoningTrace
from apps.tools import wording
from apps.tools.models import ToolExecution

PAGE_SIZE = 50
# An assistant conversation nobody wrote in for this long counts as resolved in the inbox.
RESOLVED_AFTER_IDLE = timedelta(hours=24)
MAX_SEARCH_CHARS = 200
SEARCH_RARE_LIMIT = 300
SEARCH_CHUNK = 200  # the first chunk; each next one is twice as long
TITLE_WORDS = 8
TITLE_CHARS = 60

# The channel badge of each inbox row (and the channel filter's choices).
CHANNELS: dict[str, Any] = {
    "widget": pgettext_lazy("inbox channel badge", "Chat"),
    "email": pgettext_lazy("inbox channel badge", "E-mail"),
}

STATES: dict[str, Any] = {
    "assistant": _("Handled by the assistant"),
    "waiting": _("Waiting for staff"),
    "teammate": _("With a teammate"),
    "resolved": _("Resolved"),
}


@dataclass(frozen=True)
class InboxFilters:
    state: str = ""  # one of STATES, or "" for all
    assignee: str = ""  # "me", "none", a user id, or "" for anyone
    mode: str = ""  # a reasoning mode a turn ran in
    tool: str = ""  # a tool's name the assistant ran
    flagged: bool = False
    q: str = ""
    page: int = 1
    channel: str = ""  # "widget", "email", or "" for both


@dataclass(frozen=True)
class InboxPage:
    rows: list[Conversation]  # the pinned waiting ones first (page 1), then the page
    page: int
    has_next: bool
    filters: InboxFilters
    counts: dict[str, int] = field(default_factory=dict)


def _state_q(state: str, now: Any) -> Q:
    idle_since = now - RESOLVED_AFTER_IDLE
    open_ = Q(status=ConversationStatus.OPEN)
    escalated = Q(status=ConversationStatus.ESCALATED)
    if state == "assistant":
        return open_ & Q(last_message_at__gte=idle_since)
    if state == "waiting":
        return escalated & Q(assignee__isnull=True)
    if state == "teammate":
        return escalated & Q(assignee__isnull=False)
    if state == "resolved":
        return Q(status=ConversationStatus.CLOSED) | (open_ & Q(last_message_at__lt=idle_since))
    return Q()


def conversation_state(conversation: Conversation, now: Any = None) -> str:
    """The inbox state of one conversation (the same rules as the filter)."""
    now = now or timezone.now()
    if conversation.status == ConversationStatus.ESCALATED:
        return "teammate" if conversation.assignee_id else "waiting"
    if conversation.status == ConversationStatus.CLOSED:
        return "resolved"
    last = conversation.last_message_at
    if last is not None and last < now - RESOLVED_AFTER_IDLE:
        return "resolved"
    return "assistant"


def inbox_queryset(*, client: Client, filters: InboxFilters, user: Any = None) -> QuerySet:
    """The client's conversations matching `filters`, latest activity first (conversations
    with no visible message yet have nothing to show and are left out)."""
    now = timezone.now()
    queryset = Conversation.objects.for_client(client).filter(last_message_at__isnull=False)
    if filters.state in STATES:
        queryset = queryset.filter(_state_q(filters.state, now))
    if filters.assignee == "me" and getattr(user, "pk", None):
        queryset = queryset.filter(assignee=user)
    elif filters.assignee == "none":
        queryset = queryset.filter(assignee__isnull=True)
    elif filters.assignee.isdigit():
        queryset = queryset.filter(assignee_id=int(filters.assignee))
    if filters.mode:
        queryset = queryset.filter(
            Exists(
                ReasoningTrace.objects.for_client(client).filter(
                    conversation=OuterRef("pk"), mode=filters.mode
                )
            )
        )
    if filters.tool:
        queryset = queryset.filter(
            Exists(
                ToolExecution.objects.for_client(client).filter(
                    conversation=OuterRef("pk"), tool__name=filters.tool
                )
            )
        )
    if filters.flagged:
        queryset = conversations_flagged(client=client, queryset=queryset)
    if filters.channel in Channel.values:
        queryset = queryset.filter(channel=filters.channel)
    return queryset.order_by("-last_message_at", "-pk")


def _searchable_messages(client: Client, term: str) -> QuerySet:
    """The client's messages whose text holds `term`: what the customer, the assistant and
    staff wrote (visible messages and staff notes), not the internal reasoning."""
    return (
        Message.objects.for_client(client)
        .filter(text__icontains=term)
        .filter(Q(visibility=Visibility.VISIBLE) | Q(kind=Kind.STAFF_NOTE))
        .order_by()  # no (conversation, seq) sort: a LIMIT may stop early
    )


def _search(client: Client, queryset: QuerySet, term: str, need: int) -> QuerySet:
    """`queryset` narrowed to conversations whose customer e-mail or message text holds
    `term`, in the same order, at least its first `need` rows.

    Two plans, chosen by how common the term is. A rare term (at most SEARCH_RARE_LIMIT
    matching messages; an order id, an address) is found through the messages — on PostgreSQL
    the trigram index — and its conversations are then listed. A common word matches most
    conversations, so walking the inbox in its order, in chunks from SEARCH_CHUNK conversations
    up, fills the page after a chunk or two instead of reading every matching message."""
    term = term[:MAX_SEARCH_CHARS]
    matched = list(
        _searchable_messages(client, term).values_list("conversation_id", flat=True)[
            : SEARCH_RARE_LIMIT + 1
        ]
    )
    if len(matched) <= SEARCH_RARE_LIMIT:
        return queryset.filter(Q(contact_email__icontains=term) | Q(pk__in=set(matched)))
    found: list[int] = []
    offset = 0
    ordered = queryset.values_list("pk", "contact_email")
    lowered = term.lower()
    size = SEARCH_CHUNK
    while len(found) < need:
        chunk = list(ordered[offset : offset + size])
        if not chunk:
            break
        offset += size
        size *= 2  # a rarer word than it looked: fewer, longer rounds
        # Matched here, not in SQL: with the text condition PostgreSQL reaches for the
        # trigram index, which for a common word reads every match of the whole client.
        texts = (
            Message.objects.for_client(client)
            .filter(conversation_id__in=[pk for pk, _ in chunk])
            .filter(Q(visibility=Visibility.VISIBLE) | Q(kind=Kind.STAFF_NOTE))
            .order_by()
            .values_list("conversation_id", "text")
        )
        hits = {pk for pk, text in texts if lowered in text.lower()}
        found += [pk for pk, email in chunk if pk in hits or lowered in (email or "").lower()]
    return queryset.filter(pk__in=found[:need])


def _annotated(queryset: QuerySet) -> QuerySet:
    """Adds the first customer message (the title when there is no e-mail) and the latest
    visible message (the preview) — one subquery each, evaluated only for the page's rows."""
    customer = Message.objects.filter(conversation=OuterRef("pk"), role=Role.USER).order_by("seq")
    latest = Message.objects.filter(
        conversation=OuterRef("pk"), visibility=Visibility.VISIBLE
    ).order_by("-seq")
    return queryset.annotate(
        first_customer_text=Subquery(customer.values("text")[:1]),
        last_text=Subquery(latest.values("text")[:1]),
        last_role=Subquery(latest.values("role")[:1]),
    )


def inbox_page(*, client: Client, filters: InboxFilters, user: Any = None) -> InboxPage:
    """One page of the inbox (PAGE_SIZE rows; `has_next` from one extra row, no COUNT over
    the whole inbox), with the number of conversations waiting for staff.

    On the first page the conversations waiting for staff that match the filters come first,
    longest waiting first (at most PAGE_SIZE of them; the "waiting for staff" filter lists
    them all, page by page); the pages below list the others, latest activity first."""
    page = max(1, filters.page)
    start = (page - 1) * PAGE_SIZE
    now = timezone.now()
    queryset = inbox_queryset(client=client, filters=filters, user=user)
    if filters.q:
        queryset = _search(client, queryset, filters.q, start + PAGE_SIZE + 1)
    pinned: list[Conversation] = []
    if filters.state != "waiting":
        waiting_q = _state_q("waiting", now)
        if page == 1:
            pinned = list(
                _annotated(queryset.filter(waiting_q)).order_by("last_message_at", "pk")[:PAGE_SIZE]
            )
        queryset = queryset.exclude(waiting_q)
    rows = list(_annotated(queryset)[start : start + PAGE_SIZE + 1])
    # Assignees in one query (a join would keep PostgreSQL from reading the activity index
    # in order and stopping after the page). Waiting conversations have none.
    assignee_ids = {c.assignee_id for c in rows if c.assignee_id}
    if assignee_ids:
        users = {u.pk: u for u in User.objects.filter(pk__in=assignee_ids)}
        for conversation in rows:
            if conversation.assignee_id:
                conversation.assignee = users.get(conversation.assignee_id)
    waiting = Conversation.objects.for_client(client).filter(_state_q("waiting", now)).count()
    return InboxPage(
        rows=pinned + rows[:PAGE_SIZE],
        page=page,
        has_next=len(rows) > PAGE_SIZE,
        filters=filters,
        counts={"waiting": waiting},
    )


_SPACE = re.compile(r"\s+")


def conversation_title(conversation: Conversation, first_customer_text: str | None = None) -> str:
    """A readable title, its subject: the first words of the customer's first message; the
    customer's e-mail while they have written nothing, else "Conversation <id>". (Who the
    customer is has a column of its own, `conversation_customer`.)"""
    text = first_customer_text
    if text is None:
        text = getattr(conversation, "first_customer_text", None)
    if text is None:
        text = (
            Message.objects.filter(conversation=conversation, role=Role.USER)
            .order_by("seq")
            .values_list("text", flat=True)
            .first()
        )
    words = _SPACE.sub(" ", text or "").strip().split(" ")
    title = " ".join(words[:TITLE_WORDS])
    if len(title) > TITLE_CHARS:
        title = title[: TITLE_CHARS - 1].rstrip() + "…"
    elif len(words) > TITLE_WORDS:
        title += "…"
    return (
        title
        or customer_email(conversation)
        or str(_("Conversation %(id)s") % {"id": str(conversation.public_id)[:8]})
    )


def customer_email(conversation: Conversation) -> str:
    """The customer's address: the verified one, else the one they left in the chat, else the
    visitor id when the client identifies visitors by e-mail."""
    if conversation.customer_verified and conversation.customer_email:
        return conversation.customer_email
    if conversation.contact_email:
        return conversation.contact_email
    if "@" in (conversation.visitor_id or ""):
        return conversation.visitor_id
    return ""


def conversation_customer(conversation: Conversation) -> dict[str, Any]:
    """Who the customer is, for the inbox's customer column: name (verified customers only),
    e-mail and whether the client verified them."""
    verified = conversation.customer_verified
    return {
        "name": conversation.customer_name if verified else "",
        "email": customer_email(conversation),
        "verified": verified,
    }


def mode_label(name: str) -> str:
    """A reasoning mode in plain words, in the active language: the registry's label up to its
    " — " (the name, without the summary after it), e.g. "Adaptive"; an unknown (retired)
    mode's name with its underscores as spaces."""
    try:
        label = mode_registry.get(name).label
    except mode_registry.UnknownMode:
        return name.replace("_", " ").capitalize()
    return gettext(label.split(" — ", 1)[0].strip())


def inbox_teammates(*, client: Client) -> list[Any]:
    """Who a conversation can be assigned to: the client's staff with the agent role or above."""
    memberships = (
        Membership.objects.for_client(client)
        .select_related("user")
        .filter(user__is_active=True)
        .exclude(role=StaffRole.VIEWER)
        .order_by("user__email")
    )
    return [m.user for m in memberships]


def inbox_filter_choices(*, client: Client) -> dict[str, list[Any]]:
    """The modes (name, label in plain words) and tools the filters offer: the ones this
    client's conversations used."""
    modes = _used_in_conversations(ReasoningTrace.objects.for_client(client), "mode")
    tools = _used_in_conversations(ToolExecution.objects.for_client(client), "tool__name")
    return {
        "modes": [(name, mode_label(name)) for name in sorted(modes - {""})],
        "tools": [(name, tool_label(name)) for name in sorted(tools)],
    }


def _used_in_conversations(rows: QuerySet[Any], field: str) -> set[str]:
    """The distinct values of `field` among the rows that belong to a conversation."""
    return set(
        rows.filter(conversation__isnull=False).order_by().values_list(field, flat=True).distinct()
    )


def tool_label(name: str) -> str:
    """A tool's name as words: `lookup_order` reads "Lookup order" (apps/tools/wording.py)."""
    return wording.humanised(name)
