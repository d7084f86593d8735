"""Privacy and retention: erasing old conversations and notes, keeping privacy records."""

from config.settings.parts.celery import CELERY_BEAT_SCHEDULE
from config.settings.parts.core import env

# Privacy (docs/privacy.md): conversations the retention task erases per run at most (the next
# run continues), and how long the record of an export or erasure is kept (3 years: the usual
# limitation period for a claim about it).
PRIVACY_RETENTION_BATCH = env.int("PRIVACY_RETENTION_BATCH", default=500)
PRIVACY_RECORD_KEEP_DAYS = env.int("PRIVACY_RECORD_KEEP_DAYS", default=1095)
# Delete each client's notes older than its plan's notes_retention_days; idempotent.
CELERY_BEAT_SCHEDULE["notes-apply-retention"] = {
    "task": "notes.apply_retention",
    "schedule": 24 * 60 * 60,
}
# Erase conversations idle longer than their plan's retention_days (a bounded batch per
# run) and drop privacy records past their keeping period; idempotent (docs/privacy.md).
CELERY_BEAT_SCHEDULE["privacy-apply-retention"] = {
    "task": "privacy.apply_retention",
    "schedule": 24 * 60 * 60,
}
