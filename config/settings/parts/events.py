"""Events out to the business's systems (docs/events.md): delivery settings and the beat task
that runs the retries. The network rules are the tool webhooks' (TOOL_WEBHOOK_ALLOW_*)."""

from config.settings.parts.celery import BACKGROUND_QUEUE, CELERY_BEAT_SCHEDULE, CELERY_TASK_ROUTES
from config.settings.parts.core import env

# Each attempt's wall-clock limit (connect, TLS, answer).
EVENTS_TIMEOUT_SECONDS = env.float("EVENTS_TIMEOUT_SECONDS", default=10.0)
# A CA bundle (PEM file) to verify the endpoints' certificates with instead of the system's
# (a private CA; the tests' throwaway one). Empty: the system's trust store.
EVENTS_CA_BUNDLE = env("EVENTS_CA_BUNDLE", default="")
# How often the beat task sends what is due (retries on their back-off schedule).
EVENTS_SEND_DUE_SECONDS = env.int("EVENTS_SEND_DUE_SECONDS", default=30)
CELERY_BEAT_SCHEDULE["events-send-due"] = {
    "task": "events.send_due",
    "schedule": EVENTS_SEND_DUE_SECONDS,
}
# How often the beat task judges the conversations that ended since, and sends
# `conversation.resolved` for those the assistant resolved (apps/outcomes/services.py).
EVENTS_RESOLUTIONS_SECONDS = env.int("EVENTS_RESOLUTIONS_SECONDS", default=900)
CELERY_BEAT_SCHEDULE["outcomes-record-resolutions"] = {
    "task": "outcomes.record_resolutions",
    "schedule": EVENTS_RESOLUTIONS_SECONDS,
}
# Never a turn's lane.
CELERY_TASK_ROUTES.update(
    {
        name: {"queue": BACKGROUND_QUEUE}
        for name in (
            "events.record",
            "events.deliver",
            "events.send_due",
            "outcomes.record_resolutions",
        )
    }
)
