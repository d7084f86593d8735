from __future__ import annotations

from celery import shared_task

from apps.notes.maintenance import notes_retention_apply


@shared_task(name="notes.apply_retention", acks_late=True, ignore_result=True)
def apply_retention() -> dict[str, int]:
    """Delete each client's notes older than its plan's `notes_retention_days` (scheduled
    daily). Idempotent: a second run finds nothing more to delete."""
    return notes_retention_apply()
