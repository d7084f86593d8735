"""Read-side queries for approval requests, always scoped to one client."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Case, F, QuerySet, Value, When, Window
from django.db.models.functions import RowNumber

from apps.api.schema import parse_uuid
from apps.approvals.models import ApprovalRequest, ApprovalStatus
from apps.clients.models import Client
from apps.conversations.models import Conversation, Message, Role, Visibility

# How many of the conversation's last messages a card shows, and how much of each.
LAST_MESSAGES = 3
MESSAGE_CHARS = 200
_SHOWN_ROLES = (Role.USER, Role.ASSISTANT, Role.STAFF)


def approval_list(
    *, client: Client, status: str | None = None, conversation: Any = None
) -> QuerySet[ApprovalRequest]:
    """The client's approval requests — waiting ones first (oldest first: the next to expire),
    then the decided ones, newest first — with what the console and the API show loaded."""
    queryset = ApprovalRequest.objects.for_client(client).select_related(
        "tool", "conversation", "decided_by", "execution", "withdrawn_in"
    )
    if status:
        queryset = queryset.filter(status=status)
    if conversation is not None:
        queryset = queryset.filter(conversation=conversation)
    pending_first = Case(When(status=ApprovalStatus.PENDING, then=Value(0)), default=Value(1))
    return queryset.order_by(pending_first, "-created_at", "-pk")


def approval_get(*, client: Client, approval_id: str | int) -> ApprovalRequest | None:
    """The client's approval request with this public id (a UUID string) or, from our own code,
    primary key; None for a malformed, unknown or another client's id alike."""
    queryset = ApprovalRequest.objects.for_client(client).select_related(
        "tool", "conversation", "decided_by", "execution", "withdrawn_in"
    )
    if isinstance(approval_id, int):
        return queryset.filter(pk=approval_id).first()
    public_id = parse_uuid(approval_id)
    if public_id is None:
        return None
    return queryset.filter(public_id=public_id).first()


def last_messages(
    *, client: Client, conversations: Iterable[Conversation], count: int = LAST_MESSAGES
) -> dict[int, list[dict[str, str]]]:
    """Each conversation's last `count` messages the customer saw (theirs, the assistant's and
    staff's), oldest first — one query for all the cards of a page."""
    ids = {c.pk for c in conversations}
    if not ids:
        return {}
    rows = (
        Message.objects.for_client(client)
        .filter(conversation_id__in=ids, visibility=Visibility.VISIBLE, role__in=_SHOWN_ROLES)
        .annotate(
            recent=Window(
                RowNumber(), partition_by=[F("conversation_id")], order_by=F("seq").desc()
            )
        )
        .filter(recent__lte=count)
        .order_by("conversation_id", "seq")
        .values_list("conversation_id", "role", "text")
    )
    found: dict[int, list[dict[str, str]]] = {pk: [] for pk in ids}
    for conversation_id, role, text in rows:
        shown = text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + "…"
        found[conversation_id].append(
            {"role": role, "role_label": str(Role(role).label), "text": shown}
        )
    return found
