import time
from typing import Any

from celery import shared_task
from django.conf import settings

from apps.conversations.models import Message
from apps.core.slots import slot
from apps.reasoning.services import TurnBusy, turn_process

BUSY_RETRY_SECONDS = 1.0
# Over the tenant's concurrency cap (TURNS_PER_CLIENT_MAX) the task goes back to the queue.
FAIRNESS_RETRY_SECONDS = 0.5
EAGER_WAIT_STEP_SECONDS = 0.2


@shared_task(name="reasoning.process_turn", bind=True, acks_late=True, ignore_result=True)
def process_turn(self: Any, message_id: int) -> None:
    """Run the turn of one customer message. Safe to run twice: the turn is claimed by a unique
    row, replies are posted once, tool runs are keyed by an idempotency key. Turns of one
    conversation run in message order: a later one waits (retries) while an earlier one runs."""
    if self.request.is_eager:
        _run_eagerly(message_id)
        return
    client_id = Message.objects.filter(pk=message_id).values_list("client_id", flat=True).first()
    limit = int(settings.TURNS_PER_CLIENT_MAX)
    with slot(
        f"turns:{client_id}", limit=limit, lease_seconds=settings.CELERY_TASK_TIME_LIMIT
    ) as ok:
        if not ok:  # the tenant already has its share of turns running: queue again, shortly
            raise self.retry(
                countdown=FAIRNESS_RETRY_SECONDS,
                max_retries=int(settings.CELERY_TASK_TIME_LIMIT / FAIRNESS_RETRY_SECONDS),
            )
        try:
            turn_process(message_id=message_id)
        except TurnBusy as exc:
            max_retries = int(settings.CELERY_TASK_TIME_LIMIT / BUSY_RETRY_SECONDS)
            raise self.retry(
                exc=exc, countdown=BUSY_RETRY_SECONDS, max_retries=max_retries
            ) from exc


def _run_eagerly(message_id: int) -> None:
    """No broker (the demo): wait in this thread for the earlier turn of another request."""
    deadline = time.monotonic() + settings.CELERY_TASK_TIME_LIMIT
    while True:
        try:
            turn_process(message_id=message_id)
            return
        except TurnBusy:
            if time.monotonic() > deadline:
                raise
            time.sleep(EAGER_WAIT_STEP_SECONDS)
