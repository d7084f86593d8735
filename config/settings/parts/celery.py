"""Celery: the broker, task limits derived from the turn deadline, the two queues, and the
beat schedule that the other parts add their periodic tasks to."""

from kombu import Queue

from config.settings.parts.core import env
from config.settings.parts.i18n import TIME_ZONE

# Celery: with no broker configured, tasks run eagerly in-process (the demo needs no Redis).
CELERY_TASK_ALWAYS_EAGER = not env("CELERY_BROKER_URL", default="")
CELERY_BROKER_URL = env("CELERY_BROKER_URL", default="") or "memory://localhost/"
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# One turn, start to finish (docs/operations.md): every model call, webhook call and retry of a
# turn fits in REASONING_TURN_DEADLINE_SECONDS; the task's limits add room for the final
# bookkeeping; the lease (how long a turn's claim and its conversation's turn lock hold) is the
# hard limit, so a live turn is never taken over; Redis redelivers an unacknowledged turn (its
# worker died) only after the lease, and checks for such turns every 10 s.
REASONING_TURN_DEADLINE_SECONDS = env.int("REASONING_TURN_DEADLINE_SECONDS", default=90)
CELERY_TASK_SOFT_TIME_LIMIT = REASONING_TURN_DEADLINE_SECONDS + 20
CELERY_TASK_TIME_LIMIT = REASONING_TURN_DEADLINE_SECONDS + 30
REASONING_TURN_LEASE_SECONDS = CELERY_TASK_TIME_LIMIT
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": REASONING_TURN_LEASE_SECONDS + 10,
    "unacked_restore_interval": 10,
    "unacked_restore_throttle": 1,
    # a broker that vanished without closing the socket must not hang a publish forever
    "socket_timeout": 10,
    "socket_connect_timeout": 5,
}
# The sweeper (reasoning.sweep_turns, on the beat schedule below) re-queues or hands off turns
# left unfinished past their lease.
REASONING_SWEEP_INTERVAL_SECONDS = env.int("REASONING_SWEEP_INTERVAL_SECONDS", default=30)
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Two lanes (docs/deployment.md, "Background work"): turns and everything a customer waits for
# go to the default queue; long housekeeping (knowledge syncs and their beat, the nightly
# insights, billing rollups, retention runs) goes to the `background` queue, which the
# Procfile's `background` process consumes, so it never takes a thread a live turn needs. A
# worker started without `-Q` consumes both (the Makefile's): there a knowledge sync takes a
# slot at the lowest priority (apps/platform/slots.py).
CELERY_TASK_DEFAULT_QUEUE = "celery"
BACKGROUND_QUEUE = "background"
CELERY_TASK_QUEUES = (  # each queue its own routing key: a message lands in one queue only
    Queue(CELERY_TASK_DEFAULT_QUEUE, routing_key=CELERY_TASK_DEFAULT_QUEUE),
    Queue(BACKGROUND_QUEUE, routing_key=BACKGROUND_QUEUE),
)
BACKGROUND_TASKS = (
    "knowledge.sync_source",
    "knowledge.resync_due",
    "insights.schedule_nightly",
    "insights.generate_for_client",
    "billing.rollup_daily_usage",
    "billing.reconcile_usage_counters",
    "notes.apply_retention",
    "privacy.apply_retention",
    "identity.purge_email_codes",
)
CELERY_TASK_ROUTES = {name: {"queue": BACKGROUND_QUEUE} for name in BACKGROUND_TASKS}
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = TIME_ZONE
# Periodic tasks: each part adds its own (CELERY_BEAT_SCHEDULE[name] = ...).
CELERY_BEAT_SCHEDULE: dict[str, dict[str, object]] = {
    # Turns left unfinished past their lease (a killed worker, a lost task, a database outage):
    # re-queued once, then handed to a person (docs/operations.md). Idempotent.
    "reasoning-sweep-turns": {
        "task": "reasoning.sweep_turns",
        "schedule": REASONING_SWEEP_INTERVAL_SECONDS,
    },
}
