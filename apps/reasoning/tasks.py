import contextlib
import logging
import random
import threading
import time
from typing import Any

from celery import shared_task, signals
from django.conf import settings

from apps.conversations.models import Message
from apps.core.tasks import TenantTask, tenant_task
from apps.core.tenancy import current_tenant
from apps.platform import slots
from apps.reasoning.admission import (
    DB_ERRORS,
    TurnBusy,
    fresh_connection,
)
from apps.reasoning.services import run_turn_in_process, turn_give_up_after_error, turn_process
from apps.reasoning.turn_notes import turn_notes_write

logger = logging.getLogger(__name__)

# A later message of a conversation whose earlier turn still runs is tried again this soon.
BUSY_RETRY_SECONDS = 0.5
# A turn interrupted by a database error is retried after 1, 2, 4, 8 s (± jitter); after the
# last retry the customer gets the fallback reply and a hand-off (docs/operations.md).
DB_MAX_RETRIES = 4
DB_RETRY_BACKOFF_MAX = 8


def _job(message_id: int, attempt: int = 0, busy_since: float = 0.0) -> str:
    return f"{int(message_id)}:{int(attempt)}:{float(busy_since):.3f}"


class TurnTask(TenantTask):
    """A turn task: runs in the message's client's scope (`client_id=`; TenantTask)."""

    tenant_from = ("conversations.Message", "message_id")

    def apply_async(  # type: ignore[override]  # same call, fewer spelled-out options
        self, args: Any = None, kwargs: Any = None, **options: Any
    ) -> Any:
        """Queueing a turn (from the web process, the sweeper, a retry) parks it in the fleet's
        slot scheduler first (apps/platform/slots.py), so every waiting turn is seen at once; the
        Celery message then only wakes a worker thread, which runs whichever parked job should
        run now. A delayed retry (countdown) is parked when it arrives instead."""
        kwargs = dict(kwargs or {})
        if (
            args
            and not options.get("countdown")
            and not options.get("eta")
            and not self.app.conf.task_always_eager
            and slots.enabled()
        ):
            message_id = int(args[0])
            client_id = kwargs.get("client_id")
            if client_id is None:  # a caller that did not say (the legacy form)
                client_id = (
                    Message.objects.unscoped("legacy turn queued without client_id")
                    .filter(pk=message_id)
                    .values_list("client_id", flat=True)
                    .first()
                )
            job = _job(message_id, kwargs.get("attempt", 0), kwargs.get("busy_since", 0.0))
            if client_id is not None and slots.park(
                tenant=str(client_id), kind=slots.LIVE, job=job
            ):
                args, kwargs = (), {"parked": True}
        return super().apply_async(args, kwargs, **options)


@shared_task(name="reasoning.process_turn", bind=True, base=TurnTask, ignore_result=True)
def process_turn(
    self: Any,
    message_id: int | None = None,
    *,
    parked: bool = False,
    attempt: int = 0,
    busy_since: float = 0.0,
) -> None:
    """Run the turn of one customer message, through the fleet's slots: the turn runs in this
    thread when its tenant may take a slot, else it waits parked (in Redis) and a thread that
    finishes a job runs it next (apps/platform/slots.py). `parked`: the turn was parked when it was
    queued; run whatever parked job should run now. Safe to run twice: the turn is claimed by a
    unique row, replies are posted once, tool runs are keyed by an idempotency key."""
    if self.request.is_eager:
        if message_id is not None:
            run_turn_in_process(message_id)
        return
    if parked or message_id is None:
        slots.run_parked()
        return
    try:
        client_id = (
            Message.objects.for_current_client()  # the message's client (TenantTask)
            .filter(pk=message_id)
            .values_list("client_id", flat=True)
            .first()
        )
    except DB_ERRORS:
        fresh_connection()
        _requeue(message_id, countdown=1.0, attempt=attempt + 1, busy_since=busy_since)
        return
    if client_id is None:
        return
    slots.run_fairly(
        tenant=str(client_id), kind=slots.LIVE, job=_job(message_id, attempt, busy_since)
    )


def run_turn_job(job: str) -> None:
    """Run one turn given its slot (the scheduler's runner for live turns). Never raises: a
    later message whose earlier turn still runs is tried again in BUSY_RETRY_SECONDS (its
    conversation's order holds); a database error retries the turn on a fresh connection after
    1, 2, 4, 8 s, then the customer gets the fallback reply and a hand-off."""
    raw_id, raw_attempt, raw_since = job.split(":")
    message_id, attempt, busy_since = int(raw_id), int(raw_attempt), float(raw_since)
    try:
        turn_process(message_id=message_id)
    except TurnBusy:
        since = busy_since or time.time()
        if time.time() - since > settings.REASONING_TURN_LEASE_SECONDS:
            logger.warning("turn still busy after the lease", extra={"message_id": message_id})
            return  # the sweeper answers it
        _requeue(message_id, countdown=BUSY_RETRY_SECONDS, attempt=attempt, busy_since=since)
    except DB_ERRORS as exc:
        fresh_connection()
        if attempt >= DB_MAX_RETRIES:
            turn_give_up_after_error(
                message_id, f"database unavailable through {DB_MAX_RETRIES} retries: {exc!r}"
            )
            return
        logger.warning("turn hit a database error; retrying", exc_info=True)
        backoff = min(2**attempt, DB_RETRY_BACKOFF_MAX)
        _requeue(message_id, countdown=random.uniform(backoff / 2, backoff), attempt=attempt + 1)  # noqa: S311
    except Exception:
        logger.exception("turn failed outside the pipeline", extra={"message_id": message_id})


def _requeue(message_id: int, *, countdown: float, attempt: int, busy_since: float = 0.0) -> None:
    try:
        process_turn.apply_async(
            (message_id,),
            {"attempt": attempt, "busy_since": busy_since, "client_id": current_tenant()},
            countdown=countdown,
        )
    except Exception:  # the broker is down: the sweeper answers the stored message
        logger.exception("could not re-queue the turn", extra={"message_id": message_id})


slots.register_runner(slots.LIVE, run_turn_job)


@shared_task(name="reasoning.run_parked", ignore_result=True)
def run_parked() -> None:
    """A worker's heartbeat asks a free thread to run parked jobs that may now run."""
    slots.run_parked()


_heartbeat_stop = threading.Event()


@signals.worker_ready.connect
def start_slot_heartbeat(sender: Any = None, **kwargs: Any) -> None:
    """Register this worker process's threads as fleet capacity, renewed every few seconds. A
    worker that consumes only the background queue runs no turn: its threads are not counted."""
    serves = slots.consumes_live_queue(sender)
    slots.set_serves_live(serves)
    if not slots.enabled() or not serves:
        return
    threads = int(getattr(getattr(sender, "controller", None), "concurrency", 0) or 0)
    if threads <= 0:
        return
    threading.Thread(
        target=slots.heartbeat,
        kwargs={"threads": threads, "nudge": run_parked.delay, "stop": _heartbeat_stop},
        name="slots-heartbeat",
        daemon=True,
    ).start()


@signals.worker_shutdown.connect
def stop_slot_heartbeat(**kwargs: Any) -> None:
    """A stopping worker's threads leave the fleet's capacity now, not when they expire."""
    _heartbeat_stop.set()
    with contextlib.suppress(Exception):
        slots.worker_unregister(worker_id=slots.worker_id())


@shared_task(name="reasoning.sweep_turns", ignore_result=True)
def sweep_turns() -> None:
    """Beat: re-queue or hand off turns left unfinished past their lease (sweeper.py)."""
    from apps.reasoning.sweeper import turns_sweep

    turns_sweep()


@tenant_task("reasoning.turn_notes", ("reasoning.ReasoningTrace", "trace_id"), retry_db=True)
def write_turn_notes(trace_id: int, confidence: int | None = None) -> None:
    """The automatic notes of a finished turn (apps/reasoning/turn_notes.py), after its commit."""
    turn_notes_write(trace_id=trace_id, confidence=confidence)
