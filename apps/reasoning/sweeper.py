"""The sweeper: nothing stays stuck.

Run by Celery beat every `REASONING_SWEEP_INTERVAL_SECONDS` (`reasoning.sweep_turns`). It finds
turns no worker will finish — a trace still `processing` past its lease (its worker was killed,
or a database outage outlived the retries), and a customer message with no turn at all past the
lease (its task was lost) — and re-queues each once. A turn still stuck a lease after that (no
worker took it over, or the one that did died too) is given up: the customer gets the fallback
reply and a hand-off (reason `system_failure`).

Re-queuing is safe: the turn is claimed through its unique trace, and a tool that already ran
is never called again (its `ToolExecution` idempotency key is derived from the trace).
Stale conversation turn locks need no sweeping: a lock is only honoured until its lease ends.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.conversations.models import ConversationStatus, Message, Role
from apps.core.tenancy import tenant_scope
from apps.escalations.models import EscalationReason
from apps.reasoning import dispatch
from apps.reasoning.models import ReasoningTrace, TraceKind, TraceStatus
from apps.reasoning.modes import mode_that_runs
from apps.reasoning.services import trace_note, turn_give_up

logger = logging.getLogger(__name__)

REQUEUED_STEP = "requeued"
# Messages older than this are history, not lost turns (e.g. data imported from elsewhere).
LOOKBACK = timedelta(days=1)
BATCH = 200
# The sweeper looks after every client's unfinished turns: it reads across tenants by design.
SWEEPS_EVERY_CLIENT = "the sweeper looks after every client's unfinished turns"


@dataclass
class SweepResult:
    requeued: int = 0
    given_up: int = 0


def _lease() -> timedelta:
    return timedelta(seconds=settings.REASONING_TURN_LEASE_SECONDS)


def turns_sweep() -> SweepResult:
    """One pass of the sweeper (idempotent: running it twice at once re-queues nothing twice)."""
    result = SweepResult()
    now = timezone.now()
    stale_before = now - _lease()
    lost = list(
        Message.objects.unscoped(SWEEPS_EVERY_CLIENT)
        .filter(
            role=Role.USER,
            turn__isnull=True,
            conversation__status=ConversationStatus.OPEN,
            created_at__lt=stale_before,
            created_at__gt=now - LOOKBACK,
        )
        .order_by("pk")
        .values_list("pk", "client_id")[:BATCH]
    )
    for message_id, client_id in lost:
        with tenant_scope(client_id):  # each turn is looked after in its own client's scope
            _adopt_lost(message_id, stale_before)
    stuck = list(
        ReasoningTrace.objects.unscoped(SWEEPS_EVERY_CLIENT)
        .filter(kind=TraceKind.TURN, status=TraceStatus.PROCESSING, updated_at__lt=stale_before)
        .order_by("pk")
        .values_list("pk", "client_id")[:BATCH]
    )
    for trace_id, client_id in stuck:
        with tenant_scope(client_id):
            outcome = _sweep_trace(trace_id, stale_before)
        if outcome == "requeued":
            result.requeued += 1
        elif outcome == "given_up":
            result.given_up += 1
    if result.requeued or result.given_up:
        logger.warning(
            "sweeper: %d turn(s) re-queued, %d handed off", result.requeued, result.given_up
        )
    return result


def _adopt_lost(message_id: int, stale_before: datetime) -> None:
    """A message whose task never ran: give it a trace (already past its lease, so the next
    step re-queues it, and a worker claiming it takes it over at once)."""
    with transaction.atomic():
        message = (
            Message.objects.for_current_client()
            .select_related("client__plan", "conversation")
            .select_for_update(of=("self",))
            .filter(pk=message_id, turn__isnull=True)
            .first()
        )
        if message is None:
            return
        trace = ReasoningTrace.objects.create(
            client=message.client,
            conversation=message.conversation,
            user_message=message,
            mode=mode_that_runs(message.client.plan.ai_mode),
        )
        ReasoningTrace.objects.filter(pk=trace.pk, client_id=trace.client_id).update(
            updated_at=stale_before - timedelta(seconds=1)
        )
        trace_note(trace, "lost", {"reason": "no worker picked this turn up within its lease"})


def _sweep_trace(trace_id: int, stale_before: datetime) -> str:
    with transaction.atomic():
        trace = (
            ReasoningTrace.objects.for_current_client()
            .select_for_update()
            .filter(pk=trace_id, status=TraceStatus.PROCESSING, updated_at__lt=stale_before)
            .first()
        )
        if trace is None or trace.user_message_id is None:
            return ""  # finished or taken over meanwhile (only turns are swept)
        requeued_at = (
            trace.steps.filter(name=REQUEUED_STEP)
            .order_by("-index")
            .values_list("created_at", flat=True)
            .first()
        )
        if requeued_at is not None and requeued_at >= stale_before:
            # Re-queued less than a lease ago and not claimed yet: the task may still wait
            # behind others in a busy queue. The trace stays stale (a worker takes it over at
            # once); it is given up only when a whole lease passed without a worker on it.
            return ""
        requeued_before = requeued_at is not None
        if not requeued_before:
            trace_note(trace, REQUEUED_STEP, {"reason": "unfinished past its lease"})
        message_id = trace.user_message_id
    if requeued_before:
        turn_give_up(
            message_id=message_id,
            reason=EscalationReason.SYSTEM_FAILURE,
            detail="the turn did not finish, even after being re-queued (worker or database "
            "failure)",
            stale_only=True,
        )
        return "given_up"
    try:
        dispatch.queue(dispatch.TURN, message_id, client_id=trace.client_id)
    except Exception:  # no broker: nobody would run it — answer the customer now
        logger.exception("sweeper could not re-queue a turn", extra={"trace": trace_id})
        turn_give_up(
            message_id=message_id,
            reason=EscalationReason.SYSTEM_FAILURE,
            detail="the turn was stuck and could not be re-queued (broker unavailable)",
            stale_only=True,
        )
        return "given_up"
    return "requeued"
