"""The relevant-notes query, its cache, the prompt block and search."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from apps.notes.models import Note, NoteSource, NoteStatus, NoteType
from apps.notes.selectors import (
    PROMPT_HEADER,
    format_notes_for_prompt,
    notes_search,
    notes_tokens,
    prompt_notes,
    relative_age,
    relevant_notes,
)
from apps.notes.services import note_add
from apps.notes.sessions import current_session_id

pytestmark = pytest.mark.django_db


def add(client, type=NoteType.TIP, content="note", *, age=None, **kwargs):
    kwargs.setdefault("source", NoteSource.STAFF)
    note = note_add(client=client, type=type, content=content, **kwargs)
    if age is not None:
        Note.objects.filter(pk=note.pk).update(created_at=timezone.now() - age)
        note.refresh_from_db()
    return note


def ids(notes):
    return [n.pk for n in notes]


def test_language_rule_active_only_newest_first(client_a):
    en = add(client_a, content="en tip", language="en", age=timedelta(hours=5))
    anylang = add(client_a, content="any tip", language="", age=timedelta(hours=4))
    de_tip = add(client_a, content="de tip", language="de", age=timedelta(hours=3))
    de_strategy = add(
        client_a, NoteType.STRATEGY, "de strategy", language="de", age=timedelta(hours=2)
    )
    de_pattern = add(
        client_a, NoteType.PATTERN, "de pattern", language="de", age=timedelta(hours=1)
    )
    de_failure = add(client_a, NoteType.FAILURE, "de failure", language="de")
    add(client_a, NoteType.TIP, "pending", language="en", source=NoteSource.AI)  # pending_review
    archived = add(client_a, content="archived", language="en", status=NoteStatus.ARCHIVED)

    assert ids(relevant_notes(client=client_a, language="en")) == [
        de_pattern.pk,
        de_strategy.pk,
        anylang.pk,
        en.pk,
    ]
    assert ids(relevant_notes(client=client_a, language="de")) == [
        de_failure.pk,
        de_pattern.pk,
        de_strategy.pk,
        de_tip.pk,
        anylang.pk,
    ]
    assert archived.pk not in ids(relevant_notes(client=client_a, language="en"))


def test_limit_20_newest(client_a):
    notes = [add(client_a, content=f"tip {i}", age=timedelta(minutes=100 - i)) for i in range(25)]
    got = relevant_notes(client=client_a, language="en")
    assert ids(got) == [n.pk for n in reversed(notes)][:20]


def test_when_the_cache_is_full_older_matches_come_from_the_database(client_a):
    # 5 English notes, then 60 newer German tips: the cached 50 hold no English note, but the
    # seed's query still finds the English ones.
    english = [
        add(client_a, content=f"en {i}", language="en", age=timedelta(days=2, minutes=i))
        for i in range(5)
    ]
    for i in range(60):
        add(client_a, content=f"de {i}", language="de", age=timedelta(minutes=i))
    got = relevant_notes(client=client_a, language="en")
    assert ids(got) == [n.pk for n in english]


def test_warm_cache_costs_no_query(client_a, django_assert_num_queries):
    add(client_a, content="tip")
    relevant_notes(client=client_a, language="en")
    with django_assert_num_queries(0):
        assert len(relevant_notes(client=client_a, language="en")) == 1
    client_a.plan  # noqa: B018 — loaded, as in a turn
    with django_assert_num_queries(0):
        text, note_ids = prompt_notes(client=client_a, language="en")
    assert note_ids and text.startswith(PROMPT_HEADER)


def test_notes_never_cross_tenants(client_a, client_b):
    a = add(client_a, content="acme secret")
    b = add(client_b, content="globex secret")
    assert ids(relevant_notes(client=client_a, language="en")) == [a.pk]
    assert ids(relevant_notes(client=client_b, language="en")) == [b.pk]
    assert ids(notes_search(client=client_a, query="secret")) == [a.pk]
    text, _ = prompt_notes(client=client_b, language="en")
    assert "globex secret" in text and "acme" not in text


@pytest.mark.parametrize(
    ("seconds", "label"),
    [(5, "just now"), (300, "5m ago"), (7200, "2h ago"), (86400 * 3 + 5, "3d ago")],
)
def test_relative_age(seconds, label):
    now = timezone.now()
    assert relative_age(now - timedelta(seconds=seconds), now=now) == label


def test_prompt_format_icons_ages_refs_and_sessions(client_a):
    current = current_session_id()
    notes = [
        add(
            client_a,
            NoteType.SUCCESS,
            "Matched the order by its code",
            ref="W1001",
            confidence=0.9,
            age=timedelta(hours=2),
        ),
        add(
            client_a,
            NoteType.FAILURE,
            "Refund tool timed out",
            ref="refund",
            age=timedelta(hours=3),
        ),
        add(
            client_a,
            NoteType.PATTERN,
            "Customers ask about\n customs fees",
            session_id="20251108_143022_12345_789",
            age=timedelta(days=1),
        ),
        add(
            client_a,
            NoteType.STRATEGY,
            "Ask for the order number first",
            confidence=0.5,
            age=timedelta(days=3),
        ),
        add(client_a, NoteType.TIP, "Shipping questions peak on Mondays", age=timedelta(days=4)),
    ]
    now = timezone.now()
    text, note_ids = format_notes_for_prompt(notes, budget_tokens=1000, session_id=current, now=now)
    assert note_ids == ids(notes)
    lines = text.splitlines()
    assert lines[0] == "CROSS-SESSION EXPERIENCE NOTES:"
    assert lines[2:7] == [
        "✅ SUCCESS (2h ago): Matched the order by its code [W1001, confidence: 90%] "
        "[CURRENT SESSION]",
        "❌ FAILURE (3h ago): Refund tool timed out [refund] [CURRENT SESSION]",
        "🔍 PATTERN (1d ago): Customers ask about customs fees [SESSION: 143022_789]",
        "💡 STRATEGY (3d ago): Ask for the order number first [confidence: 50%] [CURRENT SESSION]",
        "📝 TIP (4d ago): Shipping questions peak on Mondays [CURRENT SESSION]",
    ]
    assert lines[-1].startswith("Use these cross-session insights")


def test_budget_drops_the_oldest_first(client_a):
    notes = [
        add(client_a, content=f"tip number {i} " + "x" * 80, age=timedelta(hours=i))
        for i in range(10)
    ]
    _, all_ids = format_notes_for_prompt(notes, budget_tokens=10_000, session_id="s")
    assert all_ids == ids(notes)
    for budget in (60, 120, 200, 300):
        text, kept = format_notes_for_prompt(notes, budget_tokens=budget, session_id="s")
        assert notes_tokens(text) <= budget
        assert kept == ids(notes)[: len(kept)]  # newest kept, oldest dropped
    text, kept = format_notes_for_prompt(notes, budget_tokens=30, session_id="s")
    assert (text, kept) == ("", [])


def test_prompt_notes_respects_the_plan(client_a):
    add(client_a, content="tip")
    plan = client_a.plan
    assert prompt_notes(client=client_a, language="en")[1]
    plan.notes_enabled = False
    assert prompt_notes(client=client_a, language="en") == ("", [])
    plan.notes_enabled = True
    plan.notes_prompt_budget_tokens = 0
    assert prompt_notes(client=client_a, language="en") == ("", [])


def test_pending_notes_never_reach_a_prompt(client_a):
    pending = add(client_a, NoteType.PATTERN, "unreviewed pattern", source=NoteSource.AI)
    assert pending.status == NoteStatus.PENDING_REVIEW
    assert prompt_notes(client=client_a, language="en") == ("", [])


def test_search_filters(client_a):
    refund = add(
        client_a,
        NoteType.FAILURE,
        "The refund webhook returned 500",
        ref="refund_order",
        language="en",
    )
    add(client_a, NoteType.TIP, "Shipping takes two days", language="en")
    add(client_a, NoteType.TIP, "Rückerstattung dauert lange", language="de")
    assert ids(notes_search(client=client_a, query="refund")) == [refund.pk]
    assert ids(notes_search(client=client_a, query="refund_order")) == [refund.pk]
    assert ids(notes_search(client=client_a, query="refund", type=NoteType.TIP)) == []
    assert len(notes_search(client=client_a, query="", language="en")) == 2
    assert ids(notes_search(client=client_a, query="refund", status=NoteStatus.ARCHIVED)) == []


needs_postgres = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="full-text search needs PostgreSQL (as in CI)"
)


@needs_postgres
def test_full_text_search_stems_ranks_and_uses_the_language(client_a):
    best = add(
        client_a,
        NoteType.FAILURE,
        "Refunds failed: the refund tool refunded nothing",
        language="en",
    )
    other = add(client_a, NoteType.TIP, "A refund needs the order number", language="en")
    german = add(
        client_a, NoteType.TIP, "Bestellungen werden in zwei Tagen versandt", language="de"
    )
    add(client_a, NoteType.TIP, "Shipping takes two days", language="en")
    # English stemming: "refunding" finds refunds/refund/refunded; the denser note ranks first.
    assert ids(notes_search(client=client_a, query="refunding")) == [best.pk, other.pk]
    # German stemming with the German configuration
    assert ids(notes_search(client=client_a, query="Bestellung", language="de")) == [german.pk]
    # websearch syntax: a phrase and a negation
    assert ids(notes_search(client=client_a, query='refund -"order number"')) == [best.pk]


@needs_postgres
def test_full_text_search_uses_the_gin_index(client_a):
    from django.db import connection as conn

    with conn.cursor() as cur:
        cur.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'notes_search_vector_gin'")
        (indexdef,) = cur.fetchone()
    assert "USING gin (search_vector)" in indexdef
    add(client_a, content="refund policy")
    Note.objects.bulk_create(
        Note(
            client=client_a,
            type=NoteType.TIP,
            content=f"shipping tip {i}",
            session_id="s",
            content_hash=f"{i:064d}",
        )
        for i in range(3000)
    )
    with conn.cursor() as cur:
        cur.execute(
            "UPDATE notes_note SET search_vector = to_tsvector('simple', content) "
            "WHERE search_vector IS NULL"
        )
        cur.execute("ANALYZE notes_note")
        # Whether the planner prefers the index on a table this small depends on its
        # statistics; what must hold is that the search CAN use it (seq scans priced out).
        cur.execute("SET LOCAL enable_seqscan = off")
    plan = notes_search(client=client_a, query="refund").explain()
    assert "notes_search_vector_gin" in plan
