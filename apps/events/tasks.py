"""The events tasks (the `background` queue): record an event, send one delivery, and the beat
task that sends what is due (retries, and anything a lost message left behind)."""

from celery import shared_task

from apps.core.tasks import tenant_task
from apps.core.tenancy import current_tenant
from apps.events.services import deliveries_send_due, delivery_send, event_record


@tenant_task("events.record", retry_db=True)
def record(event: dict, client_id: int) -> None:
    """One delivery per subscription of the event's type. Safe to run twice."""
    event_record(client_id=client_id, event=event)


@tenant_task("events.deliver")
def deliver(delivery_id: int, client_id: int) -> None:
    """Send one delivery if it is due (a failure schedules its retry; the beat runs it)."""
    if current_tenant() is None:
        return
    delivery_send(client_id=client_id, delivery_id=delivery_id)


@shared_task(name="events.send_due", ignore_result=True)
def send_due() -> None:
    """Beat: send the deliveries whose (next) attempt is due."""
    deliveries_send_due()
