from celery import shared_task

from apps.reasoning.services import turn_process


@shared_task(name="reasoning.process_turn", acks_late=True, ignore_result=True)
def process_turn(message_id: int) -> None:
    """Run the turn of one customer message. Safe to run twice: the turn is claimed by a unique
    row, replies are posted once, tool runs are keyed by an idempotency key."""
    turn_process(message_id=message_id)
