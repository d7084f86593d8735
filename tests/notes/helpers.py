"""Helpers shared by the notes tests."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from apps.notes.models import Note


def backdate(note: Note, age: timedelta) -> None:
    """Make the note `age` old: its creation time moved back, in the database only, past the
    tenant scope."""
    Note.objects.unscoped("test checks the database directly").filter(pk=note.pk).update(
        created_at=timezone.now() - age
    )
