"""Knowledge import tasks (thin: the work is in apps/knowledge/services/sync.py)."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from apps.core.tasks import TenantTask
from apps.knowledge.models import KnowledgeSource
from apps.knowledge.services.sync import resync_due as _resync_due
from apps.knowledge.services.sync import source_sync

# A sync ends by KNOWLEDGE_SYNC_SECONDS on its own; the limits leave room for the bookkeeping.
_SOFT_LIMIT = int(settings.KNOWLEDGE_SYNC_SECONDS) + 60
_HARD_LIMIT = int(settings.KNOWLEDGE_SYNC_SECONDS) + 90


@shared_task(
    name="knowledge.sync_source",
    base=TenantTask,
    tenant_from=("knowledge.KnowledgeSource", "source_id"),
    acks_late=True,
    ignore_result=True,
    soft_time_limit=_SOFT_LIMIT,
    time_limit=_HARD_LIMIT,
)
def sync_source(source_id: int) -> str:
    """Sync one source; a source that is gone, or already being synced, is skipped."""
    source = (
        KnowledgeSource.objects.for_current_client()
        .select_related("client")
        .filter(pk=source_id)
        .first()
    )
    if source is None:
        return "gone"
    result = source_sync(source=source)
    return "skipped" if result.get("skipped") else str(source.status)


@shared_task(name="knowledge.resync_due", acks_late=True, ignore_result=True)
def resync_due() -> int:
    """The beat: queue the syncs whose `resync_hours` have passed (bounded per run)."""
    return _resync_due()
