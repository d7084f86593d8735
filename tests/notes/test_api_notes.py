"""The notes staff API: list with filters and search, write, edit / approve / archive, delete,
roles (viewers read only), and tenant isolation on every endpoint."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from apps.accounts.models import Role
from apps.notes.models import Note, NoteSource, NoteStatus, NoteType
from apps.notes.services import note_add
from tests.api.conftest import assert_error
from tests.conftest import key_for, session_for

pytestmark = pytest.mark.django_db


def add(client: Any, content: str, **kwargs: Any) -> Note:
    kwargs.setdefault("type", NoteType.TIP)
    kwargs.setdefault("source", NoteSource.STAFF)
    return note_add(client=client, content=content, **kwargs)


def detail(note: Note | int) -> str:
    return reverse("api-note-detail", args=[note if isinstance(note, int) else note.pk])


LIST = "/api/v1/notes/"


def test_the_urls_are_the_documented_ones():
    assert reverse("api-note-list") == LIST
    assert reverse("api-note-export") == "/api/v1/notes/export/"
    assert reverse("api-note-import") == "/api/v1/notes/import/"
    assert detail(7) == "/api/v1/notes/7/"


def test_list_is_newest_first_with_every_field(viewer_a, client_a, client_b):
    old = add(client_a, "Quote the order code back.", language="en", ref="faq.orders")
    new = add(
        client_a,
        "lookup_order timed out.",
        type=NoteType.FAILURE,
        confidence=0.4,
        ref="lookup_order",
    )
    add(client_b, "Globex's own note.")
    response = viewer_a.get(LIST)
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 2
    assert [n["id"] for n in body["results"]] == [new.pk, old.pk]
    first = body["results"][0]
    assert first["type"] == "failure"
    assert first["content"] == "lookup_order timed out."
    assert first["ref"] == "lookup_order"
    assert first["confidence"] == 0.4
    assert first["source"] == "staff"
    assert first["status"] == "active"
    assert first["hits"] == 1
    assert first["conversation"] is None
    assert set(first) == {
        "id",
        "type",
        "content",
        "language",
        "ref",
        "confidence",
        "source",
        "status",
        "hits",
        "session_id",
        "conversation",
        "turn",
        "reviewed_by",
        "reviewed_at",
        "created_at",
        "updated_at",
    }


def test_filters_type_status_language_and_search(viewer_a, client_a):
    tip = add(client_a, "Customers ask about returns after thirty days.", language="en")
    failure = add(client_a, "Refund tool failed for order TH-1.", type=NoteType.FAILURE)
    pending = add(
        client_a,
        "Spanish customers open with 'Hola'.",
        type=NoteType.PATTERN,
        language="es",
        status=NoteStatus.PENDING_REVIEW,
    )

    def ids(**query: str) -> list[int]:
        response = viewer_a.get(LIST, query)
        assert response.status_code == 200, response.content
        return sorted(n["id"] for n in response.json()["results"])

    assert ids(type="failure") == [failure.pk]
    assert ids(status="pending_review") == [pending.pk]
    assert ids(language="es") == [pending.pk]
    assert ids(language="en") == [tip.pk]
    assert ids(q="refund") == [failure.pk]
    assert ids(q="returns", type="tip") == [tip.pk]
    assert ids(q="returns", type="failure") == []
    assert ids(type="") == sorted([tip.pk, failure.pk, pending.pk])  # empty = not given


@pytest.mark.parametrize(
    ("query", "field"),
    [({"type": "hint"}, "type"), ({"status": "live"}, "status"), ({"q": "x" * 201}, "q")],
)
def test_bad_filters_name_the_parameter(viewer_a, query, field):
    error = assert_error(viewer_a.get(LIST, query), 400, "invalid")
    assert field in error["fields"]


def test_an_agent_writes_a_staff_note(agent_a, client_a):
    response = agent_a.post(
        LIST,
        {"type": "tip", "content": "Quote the order code.", "language": "en", "confidence": 0.9},
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    note = Note.objects.unscoped("test checks the database directly").get(pk=body["id"])
    assert note.client == client_a
    assert note.source == NoteSource.STAFF
    assert note.status == NoteStatus.ACTIVE
    assert (note.type, note.content, note.language, note.confidence) == (
        "tip",
        "Quote the order code.",
        "en",
        0.9,
    )
    assert body["source"] == "staff"


def test_writing_the_same_note_again_bumps_hits(agent_a, client_a):
    payload = {"type": "tip", "content": "Quote the order code."}
    first = agent_a.post(LIST, payload, format="json").json()
    second = agent_a.post(LIST, payload, format="json").json()
    assert first["id"] == second["id"]
    assert second["hits"] == 2
    assert Note.objects.for_client(client_a).count() == 1


def test_a_staff_proposal_may_wait_for_review(agent_a):
    body = agent_a.post(
        LIST, {"type": "pattern", "content": "x", "status": "pending_review"}, format="json"
    ).json()
    assert body["status"] == "pending_review"


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"content": "no type"}, "type"),
        ({"type": "tip"}, "content"),
        ({"type": "tip", "content": ""}, "content"),
        ({"type": "tip", "content": "x" * 2001}, "content"),
        ({"type": "tip", "content": "x", "confidence": 1.5}, "confidence"),
        ({"type": "tip", "content": "x", "source": "ai"}, "source"),
        ({"type": "tip", "content": "x", "client": 1}, "client"),
        ({"type": "tip", "content": "x", "status": "archived"}, "status"),
        ({"type": "tip", "content": "x", "language": "x" * 17}, "language"),
    ],
)
def test_invalid_notes_are_refused_naming_the_field(agent_a, payload, field):
    error = assert_error(agent_a.post(LIST, payload, format="json"), 400, "invalid")
    assert field in error["fields"], error
    assert not Note.objects.unscoped("test checks the database directly").exists()


def test_read_one(viewer_a, client_a):
    note = add(client_a, "One note.")
    response = viewer_a.get(detail(note))
    assert response.status_code == 200
    assert response.json()["content"] == "One note."


@pytest.mark.parametrize("bad", ["0", "abc", "9" * 40, "-1", "99999"])
def test_a_missing_or_malformed_id_is_404(viewer_a, bad):
    assert_error(viewer_a.get(f"/api/v1/notes/{bad}/"), 404, "not_found")


def test_patch_edits_the_text_and_the_hash(agent_a, client_a):
    note = add(client_a, "Old text.")
    old_hash = note.content_hash
    response = agent_a.patch(detail(note), {"content": "New text.", "ref": "faq.x"}, format="json")
    assert response.status_code == 200, response.content
    note.refresh_from_db()
    assert (note.content, note.ref) == ("New text.", "faq.x")
    assert note.content_hash != old_hash
    assert note.source == NoteSource.STAFF  # unchanged


def test_patch_approves_and_archives_recording_who(client_a):
    api = session_for(client_a, Role.AGENT)
    note = add(client_a, "Proposal.", type=NoteType.PATTERN, status=NoteStatus.PENDING_REVIEW)
    body = api.patch(detail(note), {"status": "active"}, format="json").json()
    assert body["status"] == "active"
    assert body["reviewed_by"] == api.staff_user.email
    assert body["reviewed_at"] is not None
    body = api.patch(detail(note), {"status": "archived"}, format="json").json()
    note.refresh_from_db()
    assert note.status == NoteStatus.ARCHIVED


@pytest.mark.parametrize("field", ["source", "hits", "id", "session_id", "content_hash"])
def test_patch_refuses_server_fields(agent_a, client_a, field):
    note = add(client_a, "Note.")
    error = assert_error(agent_a.patch(detail(note), {field: "x"}, format="json"), 400, "invalid")
    assert field in error["fields"]


def test_delete(agent_a, client_a):
    note = add(client_a, "Note.")
    response = agent_a.delete(detail(note))
    assert response.status_code == 204
    assert (
        not Note.objects.unscoped("test checks the database directly").filter(pk=note.pk).exists()
    )
    assert_error(agent_a.delete(detail(note)), 404, "not_found")


# ------------------------------------------------------------------------------------ roles


@pytest.mark.parametrize("kind", ["api_key", "session"])
def test_a_viewer_reads_but_never_writes(client_a, kind):
    api = (
        key_for(client_a, Role.VIEWER) if kind == "api_key" else session_for(client_a, Role.VIEWER)
    )
    note = add(client_a, "Keep me.", status=NoteStatus.PENDING_REVIEW, type=NoteType.PATTERN)
    assert api.get(LIST).status_code == 200
    assert api.get(detail(note)).status_code == 200
    assert api.get(reverse("api-note-export")).status_code == 200
    assert_error(api.post(LIST, {"type": "tip", "content": "x"}, format="json"), 403)
    assert_error(api.patch(detail(note), {"status": "active"}, format="json"), 403)
    assert_error(api.delete(detail(note)), 403)
    assert_error(
        api.post(
            reverse("api-note-import"),
            data='{"type": "tip", "content": "x"}\n',
            content_type="application/x-ndjson",
        ),
        403,
    )
    note.refresh_from_db()
    assert note.status == NoteStatus.PENDING_REVIEW
    assert Note.objects.unscoped("test checks the database directly").count() == 1


def test_import_needs_the_admin_role(client_a):
    body = '{"type": "tip", "content": "x"}\n'
    url = reverse("api-note-import")
    agent = key_for(client_a, Role.AGENT)
    assert_error(agent.post(url, data=body, content_type="application/x-ndjson"), 403)
    admin = key_for(client_a, Role.ADMIN)
    assert admin.post(url, data=body, content_type="application/x-ndjson").status_code == 200


def test_unauthenticated_is_401(api):
    assert_error(api.get(LIST), 401)


# --------------------------------------------------------------------------- cross-tenant


def snapshot(client: Any) -> list[tuple[Any, ...]]:
    return list(
        Note.objects.filter(client=client)
        .order_by("pk")
        .values_list("pk", "type", "content", "language", "ref", "status", "hits", "reviewed_at")
    )


@pytest.fixture
def a_note(client_a) -> Note:
    return add(client_a, "Acme's secret tip.", ref="acme", status=NoteStatus.PENDING_REVIEW)


def test_b_cannot_read_as_note(b_owner, a_note, client_b):
    own = add(client_b, "Globex's note.")
    a_response = b_owner.get(detail(a_note))
    missing = b_owner.get(detail(a_note.pk + 1000))
    assert_error(a_response, 404, "not_found")
    assert a_response.json() == missing.json()
    assert b_owner.get(detail(own)).status_code == 200


def test_b_does_not_see_as_notes_in_list_search_or_export(b_owner, a_note, client_b):
    add(client_b, "Globex's note.")
    listed = b_owner.get(LIST).json()["results"]
    assert [n["content"] for n in listed] == ["Globex's note."]
    assert b_owner.get(LIST, {"q": "secret"}).json()["results"] == []
    exported = b"".join(b_owner.get(reverse("api-note-export")).streaming_content).decode()
    assert "Acme" not in exported
    assert "Globex's note." in exported


def test_b_cannot_change_or_delete_as_note(b_owner, a_note, client_a):
    before = snapshot(client_a)
    assert_error(b_owner.patch(detail(a_note), {"content": "hijack"}, format="json"), 404)
    assert_error(b_owner.patch(detail(a_note), {"status": "active"}, format="json"), 404)
    assert_error(b_owner.delete(detail(a_note)), 404)
    assert snapshot(client_a) == before


def test_b_writes_and_imports_only_into_b(b_owner, a_note, client_a, client_b):
    before = snapshot(client_a)
    same = {"type": "tip", "content": "Acme's secret tip.", "ref": "acme"}
    created = b_owner.post(LIST, same, format="json")
    assert created.status_code == 201
    assert (
        Note.objects.unscoped("test checks the database directly")
        .get(pk=created.json()["id"])
        .client
        == client_b
    )
    imported = b_owner.post(
        reverse("api-note-import"),
        data='{"type": "tip", "content": "Acme\'s secret tip.", "ref": "acme"}\n'
        '{"type": "failure", "content": "new"}\n',
        content_type="application/x-ndjson",
    )
    assert imported.json() == {"created": 1, "skipped": 1}  # the hash is per client
    assert snapshot(client_a) == before
