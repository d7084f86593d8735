"""Re-syncs on a schedule (the beat task) and the sync task itself."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from apps.knowledge.models import Article, KnowledgeSource, SourceStatus
from apps.knowledge.services.sync import sources_due
from apps.knowledge.tasks import resync_due, sync_source
from tests.factories import ClientFactory

pytestmark = pytest.mark.django_db


def _source(client, url, *, hours=24, synced_hours_ago=None, **kw):
    last = None if synced_hours_ago is None else timezone.now() - timedelta(hours=synced_hours_ago)
    return KnowledgeSource.objects.create(
        client=client,
        name=f"src {hours} {synced_hours_ago}",
        kind=kw.pop("kind", "url"),
        url=url,
        resync_hours=hours,
        last_synced_at=last,
        status=kw.pop("status", SourceStatus.SYNCED if last else SourceStatus.NEW),
        **kw,
    )


def test_sources_due_are_the_web_sources_whose_hours_passed_oldest_first(settings):
    settings.KNOWLEDGE_SYNCS_PER_CLIENT = 5  # the per-client share: test_sync_lanes.py
    a, b = ClientFactory(), ClientFactory()
    url = "https://shop.example/help"
    old = _source(a, url, hours=24, synced_hours_ago=30)
    never = _source(b, url, hours=24)
    older = _source(b, url, hours=6, synced_hours_ago=40)
    _source(a, url, hours=24, synced_hours_ago=2)  # not yet
    _source(a, url, hours=0, synced_hours_ago=99)  # only when asked
    _source(a, url, hours=1, synced_hours_ago=5, enabled=False)
    _source(a, url, hours=1, synced_hours_ago=5, status=SourceStatus.SYNCING)
    _source(a, "", hours=1, kind="manual")
    assert [s.pk for s in sources_due(limit=10)] == [never.pk, older.pk, old.pk]
    assert [s.pk for s in sources_due(limit=2)] == [never.pk, older.pk]
    # a queued sync whose task message was lost is started again once it is stale
    lost = _source(b, url, hours=0, synced_hours_ago=1, status=SourceStatus.QUEUED)
    assert lost.pk not in [s.pk for s in sources_due(limit=10)]
    later = timezone.now() + timedelta(seconds=settings.KNOWLEDGE_SYNC_SECONDS + 180)
    assert lost.pk in [s.pk for s in sources_due(now=later, limit=10)]


def test_the_beat_task_is_scheduled_and_syncs_what_is_due(site, django_capture_on_commit_callbacks):
    from config.celery import app

    entry = settings.CELERY_BEAT_SCHEDULE["knowledge-resync-due"]
    assert entry["task"] == "knowledge.resync_due"
    assert entry["task"] in app.tasks and "knowledge.sync_source" in app.tasks
    client = ClientFactory()
    due = _source(client, site.url("/returns"), hours=24, synced_hours_ago=25)
    fresh = _source(client, site.url("/returns"), hours=24, synced_hours_ago=1)
    with django_capture_on_commit_callbacks(execute=True):
        assert resync_due.apply().get() == 1
    due.refresh_from_db()
    fresh.refresh_from_db()
    assert due.status == SourceStatus.SYNCED
    assert due.last_synced_at > timezone.now() - timedelta(minutes=1)
    assert fresh.last_synced_at < timezone.now() - timedelta(minutes=30)
    assert Article.objects.for_client(client).filter(source=due).count() == 1
    assert not Article.objects.for_client(client).filter(source=fresh).exists()


def test_the_sync_task_runs_in_its_tenants_scope(site):
    client = ClientFactory()
    source = _source(client, site.url("/returns"))
    assert sync_source.apply(kwargs={"client_id": client.pk, "source_id": source.pk}).get() == (
        "synced"
    )
    # a message for a source that is gone is dropped
    gone = source.pk
    source.delete()
    assert sync_source.apply(kwargs={"client_id": client.pk, "source_id": gone}).get() == "gone"


def test_the_command_syncs_a_clients_sources(site):
    from io import StringIO

    from django.core.management import CommandError, call_command

    client = ClientFactory()
    source = _source(client, site.url("/returns"))
    out = StringIO()
    call_command("knowledge_sync", "--client", client.slug, stdout=out)
    assert f"{source.name}: synced — 1 of 1 pages: 1 new" in out.getvalue()
    _source(client, site.url("/missing"))
    with pytest.raises(CommandError, match="1 source"):
        call_command("knowledge_sync", "--client", client.slug, stdout=StringIO())
    with pytest.raises(CommandError, match="No source"):
        call_command("knowledge_sync", "--client", client.slug, "--source", "nope")
