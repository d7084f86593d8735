"""The outcomes beat task (the `background` queue): judge the conversations that ended, once,
and send `conversation.resolved` for those the assistant resolved (docs/events.md)."""

from celery import shared_task

from apps.outcomes.services import resolutions_record_all


@shared_task(name="outcomes.record_resolutions", ignore_result=True)
def record_resolutions() -> None:
    """Beat: judge what ended since the last run."""
    resolutions_record_all()
