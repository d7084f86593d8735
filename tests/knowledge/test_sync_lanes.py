"""Knowledge syncs in their own lane: routed to the `background` queue (the Procfile's
`background` process consumes it, the `worker` process only the turns' queue), at most
KNOWLEDGE_SYNCS_PER_CLIENT running per client (more wait queued and are tried again, never
lost), at most KNOWLEDGE_SOURCES_PER_CLIENT sources per client (refused clearly by the API, the
admin and the tenant import), and re-syncs spread out instead of queued in a burst."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from celery import Celery
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from apps.accounts.models import Role
from apps.core.exceptions import ApplicationError
from apps.knowledge.models import KnowledgeSource, SourceStatus
from apps.knowledge.services.articles import source_create
from apps.knowledge.services.sync import resync_at, source_sync, sources_due
from apps.knowledge.tasks import sync_source
from apps.platform import slots
from apps.provisioning.services import tenant_import
from config.celery import app as celery_app
from tests.api.conftest import assert_error
from tests.conftest import key_for
from tests.factories import MembershipFactory
from tests.support.broker import NEEDS_REDIS
from tests.support.procfile import procfile_commands
from tests.support.tenant_files import one_client_tenant

pytestmark = pytest.mark.django_db
SOURCES = "/api/v1/knowledge/sources/"


def _source(client: Any, url: str, name: str = "Help", **kw: Any) -> KnowledgeSource:
    return KnowledgeSource.objects.create(
        client=client, name=name, kind=kw.pop("kind", "url"), url=url, **kw
    )


def _syncing(client: Any, count: int) -> list[KnowledgeSource]:
    """`count` sources of `client` whose sync runs now (a worker reported a moment ago)."""
    return [
        _source(client, "https://shop.example/", name=f"running {n}", status=SourceStatus.SYNCING)
        for n in range(count)
    ]


# ------------------------------------------------------------------------------ the lanes


def test_background_tasks_go_to_the_background_queue_and_turns_stay_on_the_default():
    router = celery_app.amqp.router
    for name in ("knowledge.sync_source", "knowledge.resync_due", "insights.generate_for_client"):
        assert router.route({}, name, (), {})["queue"].name == "background", name
    for name in ("reasoning.process_turn", "reasoning.run_parked", "reasoning.sweep_turns"):
        assert router.route({}, name, (), {})["queue"].name == "celery", name
    beat_tasks = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert set(settings.BACKGROUND_TASKS) - {"knowledge.sync_source"} <= beat_tasks | {
        "insights.generate_for_client"
    }


def test_the_procfile_runs_a_background_worker_and_the_turn_worker_leaves_its_queue_alone():
    commands = procfile_commands()
    assert "-Q celery " in commands["worker"]
    assert "-Q background " in commands["background"]
    assert "--pool threads" in commands["background"]


def test_a_background_only_worker_adds_no_turn_capacity():
    def worker(*queues: str) -> SimpleNamespace:
        app = Celery("lanes", set_as_current=False)
        app.conf.update(
            task_default_queue=settings.CELERY_TASK_DEFAULT_QUEUE,
            task_queues=settings.CELERY_TASK_QUEUES,
        )
        if queues:
            app.amqp.queues.select(list(queues))
        return SimpleNamespace(app=app)

    assert slots.consumes_live_queue(worker()) is True  # no -Q: both lanes, one process
    assert slots.consumes_live_queue(worker("celery")) is True
    assert slots.consumes_live_queue(worker("background")) is False


@NEEDS_REDIS
def test_a_sync_published_to_redis_lands_in_the_background_queue_only(client_a):
    import redis

    source = _source(client_a, "https://shop.example/")
    r = redis.Redis.from_url(settings.TEST_BROKER_URL)
    r.delete("celery", "background")
    with _real_broker():
        sync_source.apply_async(kwargs={"client_id": client_a.pk, "source_id": source.pk})
        assert (r.llen("background"), r.llen("celery")) == (1, 0)
        body = json.loads(r.lindex("background", 0))
        assert body["headers"]["task"] == "knowledge.sync_source"
    r.delete("celery", "background")


@contextmanager
def _real_broker() -> Iterator[None]:
    """Publish to the test's Redis instead of running tasks eagerly."""
    previous = {k: celery_app.conf[k] for k in ("broker_url", "task_always_eager")}
    celery_app.conf.update(broker_url=settings.TEST_BROKER_URL, task_always_eager=False)
    _reset_pool()
    try:
        yield
    finally:
        celery_app.conf.update(previous)
        _reset_pool()


def _reset_pool() -> None:
    """Connections and producers are pooled per broker URL (kombu's registry): drop them all,
    so the next publish opens fresh ones for the broker now configured."""
    from kombu import pools

    pools.reset()
    celery_app._pool = None
    celery_app.amqp._producer_pool = None


# ------------------------------------------------------------------ concurrent syncs per client


def test_a_client_runs_at_most_its_concurrent_syncs_and_the_next_one_waits(
    client_a, client_b, site
):
    _syncing(client_a, settings.KNOWLEDGE_SYNCS_PER_CLIENT)
    third = _source(client_a, site.url("/returns"), status=SourceStatus.QUEUED)
    result = source_sync(source=third)
    assert result["waiting"] is True
    third.refresh_from_db()
    assert third.status == SourceStatus.QUEUED  # not lost: still queued, saying why
    assert third.progress["message"] == "Waiting: this client's other syncs run first."
    # another client's syncs are not held up by this one's
    theirs = _source(client_b, site.url("/returns"))
    assert source_sync(source=theirs)["created"] == 1
    # a sync whose worker stopped reporting long ago no longer counts
    stale = timezone.now() - timedelta(seconds=settings.KNOWLEDGE_SYNC_SECONDS + 300)
    KnowledgeSource.objects.for_client(client_a).filter(status=SourceStatus.SYNCING).update(
        updated_at=stale
    )
    assert source_sync(source=third)["created"] == 1
    third.refresh_from_db()
    assert third.status == SourceStatus.SYNCED


@NEEDS_REDIS
def test_a_waiting_sync_task_queues_itself_again_later(client_a, site, monkeypatch):
    import redis

    _syncing(client_a, settings.KNOWLEDGE_SYNCS_PER_CLIENT)
    waiting = _source(client_a, site.url("/returns"), status=SourceStatus.QUEUED)
    r = redis.Redis.from_url(settings.TEST_BROKER_URL)
    r.delete("background")
    try:
        with _real_broker():  # the task as a worker thread runs it
            assert sync_source(source_id=waiting.pk, client_id=client_a.pk) == "waiting"
            assert r.llen("background") == 1
            message = json.loads(r.lindex("background", 0))
            assert message["headers"]["task"] == "knowledge.sync_source"
            assert message["headers"]["eta"]  # later, not at once
    finally:
        r.delete("background")
    waiting.refresh_from_db()
    assert waiting.status == SourceStatus.QUEUED


# ------------------------------------------------------------------------- sources per client


def _fill(client: Any, settings: Any, cap: int = 3) -> None:
    settings.KNOWLEDGE_SOURCES_PER_CLIENT = cap
    for n in range(cap):
        source_create(client=client, data={"name": f"s{n}", "kind": "manual"})


def test_the_api_refuses_a_source_beyond_the_cap_and_another_client_is_not_counted(
    client_a, client_b, settings
):
    _fill(client_a, settings)
    error = assert_error(
        key_for(client_a, Role.OWNER).post(
            SOURCES, {"name": "one more", "kind": "manual"}, format="json"
        ),
        400,
    )
    assert "already has 3 knowledge sources" in error["message"]
    assert "sources" in error["fields"]
    assert KnowledgeSource.objects.for_client(client_a).count() == 3
    created = key_for(client_b, Role.OWNER).post(
        SOURCES, {"name": "theirs", "kind": "manual"}, format="json"
    )
    assert created.status_code == 201
    # editing an existing source is not adding one
    first = KnowledgeSource.objects.for_client(client_a).order_by("pk").first()
    assert first is not None
    edited = key_for(client_a, Role.OWNER).patch(
        f"{SOURCES}{first.public_id}/", {"name": "renamed"}, format="json"
    )
    assert edited.status_code == 200


def test_the_admin_refuses_a_source_beyond_the_cap(client, client_a, settings):
    _fill(client_a, settings)
    user = MembershipFactory(client=client_a, role=Role.ADMIN).user
    from django.contrib.auth.models import Permission

    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="knowledge"))
    client.force_login(user)
    response = client.post(
        reverse("admin:knowledge_knowledgesource_add"),
        {"client": client_a.pk, "name": "one more", "kind": "manual", "resync_hours": 0},
    )
    assert response.status_code == 200  # the form again, with the error
    assert "already has 3 knowledge sources" in response.content.decode()
    assert KnowledgeSource.objects.for_client(client_a).count() == 3


def test_the_tenant_import_refuses_sources_beyond_the_cap_naming_the_entry(settings):
    settings.KNOWLEDGE_SOURCES_PER_CLIENT = 2
    sources = [
        {"name": f"s{n}", "kind": "url", "url": f"https://shop.example/{n}"} for n in range(3)
    ]
    data = one_client_tenant(plan={"ai_mode": "standard"}, knowledge={"sources": sources})
    with pytest.raises(ApplicationError) as exc:
        tenant_import(data=data)
    assert "clients[0].knowledge.sources[2].sources" in str(exc.value)
    assert "already has 2 knowledge sources" in str(exc.value)
    assert not KnowledgeSource.objects.unscoped("test").exists()  # all or nothing


# ------------------------------------------------------------------------ re-syncs spread out


def test_a_flood_of_due_sources_is_started_a_clients_share_at_a_time(client_a, client_b):
    long_ago = timezone.now() - timedelta(hours=5)
    for n in range(100):
        _source(
            client_a,
            f"https://slow.example/{n}.xml",
            name=f"flood {n}",
            kind="sitemap",
            resync_hours=1,
            last_synced_at=long_ago,
            status=SourceStatus.SYNCED,
        )
    theirs = _source(client_b, "https://shop.example/", resync_hours=1, last_synced_at=long_ago)
    due = sources_due(limit=20)
    per_client = {c.pk: sum(1 for s in due if s.client_id == c.pk) for c in (client_a, client_b)}
    assert per_client == {client_a.pk: settings.KNOWLEDGE_SYNCS_PER_CLIENT, client_b.pk: 1}
    assert theirs.pk in [s.pk for s in due]
    # while those run, the flooding client gets no more
    KnowledgeSource.objects.unscoped("test").filter(pk__in=[s.pk for s in due]).update(
        status=SourceStatus.SYNCING, updated_at=timezone.now()
    )
    assert sources_due(limit=20) == []


def test_sources_synced_together_fall_due_at_different_times(client_a):
    synced = timezone.now() - timedelta(hours=2)
    sources = [
        _source(client_a, "https://shop.example/", name=f"s{n}", resync_hours=1) for n in range(20)
    ]
    for s in sources:
        s.last_synced_at = synced
    found = [resync_at(s) for s in sources]
    due_at = sorted({at for at in found if at is not None})
    assert len(due_at) == 20  # no two the same
    spread = due_at[-1] - due_at[0]
    assert timedelta(minutes=10) < spread <= timedelta(minutes=15)  # within a quarter hour
    assert all(synced + timedelta(minutes=45) <= at <= synced + timedelta(hours=1) for at in due_at)


def test_the_beat_spaces_the_syncs_it_starts(
    client_a, client_b, monkeypatch, settings, django_capture_on_commit_callbacks
):
    from apps.knowledge.services.sync import resync_due

    settings.KNOWLEDGE_RESYNC_SPACING_SECONDS = 3.0
    long_ago = timezone.now() - timedelta(hours=5)
    for client in (client_a, client_b):
        for n in range(2):
            _source(
                client,
                f"https://shop.example/{n}",
                name=f"s{n}",
                resync_hours=1,
                last_synced_at=long_ago,
                status=SourceStatus.SYNCED,
            )
    sent: list[float | None] = []
    monkeypatch.setattr(  # what is published, not run: the countdowns are the point here
        sync_source, "apply_async", lambda kwargs, countdown=None: sent.append(countdown)
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert resync_due() == 4
    assert sent == [None, 3.0, 6.0, 9.0]
