"""Insights: the nightly run over recent conversations."""

from celery.schedules import crontab

from config.settings.parts.celery import CELERY_BEAT_SCHEDULE
from config.settings.parts.core import env

# Insights (docs/architecture.md, "Insights"): when the nightly run starts (server time zone),
# how many whole days it reads, and the bounds of its one model call.
INSIGHTS_HOUR = env.int("INSIGHTS_HOUR", default=3)
INSIGHTS_MINUTE = env.int("INSIGHTS_MINUTE", default=15)
INSIGHTS_DAYS = env.int("INSIGHTS_DAYS", default=7)
INSIGHTS_MAX_INPUT_TOKENS = env.int("INSIGHTS_MAX_INPUT_TOKENS", default=3000)
INSIGHTS_ITEM_CHARS = env.int("INSIGHTS_ITEM_CHARS", default=240)
INSIGHTS_TOKEN_CAP = env.int("INSIGHTS_TOKEN_CAP", default=6000)
INSIGHTS_MIN_COUNT = env.int("INSIGHTS_MIN_COUNT", default=2)
INSIGHTS_MAX_TOPICS = env.int("INSIGHTS_MAX_TOPICS", default=5)
INSIGHTS_LOW_CONFIDENCE_BELOW = env.int("INSIGHTS_LOW_CONFIDENCE_BELOW", default=5)
# A turn whose knowledge search found no chunk scoring above this is a knowledge gap (the
# score's scale is the search's: ts_rank on PostgreSQL, bm25 on SQLite, the fused rank with
# embeddings). 0 = only searches that found nothing at all.
INSIGHTS_KNOWLEDGE_MIN_SCORE = env.float("INSIGHTS_KNOWLEDGE_MIN_SCORE", default=0.0)
INSIGHTS_RUN_STALE_SECONDS = 30 * 60
# Nightly: one insights task per active client (fanned out), over the last INSIGHTS_DAYS
# whole days; idempotent per client and window (docs/operations.md).
CELERY_BEAT_SCHEDULE["insights-nightly"] = {
    "task": "insights.schedule_nightly",
    "schedule": crontab(minute=INSIGHTS_MINUTE, hour=INSIGHTS_HOUR),
}
