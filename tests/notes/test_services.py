"""Writing notes: validation, the approval gate's default status, dedup, review, removal."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from apps.core.exceptions import ApplicationError
from apps.notes.models import Note, NoteSource, NoteStatus, NoteType
from apps.notes.selectors import relevant_notes
from apps.notes.services import note_add, note_set_status, note_update, notes_delete
from apps.notes.sessions import current_session_id, new_session_id
from tests.factories import UserFactory
from tests.notes.helpers import backdate

pytestmark = pytest.mark.django_db


def test_session_id_has_the_seeds_format_and_is_stable_per_process():
    sid = current_session_id()
    assert re.fullmatch(r"\d{8}_\d{6}_\d+_\d{3}", sid)
    assert current_session_id() == sid
    assert new_session_id(pid=1) != new_session_id(pid=2)


def test_add_fills_defaults(client_a):
    note = note_add(
        client=client_a,
        type=NoteType.FAILURE,
        content="  Order lookup timed out  ",
        language="EN",
        ref="order_status",
        confidence=0.9,
        source=NoteSource.STAFF,
    )
    note.refresh_from_db()
    assert note.content == "Order lookup timed out"
    assert note.language == "en"
    assert note.status == NoteStatus.ACTIVE
    assert note.hits == 1
    assert note.session_id == current_session_id()
    assert len(note.content_hash) == 64


@pytest.mark.parametrize(
    ("source", "type", "status"),
    [
        (NoteSource.AI, NoteType.PATTERN, NoteStatus.PENDING_REVIEW),
        (NoteSource.AI, NoteType.STRATEGY, NoteStatus.PENDING_REVIEW),
        (NoteSource.AI, NoteType.TIP, NoteStatus.PENDING_REVIEW),
        (NoteSource.AI, NoteType.SUCCESS, NoteStatus.PENDING_REVIEW),
        (NoteSource.AI, NoteType.FAILURE, NoteStatus.PENDING_REVIEW),
        (NoteSource.STAFF, NoteType.TIP, NoteStatus.ACTIVE),
        (NoteSource.STAFF, NoteType.FAILURE, NoteStatus.ACTIVE),
        (NoteSource.INSIGHT, NoteType.PATTERN, NoteStatus.PENDING_REVIEW),
        (NoteSource.INSIGHT, NoteType.FAILURE, NoteStatus.PENDING_REVIEW),
    ],
)
def test_default_status_gates_ai_proposals(client_a, source, type, status):
    note = note_add(client=client_a, type=type, content=f"{type} note", source=source)
    assert note.status == status


@pytest.mark.parametrize("source", [NoteSource.AI, NoteSource.INSIGHT])
def test_ai_and_insight_text_is_masked_when_written(client_a, source):
    note = note_add(
        client=client_a,
        type=NoteType.FAILURE,
        content="Jane Roe\nat 12 Elm Street, order TH-12345:\tpay at refunds-zephyr.example/claim",
        ref="TH-12345",
        source=source,
    )
    assert note.content == "Jane Roe at [address], order [id]: pay at [link]"
    assert note.ref == "[id]"


def test_staff_text_is_stored_as_written(client_a):
    content = "Orders like TH-12345 ship from the warehouse at 12 Elm Street"
    note = note_add(client=client_a, type=NoteType.TIP, content=content, source=NoteSource.STAFF)
    assert note.content == content


def test_insights_can_ask_for_review_explicitly(client_a):
    note = note_add(
        client=client_a,
        type=NoteType.PATTERN,
        content="Customers ask about customs fees",
        source=NoteSource.INSIGHT,
        status=NoteStatus.PENDING_REVIEW,
    )
    assert note.status == NoteStatus.PENDING_REVIEW


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"type": "rumour"}, "type"),
        ({"content": "   "}, "content"),
        ({"content": "x" * 2001}, "content"),
        ({"confidence": 1.5}, "confidence"),
        ({"confidence": -0.1}, "confidence"),
        ({"confidence": True}, "confidence"),
        ({"ref": "r" * 201}, "ref"),
        ({"language": "x" * 17}, "language"),
        ({"source": "customer"}, "source"),
        ({"status": "live"}, "status"),
    ],
)
def test_invalid_input_names_the_field(client_a, kwargs, field):
    args = {"type": NoteType.TIP, "content": "ok", "source": NoteSource.STAFF} | kwargs
    with pytest.raises(ApplicationError) as err:
        note_add(client=client_a, **args)
    assert field in err.value.extra["fields"]
    assert not Note.objects.unscoped("test checks the database directly").exists()


def test_same_note_within_a_day_bumps_hits(client_a):
    first = note_add(
        client=client_a,
        type=NoteType.FAILURE,
        content="Refund tool failed",
        ref="refund",
        source=NoteSource.AI,
    )
    again = note_add(
        client=client_a,
        type=NoteType.FAILURE,
        content="refund  TOOL failed ",  # same after normalising case and spaces
        ref="refund",
        source=NoteSource.AI,
    )
    assert again.pk == first.pk
    assert again.hits == 2
    assert Note.objects.unscoped("test checks the database directly").count() == 1


def test_dedup_is_per_type_ref_client_and_day(client_a, client_b):
    base = {"content": "Refund tool failed", "source": NoteSource.AI}
    n1 = note_add(client=client_a, type=NoteType.FAILURE, ref="refund", **base)
    n2 = note_add(client=client_a, type=NoteType.FAILURE, ref="cancel", **base)
    n3 = note_add(client=client_a, type=NoteType.SUCCESS, ref="refund", **base)
    n4 = note_add(client=client_b, type=NoteType.FAILURE, ref="refund", **base)
    assert len({n1.pk, n2.pk, n3.pk, n4.pk}) == 4
    backdate(n1, timedelta(hours=25))
    n5 = note_add(client=client_a, type=NoteType.FAILURE, ref="refund", **base)
    assert n5.pk != n1.pk
    assert Note.objects.unscoped("test checks the database directly").get(pk=n1.pk).hits == 1


def test_review_actions(client_a):
    user = UserFactory()
    note = note_add(
        client=client_a, type=NoteType.TIP, content="Ask for the order number", source=NoteSource.AI
    )
    assert note.status == NoteStatus.PENDING_REVIEW
    note_set_status(note=note, status="approve", by=user)
    note.refresh_from_db()
    assert (note.status, note.reviewed_by, note.rejected) == (NoteStatus.ACTIVE, user, False)
    assert note.reviewed_at is not None
    note_set_status(note=note, status=NoteStatus.ARCHIVED, by=user)
    assert (
        Note.objects.unscoped("test checks the database directly").get(pk=note.pk).status
        == NoteStatus.ARCHIVED
    )
    with pytest.raises(ApplicationError):
        note_set_status(note=note, status="publish")


def test_a_rejected_proposal_is_not_proposed_again(client_a):
    note = note_add(
        client=client_a,
        type=NoteType.PATTERN,
        content="Always offer a coupon",
        source=NoteSource.AI,
    )
    note_set_status(note=note, status="reject", by=UserFactory())
    backdate(note, timedelta(days=10))
    again = note_add(
        client=client_a,
        type=NoteType.PATTERN,
        content="Always offer a coupon",
        source=NoteSource.AI,
    )
    assert again.pk == note.pk
    assert again.status == NoteStatus.ARCHIVED and again.rejected
    assert again.hits == 2
    # staff may still write it deliberately
    staff = note_add(
        client=client_a,
        type=NoteType.PATTERN,
        content="Always offer a coupon",
        source=NoteSource.STAFF,
    )
    assert staff.pk != note.pk and staff.status == NoteStatus.ACTIVE


def test_every_write_invalidates_the_cached_notes(client_a, django_assert_num_queries):
    note = note_add(client=client_a, type=NoteType.TIP, content="one", source=NoteSource.STAFF)
    assert [n.pk for n in relevant_notes(client=client_a, language="en")] == [note.pk]
    with django_assert_num_queries(0):
        relevant_notes(client=client_a, language="en")

    second = note_add(client=client_a, type=NoteType.TIP, content="two", source=NoteSource.STAFF)
    assert [n.pk for n in relevant_notes(client=client_a, language="en")] == [second.pk, note.pk]

    note_set_status(note=second, status="archive")
    assert [n.pk for n in relevant_notes(client=client_a, language="en")] == [note.pk]

    note_update(note=note, content="one, edited")
    assert relevant_notes(client=client_a, language="en")[0].content == "one, edited"

    assert (
        notes_delete(
            client=client_a,
            queryset=Note.objects.unscoped("test checks the database directly").filter(pk=note.pk),
        )
        == 1
    )
    assert relevant_notes(client=client_a, language="en") == []


def test_bulk_delete_never_touches_another_client(client_a, client_b):
    mine = note_add(client=client_a, type=NoteType.TIP, content="mine", source=NoteSource.STAFF)
    theirs = note_add(client=client_b, type=NoteType.TIP, content="theirs", source=NoteSource.STAFF)
    assert (
        notes_delete(
            client=client_a,
            queryset=Note.objects.unscoped("test checks the database directly").all(),
        )
        == 1
    )
    assert (
        not Note.objects.unscoped("test checks the database directly").filter(pk=mine.pk).exists()
    )
    assert Note.objects.unscoped("test checks the database directly").filter(pk=theirs.pk).exists()


def test_related_rows_must_belong_to_the_client(client_a, client_b):
    from apps.conversations.models import Conversation

    conv_b = Conversation.objects.create(client=client_b)
    with pytest.raises(ValueError, match="another client"):
        note_add(
            client=client_a,
            type=NoteType.TIP,
            content="x",
            source=NoteSource.AI,
            conversation=conv_b,
        )
