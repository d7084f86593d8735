"""The nightly insights job: one task per active client, fanned out by the beat task
`insights.schedule_nightly` (CELERY_BEAT_SCHEDULE). A client's failure is logged and recorded on
its run; it never stops the other clients' tasks."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from apps.clients.models import Client
from apps.core.tasks import tenant_task
from apps.insights.services import generate_insights, insight_window, insights_run_queued

logger = logging.getLogger(__name__)


@shared_task(name="insights.schedule_nightly", acks_late=True, ignore_result=True)
def schedule_nightly() -> int:
    """Queue `insights.generate_for_client` for every active client; returns how many."""
    ids = list(Client.objects.filter(is_active=True).order_by("pk").values_list("pk", flat=True))
    queued = 0
    for client_id in ids:
        try:
            generate_for_client.delay(client_id=client_id)
        except Exception:  # one client's task (or an eager run of it) never stops the others
            logger.exception("insights: could not run for client %s", client_id)
        else:
            queued += 1
    return queued


@tenant_task("insights.generate_for_client", ("clients.Client", "client_id"))
def generate_for_client(client_id: int, days: int | None = None) -> str:
    """Run the insights for one client over the last `days` whole days (INSIGHTS_DAYS).
    Idempotent: a window already analysed is not analysed again."""
    client = Client.objects.select_related("plan").filter(pk=client_id, is_active=True).first()
    if client is None:
        return "skipped"
    since, until = insight_window(days=days or int(settings.INSIGHTS_DAYS))
    try:
        result = generate_insights(client=client, since=since, until=until)
    except Exception:
        logger.exception("insights run failed for client %s", client.slug)
        raise
    if result.run.error:
        logger.warning("insights for %s: %s", client.slug, result.run.error)
    return str(result.run.status)


@tenant_task("insights.run_now", ("clients.Client", "client_id"))
def run_now(client_id: int, run_id: int) -> str:
    """Do one "Run insights now" run (queued by `insights_run_now` on the background queue)."""
    client = Client.objects.select_related("plan").filter(pk=client_id).first()
    if client is None:
        return "skipped"
    return str(insights_run_queued(client=client, run_id=run_id).status)
