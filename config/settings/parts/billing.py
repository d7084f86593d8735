"""Billing: token reservations, daily rollups and budget counters."""

from config.settings.parts.celery import CELERY_BEAT_SCHEDULE, CELERY_TASK_TIME_LIMIT
from config.settings.parts.core import env

# Billing: tokens reserved per turn before it runs (when the plan sets no per-turn cap), when an
# uncommitted reservation counts as abandoned, and how long after midnight a day may change.
BILLING_TURN_TOKEN_RESERVE = env.int("BILLING_TURN_TOKEN_RESERVE", default=12000)
# A deliberative turn makes 10–25 calls: it reserves (and may use) this much instead.
BILLING_DELIBERATIVE_TURN_TOKEN_RESERVE = env.int(
    "BILLING_DELIBERATIVE_TURN_TOKEN_RESERVE", default=120000
)
BILLING_RESERVATION_STALE_SECONDS = env.int(
    "BILLING_RESERVATION_STALE_SECONDS", default=2 * CELERY_TASK_TIME_LIMIT
)
BILLING_ROLLUP_GRACE_SECONDS = env.int(
    "BILLING_ROLLUP_GRACE_SECONDS", default=CELERY_TASK_TIME_LIMIT + 60
)
# Aggregate yesterday's (and any missed day's) usage into daily rollups; idempotent.
CELERY_BEAT_SCHEDULE["billing-rollup-daily-usage"] = {
    "task": "billing.rollup_daily_usage",
    "schedule": 60 * 60,  # hourly: cheap, and a missed run catches up on the next one
}
# Re-count the monthly budget counters from the usage records (e.g. after a budget is
# switched on mid-month); idempotent.
CELERY_BEAT_SCHEDULE["billing-reconcile-usage-counters"] = {
    "task": "billing.reconcile_usage_counters",
    "schedule": 6 * 60 * 60,
}
