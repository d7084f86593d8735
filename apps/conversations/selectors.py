"""Read-side queries for conversations, always scoped to one client. Each decides its own
`select_related` / `prefetch_related` so the number of queries does not grow with the data."""

from __future__ import annotations

import uuid
from datetime import date, datetime, time, timedelta
from typing import Any

from django.db import connection
from django.db.models import (
    Count,
    Exists,
    IntegerField,
    OuterRef,
    Prefetch,
    QuerySet,
    Subquery,
    Value,
)
from django.db.models.functions import Coalesce
from django.utils import timezone

from apps.accounts.models import Membership
from apps.clients.models import Client
from apps.conversations.models import Conversation, Message, Visibility
from apps.conversations.models import Role as MessageRole
from apps.core.tenant_sql import model_columns, sql_models

# The escalations app builds on this one (its models point at Conversation), so its rows are read
# through the reverse relation `Conversation.escalations`, never by importing it.
ESCALATION_OPEN = "open"  # apps.escalations.models.EscalationStatus.OPEN


def _escalations() -> Any:
    """The Escalation model's default (tenant-scoped) manager."""
    return Conversation._meta.get_field("escalations").related_model._default_manager


def _start_of_day(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


def message_count() -> Coalesce:
    """An annotation: how many messages the conversation has (all, internal included)."""
    counts = (
        Message.objects.filter(conversation=OuterRef("pk"))
        .order_by()
        .values("conversation")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(counts, output_field=IntegerField()), Value(0))


def open_escalation() -> Exists:
    """An annotation: whether the conversation has an open escalation."""
    return Exists(_escalations().filter(conversation=OuterRef("pk"), status=ESCALATION_OPEN))


def _with_summary(queryset: QuerySet[Conversation]) -> QuerySet[Conversation]:
    """Adds `message_count` (all messages, internal included) and `has_open_escalation`."""
    return queryset.annotate(message_count=message_count(), has_open_escalation=open_escalation())


def conversation_list(
    *,
    client: Client,
    status: str | None = None,
    created_after: date | None = None,
    created_before: date | None = None,
    has_escalation: bool | None = None,
) -> QuerySet[Conversation]:
    """The client's conversations, newest first, each with its message count and whether an
    escalation is open. `created_after` / `created_before` are inclusive calendar days (in the
    project's time zone); `has_escalation` means "was ever escalated" (open or resolved)."""
    queryset = Conversation.objects.for_client(client)
    if status:
        queryset = queryset.filter(status=status)
    if created_after is not None:
        queryset = queryset.filter(created_at__gte=_start_of_day(created_after))
    if created_before is not None and created_before < date.max:  # date.max: no upper bound
        queryset = queryset.filter(created_at__lt=_start_of_day(created_before + timedelta(days=1)))
    if has_escalation is not None:
        escalated = Exists(_escalations().filter(conversation=OuterRef("pk")))
        queryset = queryset.filter(escalated if has_escalation else ~escalated)
    return _with_summary(queryset).order_by("-created_at", "-pk")


def _as_uuid(value: str | uuid.UUID) -> uuid.UUID | None:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


def conversation_get(*, client: Client, public_id: str | uuid.UUID) -> Conversation | None:
    """The client's conversation with this public id; None for a malformed, unknown or another
    client's id alike."""
    parsed = _as_uuid(public_id)
    if parsed is None:
        return None
    return Conversation.objects.for_client(client).filter(public_id=parsed).first()


def conversation_detail_queryset(
    *, client: Client, public_id: str | uuid.UUID
) -> QuerySet[Conversation] | None:
    """The conversation (+ summary) with its messages and escalations (+ assignee) prefetched;
    None for an id that is not a UUID. `apps.reasoning.selectors.conversation_detail` adds the
    turns (this layer does not read reasoning traces)."""
    parsed = _as_uuid(public_id)
    if parsed is None:
        return None
    messages = Message.objects.for_client(client).order_by("seq")
    escalations = (
        _escalations()
        .for_client(client)
        .select_related("assigned_to")
        .order_by("-created_at", "-pk")
    )
    return (
        _with_summary(Conversation.objects.for_client(client).filter(public_id=parsed))
        .prefetch_related(Prefetch("messages", queryset=messages))
        .prefetch_related(Prefetch("escalations", queryset=escalations))
    )


def message_list_after(
    *, client: Client, conversation: Conversation, after_seq: int = 0
) -> list[Message]:
    """Every message (internal included) after `after_seq`, in order."""
    return list(
        Message.objects.for_client(client)
        .filter(conversation=conversation, seq__gt=after_seq)
        .order_by("seq")
    )


def last_customer_message(*, client: Client, conversation: Conversation) -> Message | None:
    return (
        Message.objects.for_client(client)
        .filter(conversation=conversation, role=MessageRole.USER)
        .order_by("-seq")
        .first()
    )


def staff_client_choices(*, user: Any) -> list[Client]:
    """The active clients a signed-in staff user may act for (every one for a superuser)."""
    if user.is_superuser:
        return list(Client.objects.filter(is_active=True).order_by("name"))
    memberships = (
        Membership.objects.unscoped("the user's memberships, across clients")
        .filter(user=user, client__is_active=True)
        .select_related("client")
        .order_by("client__name")
    )
    return [membership.client for membership in memberships]


def conversation_by_id(
    *, client_id: int, pk: int | None = None, public_id: uuid.UUID | None = None
) -> Conversation | None:
    """The client's conversation with this id or public id (one of them), or None. Plain SQL:
    every widget request about a conversation and every turn read it first, and the ORM's
    building of that read cost ≈ 1 ms of CPU (`turn_profile.py --statements`)."""
    if (pk is None) == (public_id is None):
        raise ValueError("pass pk or public_id")
    if pk is not None:
        where, value = "id", pk
    else:
        field = Conversation._meta.get_field("public_id")
        where, value = "public_id", field.get_db_prep_value(public_id, connection, prepared=False)
    found = sql_models(
        "conversations.get",
        Conversation,
        f"SELECT {model_columns(Conversation)} FROM {Conversation._meta.db_table}"  # noqa: S608
        f" WHERE client_id = %s AND {where} = %s",
        [client_id, value],
        client_id=client_id,
    )
    return found[0] if found else None


def conversation_history(
    *, client: Client, conversation_id: int, upto_seq: int, limit: int
) -> list[Message]:
    """The conversation's last `limit` visible messages up to `upto_seq`, oldest first, with
    what a prompt reads of them (role, text, kind), not the data or the ids. Plain SQL: every
    turn reads it, and the ORM's building of it cost ≈ 1 ms (`turn_profile.py --statements`)."""
    recent = sql_models(
        "conversations.history",
        Message,
        "SELECT id, client_id, conversation_id, seq, role, kind, text"  # noqa: S608 (a table name)
        f" FROM {Message._meta.db_table}"
        " WHERE client_id = %s AND conversation_id = %s AND visibility = %s AND seq <= %s"
        " ORDER BY seq DESC LIMIT %s",
        [client.pk, conversation_id, Visibility.VISIBLE, upto_seq, limit],
        client_id=client.pk,
    )
    return list(reversed(recent))
