from __future__ import annotations

from typing import Any

from celery import shared_task

from apps.privacy.services import retention_apply


@shared_task(name="privacy.apply_retention", acks_late=True, ignore_result=True)
def apply_retention() -> dict[str, Any]:
    """Erase the conversations idle longer than their plan's `retention_days` (a bounded batch;
    the next daily run continues) and drop privacy records past their keeping period.
    Idempotent: an erased conversation is never picked again."""
    report = retention_apply()
    return {
        "erased": report.erased,
        "remaining": report.remaining,
        "records_purged": report.records_purged,
    }
