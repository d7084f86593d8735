"""Read side of turns: the staff's view of a conversation with its turns, a turn's status for
the widget, and the per-turn usage list of the billing API. They live here, above the
conversations and billing layers (docs/architecture.md), because they read reasoning traces."""

from __future__ import annotations

import functools
import json
import uuid
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import (
    Count,
    DecimalField,
    Prefetch,
    Q,
    QuerySet,
    Sum,
    Value,
)
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce
from django.utils import timezone

from apps.billing import periods
from apps.clients.models import Client
from apps.conversations.models import Conversation, Message
from apps.conversations.selectors import conversation_detail_queryset
from apps.core.tenant_sql import sql_rows
from apps.reasoning.models import ReasoningStep, ReasoningTrace, TraceKind, TraceStatus

ZERO = Decimal("0")
_MONEY = DecimalField(max_digits=20, decimal_places=8)


def conversation_detail(*, client: Client, public_id: str | uuid.UUID) -> Conversation | None:
    """A conversation with everything staff read, in five queries however long it is: the
    conversation (+ summary), all its messages, its turns (+ customer message), their steps,
    and its escalations (+ assignee)."""
    conversations = conversation_detail_queryset(client=client, public_id=public_id)
    if conversations is None:
        return None
    steps = ReasoningStep.objects.for_client(client).order_by("index")
    turns = (
        ReasoningTrace.objects.for_client(client)
        .select_related("user_message")
        .prefetch_related(Prefetch("steps", queryset=steps))
        .order_by("created_at", "pk")
    )
    return conversations.prefetch_related(Prefetch("traces", queryset=turns)).first()


def _turns_in_progress(client: Client) -> QuerySet[ReasoningTrace]:
    lease_start = timezone.now() - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT)
    return ReasoningTrace.objects.for_client(client).filter(
        status=TraceStatus.PROCESSING, updated_at__gte=lease_start
    )


def turn_in_progress(*, client: Client, conversation_id: int) -> bool:
    """A turn of this conversation is being processed right now (the typing indicator). A turn
    whose worker died stops counting once its lease (the task time limit) has run out."""
    return _turns_in_progress(client).filter(conversation_id=conversation_id).exists()


def conversation_live_state(
    *, client: Client, conversation_id: int
) -> tuple[str, int, bool, dict[str, Any]] | None:
    """`(status, last_seq, a turn in progress, its progress)` of a conversation in ONE query —
    what an event stream re-reads each time it is woken; None when there is no such
    conversation. The progress is `{}`, or in a deliberative turn `{"step": 3, "max_steps": 10}`
    (the widget's "Thinking it through… step 3").

    Plain SQL, not the ORM: every open stream runs this on every change of its conversation
    (≈ 3 times per turn per stream), and building the ORM's subqueries cost ≈ 2 ms of CPU each
    time against ≈ 0.2 ms for the statement itself (docs/benchmarks.md). Same tenancy rule as
    everywhere: the conversation and its traces are matched on the client too."""
    lease_start = timezone.now() - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT)
    rows = sql_rows(
        "reasoning.live_state",
        _live_state_sql(),
        [
            TraceStatus.PROCESSING,
            connection.ops.adapt_datetimefield_value(lease_start),
            TraceStatus.PROCESSING,
            connection.ops.adapt_datetimefield_value(lease_start),
            conversation_id,
            client.pk,
        ],
        client_id=client.pk,
    )
    if not rows:
        return None
    row = rows[0]
    progress = _json_value(row[3])
    return (str(row[0]), int(row[1]), bool(row[2]), progress if isinstance(progress, dict) else {})


@functools.cache
def _live_state_sql() -> str:
    conversation = Conversation._meta.db_table
    trace = ReasoningTrace._meta.db_table
    running = (
        f"FROM {trace} t WHERE t.client_id = c.client_id AND t.conversation_id = c.id"
        " AND t.status = %s AND t.updated_at >= %s"
    )
    # Only table names from the models' own metadata are interpolated; every value is a parameter.
    return (
        f"SELECT c.status, c.last_seq, EXISTS(SELECT 1 {running}),"  # noqa: S608
        f" (SELECT t.progress {running} ORDER BY t.id DESC LIMIT 1)"
        f" FROM {conversation} c WHERE c.id = %s AND c.client_id = %s"
    )


def _json_value(raw: Any) -> Any:
    """A JSON column as a raw cursor returns it: text (SQLite; PostgreSQL's jsonb, which Django
    loads as text) or already decoded."""
    if isinstance(raw, str | bytes):
        try:
            return json.loads(raw)
        except ValueError:
            return None
    return raw


def turn_status(*, client: Client, message: Message) -> str | None:
    """The status of the turn of one customer message; None while no worker has claimed it."""
    return (
        ReasoningTrace.objects.for_client(client)
        .filter(user_message=message)
        .values_list("status", flat=True)
        .first()
    )


def turn_usage_list(
    *, client: Client, start: date, end: date, conversation: str | None = None
) -> QuerySet[ReasoningTrace]:
    """The client's turns from `start` to `end`, newest first, each annotated with its
    provider cost and billed amount (`usage_cost_usd`, `usage_billed_usd`)."""
    turns = (
        ReasoningTrace.objects.for_client(client)
        .filter(
            kind=TraceKind.TURN,
            created_at__gte=periods.day_start(start),
            created_at__lt=periods.day_start(end + timedelta(days=1)),
        )
        .select_related("conversation")
        .annotate(
            usage_cost_usd=Coalesce(
                Sum("usage_records__cost_usd"), Value(ZERO), output_field=_MONEY
            ),
            usage_billed_usd=Coalesce(
                Sum("usage_records__billed_usd"), Value(ZERO), output_field=_MONEY
            ),
        )
        .order_by("-created_at", "-pk")
    )
    if conversation is not None:
        turns = turns.filter(conversation__public_id=conversation)
    return turns


def deliberative_downgrades(*, client: Client, first: date, last: date) -> dict[str, int]:
    """How many of the client's turns that started on `first` … `last` (both included) a limit
    ran adaptive instead of deliberative, by reason (`visitor_budget`, `conversation_budget`,
    `hourly_cap`: the `deliberative_cap` step's). One query."""
    rows = (
        ReasoningStep.objects.for_client(client)
        .filter(
            name="deliberative_cap",
            trace__created_at__gte=periods.day_start(first),
            trace__created_at__lt=periods.day_start(last + timedelta(days=1)),
        )
        .values(reason=KT("output__reason"))
        .annotate(turns=Count("trace", distinct=True))
        .order_by("reason")
    )
    return {str(row["reason"] or ""): int(row["turns"]) for row in rows}


def conversation_given_texts(
    *, client: Client, conversation: Conversation, before_seq: int
) -> list[Any]:
    """What was *given* in the conversation before message `before_seq`: the customer's
    messages and the tool results (their data), oldest first — where an identifying tool
    parameter must come from (`apps.tools.identifiers`)."""
    from apps.conversations.models import Kind, Role

    rows = (
        Message.objects.for_client(client)
        .filter(conversation=conversation, seq__lt=before_seq)
        .filter(Q(role=Role.USER) | Q(kind=Kind.TOOL_RESULT))
        .order_by("seq")
        .values_list("role", "text", "data")
    )
    texts: list[Any] = []
    for role, text, data in rows:
        texts.append(text if role == Role.USER else data.get("result", data))
    return texts
