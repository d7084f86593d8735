"""The notes admin (the learning gate) and the notes in the conversation debug view: filters,
health numbers, review actions through the service, staff notes, the role rule, and tenant
isolation of every page and action."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse

from apps.accounts.models import Role
from apps.notes.models import Note, NoteSource, NoteStatus, NoteType
from apps.notes.services import note_add
from apps.notes.sessions import current_session_id
from apps.reasoning.models import ReasoningStep
from tests.api.conftest import make_conversation_with_turn
from tests.factories import MembershipFactory

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/notes/note/"


def change_url(note: Note) -> str:
    return reverse("admin:notes_note_change", args=[note.pk])


def staff(client: Any, role: str) -> Any:
    user = MembershipFactory(client=client, role=role).user
    from django.contrib.auth.models import Permission

    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="notes"))
    return user


def add(client: Any, content: str, **kwargs: Any) -> Note:
    kwargs.setdefault("type", NoteType.TIP)
    kwargs.setdefault("source", NoteSource.STAFF)
    return note_add(client=client, content=content, **kwargs)


@pytest.fixture
def notes_a(client_a) -> dict[str, Note]:
    return {
        "failure": add(client_a, "lookup_order timed out.", type=NoteType.FAILURE, language="en"),
        "pattern": add(
            client_a,
            "Spanish customers open with 'Hola'.",
            type=NoteType.PATTERN,
            language="es",
            source=NoteSource.AI,
            session_id="20260101_000000_1_001",
        ),  # pending_review
        "tip": add(client_a, "Quote the order code.", ref="faq.orders"),
    }


def rows(response: Any) -> list[str]:
    return re.findall(
        r'<tr[^>]*>\s*<td class="action-checkbox">.*?</tr>', response.content.decode(), re.S
    )


def test_changelist_lists_with_icons_and_filters_load(admin_client, notes_a):
    response = admin_client.get(CHANGELIST)
    assert response.status_code == 200
    page = response.content.decode()
    assert "❌ FAILURE" in page and "🔍 PATTERN" in page and "📝 TIP" in page
    assert len(rows(response)) == 3
    for query, expected in [
        ({"type__exact": "failure"}, 1),
        ({"status__exact": "pending_review"}, 1),
        ({"source__exact": "ai"}, 1),
        ({"language": "es"}, 1),
        ({"language": "-"}, 1),
        ({"session": "20260101_000000_1_001"}, 1),
        ({"session": current_session_id()}, 2),
        ({"q": "order"}, 2),
    ]:
        filtered = admin_client.get(CHANGELIST, query)
        assert filtered.status_code == 200, query
        assert len(rows(filtered)) == expected, query
    assert current_session_id() in page  # offered in the session filter


def test_changelist_shows_the_seeds_health_numbers_per_client(admin_client, notes_a, client_b):
    add(client_b, "Globex tip.")
    page = admin_client.get(CHANGELIST).content.decode()
    section = page[page.index('id="notes-health"') :]

    def figure(slug: str, name: str) -> str:
        row = section[section.index(f'data-client="{slug}"') :]
        return re.search(rf'data-figure="{name}">([^<]*)<', row).group(1)

    assert figure("acme", "total") == "3"
    assert figure("acme", "sessions") == "2"
    assert figure("acme", "pending_review") == "1"
    assert figure("acme", "failure") == "1"
    assert figure("acme", "pattern") == "1"
    assert figure("acme", "tip") == "1"
    assert figure("acme", "success") == "0"
    assert "ago" in figure("acme", "latest")
    assert figure("globex", "total") == "1"


def test_client_staff_see_only_their_clients_notes_and_numbers(client, notes_a, client_b):
    add(client_b, "Globex secret tip.")
    client.force_login(staff(client_b, Role.VIEWER))
    page = client.get(CHANGELIST).content.decode()
    assert "Globex secret tip." in page
    assert "lookup_order" not in page
    assert 'data-client="acme"' not in page
    assert client.get(change_url(notes_a["tip"])).status_code in {302, 404}


def test_approve_archive_reject_go_through_the_service(client, client_a, notes_a):
    agent = staff(client_a, Role.AGENT)
    client.force_login(agent)
    pattern = notes_a["pattern"]

    def act(action: str, note: Note) -> None:
        response = client.post(
            CHANGELIST, {"action": action, "_selected_action": [note.pk], "post": "yes"}
        )
        assert response.status_code == 302
        note.refresh_from_db()

    act("approve", pattern)
    assert pattern.status == NoteStatus.ACTIVE
    assert pattern.reviewed_by == agent
    act("archive", pattern)
    assert pattern.status == NoteStatus.ARCHIVED
    act("reject", pattern)
    assert (pattern.status, pattern.rejected) == (NoteStatus.ARCHIVED, True)
    # a rejected AI proposal is not put up for review again
    again = note_add(
        client=client_a,
        type=NoteType.PATTERN,
        content=pattern.content,
        language="es",
        source=NoteSource.AI,
    )
    assert again.pk == pattern.pk


def test_a_viewer_cannot_review_edit_add_or_delete(client, client_a, notes_a):
    client.force_login(staff(client_a, Role.VIEWER))
    pattern = notes_a["pattern"]
    for action in ["approve", "archive", "reject", "delete_selected"]:
        response = client.post(
            CHANGELIST, {"action": action, "_selected_action": [pattern.pk], "post": "yes"}
        )
        assert response.status_code in {200, 302, 403}
    pattern.refresh_from_db()
    assert pattern.status == NoteStatus.PENDING_REVIEW
    page = client.get(change_url(pattern))
    assert page.status_code == 200
    assert 'name="_save"' not in page.content.decode()
    assert client.get(reverse("admin:notes_note_add")).status_code == 403
    assert Note.objects.unscoped("test checks the database directly").count() == 3


def test_an_agent_adds_a_staff_note(client, client_a, client_b):
    client.force_login(staff(client_a, Role.AGENT))
    form = client.get(reverse("admin:notes_note_add")).content.decode()
    assert "Globex" not in form  # only the agent's clients are offered
    response = client.post(
        reverse("admin:notes_note_add"),
        {
            "client": client_a.pk,
            "type": "strategy",
            "content": "Ask for the order code first.",
            "language": "",
            "ref": "",
            "confidence": "",
            "status": "active",
        },
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    note = Note.objects.unscoped("test checks the database directly").get()
    assert (note.client, note.source, note.status, note.type) == (
        client_a,
        NoteSource.STAFF,
        NoteStatus.ACTIVE,
        NoteType.STRATEGY,
    )
    assert note.session_id == current_session_id()
    # another client's id in the form is refused
    response = client.post(
        reverse("admin:notes_note_add"),
        {"client": client_b.pk, "type": "tip", "content": "x", "status": "active"},
    )
    assert response.status_code == 200  # the form with an error
    assert not Note.objects.filter(client=client_b).exists()


def test_an_agent_edits_through_the_service(client, client_a, notes_a):
    agent = staff(client_a, Role.AGENT)
    client.force_login(agent)
    tip = notes_a["tip"]
    old_hash = tip.content_hash
    response = client.post(
        change_url(tip),
        {
            "type": "tip",
            "content": "Quote the order code back to the customer.",
            "language": "en",
            "ref": "faq.orders",
            "confidence": "0.8",
            "status": "archived",
        },
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    tip.refresh_from_db()
    assert tip.content == "Quote the order code back to the customer."
    assert tip.content_hash != old_hash
    assert (tip.status, tip.reviewed_by) == (NoteStatus.ARCHIVED, agent)
    assert tip.client == client_a


def test_another_clients_admin_cannot_see_change_review_or_delete(
    client, client_a, client_b, notes_a
):
    client.force_login(staff(client_b, Role.ADMIN))
    before = list(
        Note.objects.unscoped("test checks the database directly").order_by("pk").values()
    )
    tip = notes_a["tip"]
    assert client.get(change_url(tip)).status_code in {302, 404}
    client.post(change_url(tip), {"type": "tip", "content": "hijack", "status": "active"})
    for action in ["approve", "archive", "reject", "delete_selected"]:
        client.post(
            CHANGELIST,
            {"action": action, "_selected_action": [n.pk for n in notes_a.values()], "post": "yes"},
        )
    assert client.post(
        reverse("admin:notes_note_delete", args=[tip.pk]), {"post": "yes"}
    ).status_code in {302, 404}
    assert (
        list(Note.objects.unscoped("test checks the database directly").order_by("pk").values())
        == before
    )


def test_deleting_from_the_admin_uses_the_service(client, client_a, notes_a):
    client.force_login(staff(client_a, Role.AGENT))
    tip = notes_a["tip"]
    response = client.post(reverse("admin:notes_note_delete", args=[tip.pk]), {"post": "yes"})
    assert response.status_code == 302
    assert not Note.objects.unscoped("test checks the database directly").filter(pk=tip.pk).exists()


# ------------------------------------------------------------------------- the debug view


def test_debug_view_shows_the_notes_each_turn_carried(admin_client, client_a, client_b, notes_a):
    conversation, trace = make_conversation_with_turn(client_a)
    foreign = add(client_b, "Globex's secret note.")
    deleted = add(client_a, "Soon gone.")
    deleted_id = deleted.pk
    deleted.delete()
    ReasoningStep.objects.create(
        client=client_a,
        trace=trace,
        index=3,
        name="notes",
        output={
            "note_ids": [notes_a["failure"].pk, notes_a["tip"].pk, foreign.pk, deleted_id],
            "tokens": 42,
        },
    )
    page = admin_client.get(
        reverse("admin:conversations_conversation_change", args=[conversation.pk])
    ).content.decode()
    section = page[page.index('class="gd-notes"') :]
    section = section[: section.index("</details>")]
    assert "Notes in the prompt:</strong> 4" in section
    assert "❌" in section and "lookup_order timed out." in section
    assert f'href="{change_url(notes_a["failure"])}"' in section
    assert "📝" in section and "Quote the order code." in section
    # another client's id never resolves to its note; a deleted one says so
    assert "Globex" not in section
    assert f"Note #{foreign.pk}" in section
    assert f"Note #{deleted_id} <em>(deleted since)</em>" in section


def test_debug_view_without_a_notes_step_shows_no_notes_block(admin_client, client_a):
    conversation, _ = make_conversation_with_turn(client_a)
    url = reverse("admin:conversations_conversation_change", args=[conversation.pk])
    page = admin_client.get(url).content.decode()
    assert "Turn 1" in page
    assert 'class="gd-notes"' not in page
