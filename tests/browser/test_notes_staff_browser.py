"""The notes admin and the notes in the conversation debug view, in a real headless Chromium (the
system's /usr/bin/chromium): an agent sees the health numbers, approves an AI proposal with the
admin action, and follows a turn's injected note from the debug view to the note."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from playwright.sync_api import expect

from apps.accounts.models import Role
from apps.notes.models import Note, NoteSource, NoteStatus, NoteType
from apps.notes.services import note_add
from apps.reasoning.models import ReasoningStep
from tests.api.conftest import make_conversation_with_turn
from tests.browser.conftest import SCREENSHOTS
from tests.browser.helpers import page_signed_in_as
from tests.factories import MembershipFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def staff_page(browser: Any, live_server: Any, client: Any, role: str) -> Any:
    membership = MembershipFactory(client=client, role=role)
    user = membership.user
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label__in=["notes", "conversations"])
    )
    return page_signed_in_as(
        browser, live_server.url, user, viewport={"width": 1400, "height": 900}
    )


def test_an_agent_reviews_notes_and_follows_an_injected_note(
    browser, live_server, db_lock, client_a, client_b
):
    with db_lock:
        failure = note_add(
            client=client_a,
            type=NoteType.FAILURE,
            content="A request for information went to tool lookup_order (read): it failed "
            "(timed out).",
            ref="lookup_order",
            language="en",
            source=NoteSource.AI,
            status=NoteStatus.ACTIVE,  # an automatic outcome record, in the system's words
        )
        proposal = note_add(
            client=client_a,
            type=NoteType.PATTERN,
            content="Customers who say 'parcel' mean an order.",
            source=NoteSource.AI,
        )  # an AI pattern: waits for review
        note_add(
            client=client_b, type=NoteType.TIP, content="Globex's own tip.", source=NoteSource.STAFF
        )
        conversation, trace = make_conversation_with_turn(client_a)
        ReasoningStep.objects.create(
            client=client_a,
            trace=trace,
            index=3,
            name="notes",
            output={"note_ids": [failure.pk], "tokens": 31},
        )
    assert proposal.status == NoteStatus.PENDING_REVIEW
    page = staff_page(browser, live_server, client_a, Role.AGENT)
    try:
        page.goto(live_server.url + "/admin/notes/note/")
        health = page.locator("#notes-health")
        expect(health).to_contain_text("Note health")
        acme = health.locator('tr[data-client="acme"]')
        expect(acme.locator('[data-figure="total"]')).to_have_text("2")
        expect(acme.locator('[data-figure="pending_review"]')).to_have_text("1")
        expect(health.locator('tr[data-client="globex"]')).to_have_count(0)
        expect(page.locator("#result_list")).not_to_contain_text("Globex")
        page.screenshot(path=str(SCREENSHOTS / "notes-admin-list.png"), full_page=True)

        # approve the AI's proposal with the admin action
        page.locator(f'input[name="_selected_action"][value="{proposal.pk}"]').check()
        page.select_option('select[name="action"]', "approve")
        page.locator('button[name="index"]').click()
        expect(page.locator("ul.messagelist")).to_contain_text("Approved 1 note(s).")
        with db_lock:
            proposal.refresh_from_db()
        assert proposal.status == NoteStatus.ACTIVE
        assert proposal.reviewed_by is not None

        # the debug view shows which note the turn's prompt carried, linked to it
        url = reverse("admin:conversations_conversation_change", args=[conversation.pk])
        page.goto(live_server.url + url)
        notes = page.locator("details.gd-notes")
        expect(notes).to_contain_text("Notes in the prompt: 1")
        expect(notes).to_contain_text("lookup_order (read): it failed")
        notes.screenshot(path=str(SCREENSHOTS / "notes-debug-view.png"))
        notes.get_by_role("link").first.click()
        expect(page).to_have_url(
            live_server.url + reverse("admin:notes_note_change", args=[failure.pk])
        )
        expect(page.locator("#id_content")).to_have_value(failure.content)
        assert page.errors == []
    finally:
        page.context.close()
    assert Note.objects.filter(client=client_b).count() == 1
