"""The import's surfaces: POST …/sources/<id>/sync (roles, tenancy) and the admin's "Sync now"
with the progress on the list and change pages."""

from __future__ import annotations

import uuid

import pytest
from django.urls import reverse

from apps.accounts.models import Role
from apps.accounts.services import api_key_issue
from apps.knowledge.models import Article, KnowledgeSource, SourceStatus
from tests.conftest import api_for
from tests.factories import MembershipFactory

pytestmark = pytest.mark.django_db


def _key(client, role=Role.ADMIN):
    return api_for(api_key_issue(client=client, name=f"{role}", role=role)[1])


def _source(client, url, kind="url"):
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
    manual = KnowledgeSource.objects.create(client=client_a, name="Typed", kind="manual")
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
    manual = KnowledgeSource.objects.create(client=client_a, name="Typed", kind="manual")
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


def _admin_user(client_, role=Role.ADMIN):
    from django.contrib.auth.models import Permission

    user = MembershipFactory(client=client_, role=role).user
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="knowledge"))
    return user


def test_saving_a_new_source_in_the_admin_starts_its_first_sync(
    client, client_a, site, django_capture_on_commit_callbacks
):
    client.force_login(_admin_user(client_a))
    add = reverse("admin:knowledge_knowledgesource_add")
    form = {
        "client": client_a.pk,
        "name": "Help centre",
        "kind": "url",
        "url": site.url("/returns"),
        "language": "en",
        "enabled": "on",
        "resync_hours": 0,
    }
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(add, form, follow=True)
    assert response.status_code == 200
    assert "Help centre is syncing" in response.content.decode()
    source = KnowledgeSource.objects.for_client(client_a).get(name="Help centre")
    assert source.status == SourceStatus.SYNCED  # not "Not synced yet" until Sync now is found
    assert Article.objects.for_client(client_a).filter(source=source).count() == 1


def test_a_manual_source_saves_without_a_sync(client, client_a):
    client.force_login(_admin_user(client_a))
    form = {"client": client_a.pk, "name": "Typed", "kind": "manual", "language": "en",
            "enabled": "on", "resync_hours": 0}  # fmt: skip
    response = client.post(reverse("admin:knowledge_knowledgesource_add"), form, follow=True)
    assert response.status_code == 200
    source = KnowledgeSource.objects.for_client(client_a).get(name="Typed")
    assert source.status == SourceStatus.NEW
    assert "is syncing" not in response.content.decode()


def test_the_source_page_has_sync_now_and_shows_its_progress(
    client, client_a, site, django_capture_on_commit_callbacks
):
    source = _source(client_a, site.url("/returns"))
    client.force_login(_admin_user(client_a))
    change = reverse("admin:knowledge_knowledgesource_change", args=[source.pk])
    page = client.get(change).content.decode()
    assert 'name="_syncnow"' in page and 'id="sync-status"' in page
    assert "Not synced yet" in page
    # A sync waiting to run: the page shows a progress bar and polls the progress URL.
    KnowledgeSource.objects.for_client(client_a).filter(pk=source.pk).update(
        status=SourceStatus.SYNCING, progress={"done": 2, "total": 8, "message": "Reading pages."}
    )
    page = client.get(change).content.decode()
    assert "<progress" in page and "2 of 8 pages" in page and "Reading pages." in page
    progress_url = reverse("admin:knowledge_knowledgesource_progress", args=[source.pk])
    assert progress_url in page
    state = client.get(progress_url).json()
    assert (state["busy"], state["done"], state["total"], state["percent"]) == (True, 2, 8, 25)
    # "Sync now" on the page: saved, synced, back on the same page.
    KnowledgeSource.objects.for_client(client_a).filter(pk=source.pk).update(
        status=SourceStatus.NEW, progress={}
    )
    form = {"name": "Help", "kind": "url", "url": source.url, "language": "",
            "enabled": "on", "resync_hours": 0, "_syncnow": "Sync now"}  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(change, form)
    assert response.status_code == 302 and response["Location"] == change
    source.refresh_from_db()
    assert source.status == SourceStatus.SYNCED
    assert client.get(progress_url).json()["busy"] is False


def test_another_clients_source_progress_is_not_found(client, client_a, client_b):
    theirs = _source(client_b, "https://example.com/help")
    client.force_login(_admin_user(client_a))
    url = reverse("admin:knowledge_knowledgesource_progress", args=[theirs.pk])
    assert client.get(url).status_code == 404
    theirs.refresh_from_db()
    assert theirs.status == SourceStatus.NEW
