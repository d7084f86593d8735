"""Knowledge import tasks (thin: the work is in apps/knowledge/services/sync.py). They run in
the background lane (the `background` queue, CELERY_TASK_ROUTES): never on a thread a live turn
needs."""

from __future__ import annotations

import random

from celery import shared_task
from django.conf import settings

from apps.core.tasks import tenant_task
from apps.knowledge.models import KnowledgeSource
from apps.knowledge.services.sync import resync_due as _resync_due
from apps.knowledge.services.sync import source_sync, source_sync_wait
from apps.platform import slots

# A sync ends by KNOWLEDGE_SYNC_SECONDS on its own; the limits leave room for the bookkeeping.
_SOFT_LIMIT = int(settings.KNOWLEDGE_SYNC_SECONDS) + 60
_HARD_LIMIT = int(settings.KNOWLEDGE_SYNC_SECONDS) + 90


@tenant_task(
    "knowledge.sync_source",
    ("knowledge.KnowledgeSource", "source_id"),
    soft_time_limit=_SOFT_LIMIT,
    time_limit=_HARD_LIMIT,
)
def sync_source(source_id: int) -> str:
    """Sync one source; a source that is gone, or already being synced, is skipped. A sync that
    may not run now (its client runs KNOWLEDGE_SYNCS_PER_CLIENT syncs, or — in a worker that
    also runs turns — no background slot is free) stays queued and is tried again in about
    KNOWLEDGE_SYNC_WAIT_SECONDS; it is never dropped."""
    source = (
        KnowledgeSource.objects.for_current_client()
        .select_related("client")
        .filter(pk=source_id)
        .first()
    )
    if source is None:
        return "gone"
    ran, result = slots.run_background(
        tenant=str(source.client_id),
        job=f"sync:{source.pk}",
        work=lambda: source_sync(source=source),
    )
    if not ran or result is None:
        source_sync_wait(source=source)
        return _try_later(source)
    if result.get("waiting"):
        return _try_later(source)
    return "skipped" if result.get("skipped") else str(source.status)


def _try_later(source: KnowledgeSource) -> str:
    """Queue the sync again a little later (jittered, so waiting syncs do not come back
    together). Without a broker (the demo) the source stays queued: the next "Sync now", or
    the beat once it counts as stuck, starts it."""
    if sync_source.app.conf.task_always_eager:
        return "waiting"
    wait = float(settings.KNOWLEDGE_SYNC_WAIT_SECONDS)
    sync_source.apply_async(
        kwargs={"client_id": source.client_id, "source_id": source.pk},
        countdown=random.uniform(0.5 * wait, 1.5 * wait),  # noqa: S311  (spacing, not secrets)
    )
    return "waiting"


@shared_task(name="knowledge.resync_due", acks_late=True, ignore_result=True)
def resync_due() -> int:
    """The beat: queue the syncs whose `resync_hours` have passed (bounded per run and per
    client, spaced out)."""
    return _resync_due()
