import contextlib
import logging
import time
from typing import Any

from celery import Task, shared_task
from django.conf import settings

from apps.conversations.models import Message
from apps.core.slots import slot
from apps.escalations.models import EscalationReason
from apps.reasoning.services import (
    DB_ERRORS,
    TurnBusy,
    fresh_connection,
    on_fresh_connection,
    turn_give_up,
    turn_process,
    turn_waiting_before,
)
from apps.reasoning.turn_notes import turn_notes_write

logger = logging.getLogger(__name__)

BUSY_RETRY_SECONDS = 1.0
# Over the tenant's concurrency cap (TURNS_PER_CLIENT_MAX) the task goes back to the queue.
FAIRNESS_RETRY_SECONDS = 0.5
EAGER_WAIT_STEP_SECONDS = 0.2
# A turn interrupted by a database error is retried after 1, 2, 4, 8 s (± jitter); after the
# last retry the customer gets the fallback reply and a hand-off (docs/operations.md).
DB_MAX_RETRIES = 4
DB_RETRY_BACKOFF_MAX = 8


class TurnTask(Task):
    def on_failure(self, exc: Exception, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        """Every retry failed: answer the customer rather than leave the message waiting."""
        if isinstance(exc, DB_ERRORS) and args:
            _give_up(
                int(args[0]), f"database unavailable through {DB_MAX_RETRIES} retries: {exc!r}"
            )


@shared_task(
    name="reasoning.process_turn",
    bind=True,
    base=TurnTask,
    acks_late=True,
    ignore_result=True,
    autoretry_for=DB_ERRORS,
    max_retries=DB_MAX_RETRIES,
    retry_backoff=True,
    retry_backoff_max=DB_RETRY_BACKOFF_MAX,
    retry_jitter=True,
)
def process_turn(self: Any, message_id: int) -> None:
    """Run the turn of one customer message. Safe to run twice: the turn is claimed by a unique
    row, replies are posted once, tool runs are keyed by an idempotency key. Turns of one
    conversation run in message order: a later one waits (retries) while an earlier one runs.
    A database error retries the whole turn on a fresh connection (autoretry_for)."""
    if self.request.is_eager:
        run_turn_in_process(message_id)
        return
    client_id = Message.objects.filter(pk=message_id).values_list("client_id", flat=True).first()
    limit = int(settings.TURNS_PER_CLIENT_MAX)
    lease = settings.REASONING_TURN_LEASE_SECONDS
    with slot(f"turns:{client_id}", limit=limit, lease_seconds=lease) as ok:
        if not ok:  # the tenant already has its share of turns running: queue again, shortly
            raise self.retry(
                countdown=FAIRNESS_RETRY_SECONDS,
                max_retries=int(lease / FAIRNESS_RETRY_SECONDS),
            )
        try:
            turn_process(message_id=message_id)
        except TurnBusy as exc:
            max_retries = int(settings.REASONING_TURN_LEASE_SECONDS / BUSY_RETRY_SECONDS)
            raise self.retry(
                exc=exc, countdown=BUSY_RETRY_SECONDS, max_retries=max_retries
            ) from exc
        except DB_ERRORS:
            fresh_connection()
            raise


def run_turn_in_process(message_id: int) -> None:
    """No broker (the demo, or the broker is down): run the turn in this thread. Waits for the
    earlier turn of another request; a database error reconnects and retries once, then the
    customer gets the fallback reply and a hand-off. Never raises: the message is stored, and
    what cannot be answered now is left to the sweeper."""
    waited_until = time.monotonic() + settings.REASONING_TURN_LEASE_SECONDS
    db_retried = False
    while True:
        try:
            turn_process(message_id=message_id)
            return
        except TurnBusy:
            if time.monotonic() > waited_until:
                logger.warning("turn still busy after the lease", extra={"message_id": message_id})
                return
            # An earlier message waits for a turn no one may run (queued on a broker that went
            # down): run it first, here. If another thread is on it, it stays busy for us.
            earlier = turn_waiting_before(message_id)
            if earlier is not None:
                with contextlib.suppress(TurnBusy):
                    turn_process(message_id=earlier)
                    continue
            time.sleep(EAGER_WAIT_STEP_SECONDS)
        except DB_ERRORS as exc:
            fresh_connection()
            if db_retried:
                _give_up(message_id, f"database error, retried once: {exc!r}")
                return
            db_retried = True
            logger.warning("turn hit a database error; retrying once", exc_info=True)
        except Exception:  # a turn must never turn a stored message into an error page
            logger.exception("turn failed outside the pipeline", extra={"message_id": message_id})
            return


def _give_up(message_id: int, detail: str) -> None:
    on_fresh_connection(
        "turn give-up",
        turn_give_up,
        message_id=message_id,
        reason=EscalationReason.SYSTEM_FAILURE,
        detail=detail,
    )


@shared_task(name="reasoning.sweep_turns", ignore_result=True)
def sweep_turns() -> None:
    """Beat: re-queue or hand off turns left unfinished past their lease (sweeper.py)."""
    from apps.reasoning.sweeper import turns_sweep

    turns_sweep()


@shared_task(
    name="reasoning.turn_notes",
    ignore_result=True,
    acks_late=True,
    autoretry_for=DB_ERRORS,
    max_retries=3,
    retry_backoff=True,
)
def write_turn_notes(trace_id: int, confidence: int | None = None) -> None:
    """The automatic notes of a finished turn (apps/reasoning/turn_notes.py), after its commit."""
    turn_notes_write(trace_id=trace_id, confidence=confidence)
