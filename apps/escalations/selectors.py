"""Read-side queries for escalations, always scoped to one client."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import OuterRef, QuerySet, Subquery

from apps.api.schema import parse_uuid
from apps.clients.models import Client
from apps.conversations.models import Conversation, Kind, Message
from apps.conversations.models import Role as MessageRole
from apps.escalations.models import Escalation, EscalationStatus

RECENTLY_RESOLVED_LIMIT = 20
OPEN_QUEUE_LIMIT = 500


def escalation_list(*, client: Client, status: str | None = None) -> QuerySet[Escalation]:
    """The client's escalations, newest first, with conversation and assignee loaded."""
    queryset = Escalation.objects.for_client(client).select_related("conversation", "assigned_to")
    if status:
        queryset = queryset.filter(status=status)
    return queryset.order_by("-created_at", "-pk")


def escalation_get(*, client: Client, escalation_id: str | int) -> Escalation | None:
    """The client's escalation with this id — its public id (a UUID string, as the API shows
    it) or, from our own code, its primary key; None for a malformed, unknown or another
    client's id alike."""
    queryset = Escalation.objects.for_client(client).select_related("conversation", "assigned_to")
    if isinstance(escalation_id, int):
        return queryset.filter(pk=escalation_id).first()
    public_id = parse_uuid(escalation_id)
    if public_id is None:
        return None
    return queryset.filter(public_id=public_id).first()


def escalation_open_for_conversation(
    *, client: Client, conversation: Conversation
) -> Escalation | None:
    return (
        Escalation.objects.for_client(client)
        .select_related("conversation", "assigned_to")
        .filter(conversation=conversation, status=EscalationStatus.OPEN)
        .first()
    )


@dataclass(frozen=True)
class EscalationQueue:
    open: list[Escalation]
    recently_resolved: list[Escalation]


def _with_last_customer_message(queryset: QuerySet[Escalation]) -> QuerySet[Escalation]:
    last_text = (
        Message.objects.filter(conversation=OuterRef("conversation"), role=MessageRole.USER)
        .order_by("-seq")
        .values("text")[:1]
    )
    last_at = (
        Message.objects.filter(conversation=OuterRef("conversation"), role=MessageRole.USER)
        .order_by("-seq")
        .values("created_at")[:1]
    )
    # The first one is the conversation's subject (the console titles the queue's rows by it).
    first_text = (
        Message.objects.filter(conversation=OuterRef("conversation"), role=MessageRole.USER)
        .order_by("seq")
        .values("text")[:1]
    )
    return queryset.annotate(
        last_customer_text=Subquery(last_text),
        last_customer_at=Subquery(last_at),
        first_customer_text=Subquery(first_text),
    )


def escalation_queue(*, client: Client) -> EscalationQueue:
    """The staff console's queue in two queries: every open escalation, longest waiting first,
    then the most recently resolved ones — each with its conversation, assignee and the
    customer's first and last messages."""
    base = _with_last_customer_message(
        Escalation.objects.for_client(client).select_related("conversation", "assigned_to")
    )
    open_ = base.filter(status=EscalationStatus.OPEN).order_by("created_at", "pk")
    resolved = base.filter(status=EscalationStatus.RESOLVED).order_by("-resolved_at", "-pk")
    return EscalationQueue(
        open=list(open_[:OPEN_QUEUE_LIMIT]),
        recently_resolved=list(resolved[:RECENTLY_RESOLVED_LIMIT]),
    )


def staff_note_list(*, client: Client, conversation: Conversation) -> QuerySet[Message]:
    """The conversation's staff notes (internal), oldest first, with their authors."""
    return (
        Message.objects.for_client(client)
        .select_related("author")
        .filter(conversation=conversation, kind=Kind.STAFF_NOTE)
        .order_by("seq")
    )
