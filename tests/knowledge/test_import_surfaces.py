"""The import's surfaces: POST …/sources/<id>/sync (roles, tenancy) and the admin's "Sync now"
with the progress on the list and change pages."""

from __future__ import annotations

import uuid

import pytest
from django.urls import reverse

from apps.accounts.models import Role
from apps.accounts.services import api_key_issue
from apps.knowledge.models import Article, KnowledgeSource, SourceKind, SourceStatus
from tests.conftest import api_for
from tests.factories import MembershipFactory
from tests.support.fake_site import FakeSite

pytestmark = pytest.mark.django_db


@pytest.fixture
def site():
    with FakeSite() as s:
        s.html("/returns", "Returning an item", "<p>Return unused items within 30 days.</p>")
        yield s


def _key(client, role=Role.ADMIN):
    return api_for(api_key_issue(client=client, name=f"{role}", role=role)[1])


def _source(client, url, kind=SourceKind.URL):
    return KnowledgeSource.objects.create(client=client, name="Help", kind=kind, url=url)


def _sync_url(source):
    return reverse("api-knowledge-source-sync", args=[source.public_id])


def test_sync_endpoint_queues_and_the_task_runs_after_commit(
    client_a, site, django_capture_on_commit_callbacks
):
    source = _source(client_a, site.url("/returns"))
    with django_capture_on_commit_callbacks(execute=True):
        response = _key(client_a).post(_sync_url(source))
    assert response.status_code == 202
    body = response.json()
    assert body["id"] == str(source.public_id)
    assert body["status"] == "queued"
    assert body["progress"]["message"] == "Waiting to sync."
    assert body["progress"]["done"] == 0
    assert "switched_off_urls" not in body["progress"]
    source.refresh_from_db()
    assert source.status == SourceStatus.SYNCED
    assert Article.objects.for_client(client_a).filter(source=source).count() == 1
    # the next POST shows the last sync's progress until the new one starts
    again = _key(client_a).post(_sync_url(source)).json()
    assert again["status"] == "queued" and again["last_synced_at"]


def test_sync_endpoint_needs_the_admin_role(client_a):
    source = _source(client_a, "http://127.0.0.1:9/help")
    assert _key(client_a, Role.AGENT).post(_sync_url(source)).status_code == 403
    source.refresh_from_db()
    assert source.status == SourceStatus.NEW


def test_sync_endpoint_refuses_what_cannot_be_synced(client_a):
    manual = KnowledgeSource.objects.create(client=client_a, name="Typed", kind=SourceKind.MANUAL)
    response = _key(client_a).post(_sync_url(manual))
    assert response.status_code == 400
    assert "nothing to import" in response.json()["error"]["message"]


@pytest.mark.parametrize("as_session", [False, True])
def test_another_clients_source_is_not_found(client_a, client_b, as_session):
    source = _source(client_a, "http://127.0.0.1:9/help")
    if as_session:
        from rest_framework.test import APIClient

        b = APIClient()
        b.force_login(MembershipFactory(client=client_b, role=Role.OWNER).user)
    else:
        b = _key(client_b, Role.OWNER)
    theirs = b.post(_sync_url(source))
    missing = b.post(reverse("api-knowledge-source-sync", args=[uuid.uuid4()]))
    malformed = b.post(reverse("api-knowledge-source-sync", args=["not-a-uuid"]))
    assert theirs.status_code == missing.status_code == malformed.status_code == 404
    assert theirs.json() == missing.json()
    source.refresh_from_db()
    assert source.status == SourceStatus.NEW


def test_admin_sync_now_and_progress(client, client_a, site, django_capture_on_commit_callbacks):
    source = _source(client_a, site.url("/returns"))
    user = MembershipFactory(client=client_a, role=Role.ADMIN).user
    from django.contrib.auth.models import Permission

    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="knowledge"))
    client.force_login(user)
    changelist = reverse("admin:knowledge_knowledgesource_changelist")
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            changelist, {"action": "sync_now", "_selected_action": [source.pk]}, follow=True
        )
    assert response.status_code == 200
    assert "1 source is syncing" in response.content.decode()
    source.refresh_from_db()
    assert source.status == SourceStatus.SYNCED
    listing = client.get(changelist).content.decode()
    assert "1 / 1 pages" in listing
    page = client.get(reverse("admin:knowledge_knowledgesource_change", args=[source.pk]))
    assert "1 new, 0 updated" in page.content.decode()


def test_admin_sync_now_reports_a_source_that_cannot_sync(client, client_a):
    manual = KnowledgeSource.objects.create(client=client_a, name="Typed", kind=SourceKind.MANUAL)
    user = MembershipFactory(client=client_a, role=Role.ADMIN).user
    from django.contrib.auth.models import Permission

    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="knowledge"))
    client.force_login(user)
    response = client.post(
        reverse("admin:knowledge_knowledgesource_changelist"),
        {"action": "sync_now", "_selected_action": [manual.pk]},
        follow=True,
    )
    assert "Typed: A source typed in by staff has nothing to import." in response.content.decode()
