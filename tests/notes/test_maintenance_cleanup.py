"""Clearing notes by age: `manage.py clean_notes` (the seed's `-clean-notes=30d`) with its
filters and dry run, and the nightly retention task applying each plan's notes_retention_days."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from apps.notes.maintenance import notes_retention_apply, parse_duration
from apps.notes.models import Note, NoteSource, NoteType
from apps.notes.selectors import relevant_notes
from apps.notes.services import note_add
from apps.notes.tasks import apply_retention
from tests.factories import ClientFactory, PlanFactory
from tests.notes.helpers import backdate

pytestmark = pytest.mark.django_db


def aged(client: Any, days: float, content: str, **kwargs: Any) -> Note:
    kwargs.setdefault("type", NoteType.FAILURE)
    note = note_add(client=client, content=content, source=NoteSource.STAFF, **kwargs)
    backdate(note, timedelta(days=days))
    return note


@pytest.fixture
def notes(client_a, client_b) -> dict[str, Note]:
    return {
        "a_old_failure_en": aged(client_a, 40, "old en failure", language="en"),
        "a_old_tip_any": aged(client_a, 35, "old tip", type=NoteType.TIP),
        "a_old_failure_es": aged(client_a, 45, "old es failure", language="es"),
        "a_new_failure": aged(client_a, 2, "new failure", language="en"),
        "b_old_failure": aged(client_b, 50, "globex old failure", language="en"),
        "b_new_tip": aged(client_b, 1, "globex new tip", type=NoteType.TIP),
    }


def clean(*args: str) -> str:
    out = StringIO()
    call_command("clean_notes", *args, stdout=out)
    return out.getvalue()


def remaining() -> set[str]:
    return set(
        Note.objects.unscoped("test checks the database directly").values_list("content", flat=True)
    )


ALL = {
    "old en failure",
    "old tip",
    "old es failure",
    "new failure",
    "globex old failure",
    "globex new tip",
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [("30d", timedelta(days=30)), ("12h", timedelta(hours=12)), ("2w", timedelta(weeks=2))],
)
def test_durations(text, expected):
    assert parse_duration(text) == expected
    assert parse_duration(text.upper()) == expected


@pytest.mark.parametrize("bad", ["", "30", "d", "30x", "-5d", "0d", "1.5d", "30 days", "99999w"])
def test_bad_durations_say_what_is_expected(bad, notes):
    with pytest.raises(CommandError, match="--older-than"):
        clean("--older-than", bad)
    assert remaining() == ALL


def test_dry_run_changes_nothing_and_says_what_would_go(notes):
    out = clean("--older-than", "30d", "--dry-run")
    assert remaining() == ALL
    assert "Would remove 3 note(s) of acme: 2 failure, 1 tip" in out
    assert "Would remove 1 note(s) of globex: 1 failure" in out
    assert "Would remove 4 note(s) created before" in out
    assert "dry run: nothing was changed" in out


def test_removes_older_notes_of_every_client_and_prints_them(notes, client_a):
    # warm the client's cached recent notes: the clean-up must invalidate it
    assert any(
        n.content == "old en failure" for n in relevant_notes(client=client_a, language="en")
    )
    out = clean("--older-than", "30d")
    assert remaining() == {"new failure", "globex new tip"}
    assert "Removed 3 note(s) of acme: 2 failure, 1 tip" in out
    assert "Removed 1 note(s) of globex: 1 failure" in out
    assert [n.content for n in relevant_notes(client=client_a, language="en")] == ["new failure"]


def test_filters_type_language_client(notes):
    clean("--older-than", "30d", "--type", "tip")
    assert remaining() == ALL - {"old tip"}
    clean("--older-than", "30d", "--language", "ES")
    assert remaining() == ALL - {"old tip", "old es failure"}
    clean("--older-than", "30d", "--client", "globex")
    assert remaining() == ALL - {"old tip", "old es failure", "globex old failure"}
    clean("--older-than", "1w", "--client", "acme", "--language", "en")
    assert remaining() == {"new failure", "globex new tip"}


def test_language_empty_means_the_notes_for_any_language(notes):
    out = clean("--older-than", "30d", "--language", "")
    assert remaining() == ALL - {"old tip"}
    assert "Removed 1 note(s) of acme: 1 tip" in out


def test_nothing_to_remove(notes):
    out = clean("--older-than", "8w")
    assert "nothing removed" in out
    assert remaining() == ALL


def test_clear_errors(notes):
    with pytest.raises(CommandError, match="no client with the slug 'nope'"):
        clean("--older-than", "30d", "--client", "nope")
    with pytest.raises(CommandError, match="invalid choice"):
        clean("--older-than", "30d", "--type", "hint")
    with pytest.raises(CommandError, match="older-than"):
        clean()
    assert remaining() == ALL


# --------------------------------------------------------------------------------- retention


def test_retention_applies_each_plans_days(plan):
    short = PlanFactory(slug="short", notes_retention_days=7)
    acme = ClientFactory(slug="acme", plan=plan)  # the default, 90 days
    brief = ClientFactory(slug="brief", plan=short)
    aged(acme, 100, "acme 100d")
    aged(acme, 60, "acme 60d")
    aged(brief, 10, "brief 10d")
    aged(brief, 3, "brief 3d")
    assert plan.notes_retention_days == 90
    assert notes_retention_apply() == {"acme": 1, "brief": 1}
    assert remaining() == {"acme 60d", "brief 3d"}
    assert notes_retention_apply() == {}  # idempotent


def test_the_task_is_registered_and_scheduled(client_a):
    from config.celery import app

    entry = settings.CELERY_BEAT_SCHEDULE["notes-apply-retention"]
    assert entry["task"] == "notes.apply_retention"
    assert entry["task"] in app.tasks
    aged(client_a, 91, "too old")
    aged(client_a, 89, "kept")
    assert apply_retention.apply().get() == {"acme": 1}
    assert remaining() == {"kept"}
