"""Insights and notes: FAILURE notes are evidence; a note proposal is a Note (source insight)
waiting for review — it reaches no prompt until staff approve it."""

from __future__ import annotations

from typing import Any

import pytest

from apps.core.exceptions import ApplicationError
from apps.insights.models import InsightProposal, ProposalStatus
from apps.insights.selectors import insight_evidence
from apps.insights.services import generate_insights, proposal_approve, proposal_reject
from apps.notes.models import Note, NoteSource, NoteStatus
from apps.notes.selectors import relevant_notes
from apps.notes.services import note_add, note_set_status
from tests.insights.conftest import escalated, ref, window

pytestmark = pytest.mark.django_db

STRATEGY = "When the order lookup times out, say a person will follow up and hand over."


def lookup_failed(client: Any, text: str) -> Any:
    conv = escalated(client, text, reason="tool_failure")
    note_add(
        client=client,
        type="failure",
        content=f"get_order_status failed (timeout). Customer: {text}",
        ref="get_order_status",
        source="ai",
        conversation=conv,
    )
    return conv


def note_topic(ids: list[str]) -> dict[str, Any]:
    return {
        "title": "Order lookups time out",
        "count": 2,
        "conversation_ids": ids,
        "proposal": {
            "kind": "note",
            "question": "",
            "answer": "",
            "note_type": "strategy",
            "content": STRATEGY,
        },
    }


def test_failure_notes_are_evidence_of_their_conversation(shop):
    conv = lookup_failed(shop, "Where is my order TH-12345?")
    note_add(client=shop, type="failure", content="no conversation", source="ai")
    items = insight_evidence(client=shop, since=window()[0], until=window()[1])
    notes = [i for i in items if i.kind == "failure_note"]
    assert [n.conversation for n in notes] == [str(conv.public_id)]
    # an AI note's text is masked when written (apps/notes/redaction.py)
    assert "Where is my order [id]?" in notes[0].text and "get_order_status" in notes[0].detail


def test_a_note_proposal_reaches_no_prompt_until_approved(llm, shop):
    convs = [lookup_failed(shop, f"Where is my order TH-1234{n}?") for n in range(3)]
    llm.script("insights", {"topics": [note_topic([ref(c) for c in convs])]})
    [proposal] = generate_insights(client=shop, since=window()[0], until=window()[1]).proposals
    note = proposal.note
    assert proposal.kind == "note" and proposal.count == 3
    assert note.source == NoteSource.INSIGHT and note.status == NoteStatus.PENDING_REVIEW
    assert note.content == STRATEGY
    assert note not in relevant_notes(client=shop, language="en")

    proposal_approve(client=shop, proposal=proposal)
    note.refresh_from_db()
    assert note.status == NoteStatus.ACTIVE
    assert note in relevant_notes(client=shop, language="en")
    assert (
        InsightProposal.objects.unscoped("test checks the database directly").get().status
        == ProposalStatus.APPROVED
    )


def test_rejecting_a_note_proposal_rejects_its_note(llm, shop):
    convs = [lookup_failed(shop, f"Where is my order TH-2234{n}?") for n in range(2)]
    llm.script("insights", {"topics": [note_topic([ref(c) for c in convs])]})
    [proposal] = generate_insights(client=shop, since=window()[0], until=window()[1]).proposals
    proposal_reject(client=shop, proposal=proposal)
    note = Note.objects.unscoped("test checks the database directly").get(pk=proposal.note_id)
    assert note.status == NoteStatus.ARCHIVED and note.rejected
    assert note not in relevant_notes(client=shop, language="en")


def test_a_note_archived_in_the_notes_admin_cannot_be_approved_here(llm, shop):
    convs = [lookup_failed(shop, f"Where is my order TH-3234{n}?") for n in range(2)]
    llm.script("insights", {"topics": [note_topic([ref(c) for c in convs])]})
    [proposal] = generate_insights(client=shop, since=window()[0], until=window()[1]).proposals
    note_set_status(note=proposal.note, status="archive")
    with pytest.raises(ApplicationError, match="archived"):
        proposal_approve(client=shop, proposal=proposal)
    assert (
        InsightProposal.objects.unscoped("test checks the database directly").get().status
        == ProposalStatus.PENDING_REVIEW
    )


def test_the_offline_demo_proposes_a_note_for_repeated_failures(settings, shop):
    settings.OPENAI_API_KEY = ""
    for n in range(3):
        lookup_failed(shop, f"Where is my order TH-4234{n}?")
    [proposal] = generate_insights(client=shop, since=window()[0], until=window()[1]).proposals
    assert proposal.kind == "note" and proposal.note.status == NoteStatus.PENDING_REVIEW
    assert proposal.note_type == "strategy" and proposal.count == 3
