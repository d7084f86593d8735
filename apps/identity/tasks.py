from __future__ import annotations

from celery import shared_task

from apps.identity.services import email_codes_purge


@shared_task(name="identity.purge_email_codes", acks_late=True, ignore_result=True)
def purge_email_codes() -> int:
    """Delete e-mail one-time codes older than 24 hours (docs/privacy.md). Idempotent."""
    return email_codes_purge()
