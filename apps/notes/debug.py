"""What the conversation debug view shows of notes: for each turn, the notes its prompt carried
(recorded by the turn as a `notes` trace step with `output.note_ids`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.urls import reverse

from apps.clients.models import Client
from apps.notes.models import Note
from apps.notes.selectors import TYPE_ICONS as _ICONS_BY_TYPE

NOTES_STEP = "notes"
# type value → the seed's icon, as the prompt shows it
TYPE_ICONS: dict[str, str] = {str(value): icon for value, icon in _ICONS_BY_TYPE.items()}


def note_label(note: Note) -> str:
    return f"{TYPE_ICONS.get(note.type, '')} {note.get_type_display().upper()}"


@dataclass(frozen=True)
class InjectedNote:
    """A note a turn's prompt carried; `note` is None when it has been deleted since."""

    note_id: int
    note: Note | None

    @property
    def icon(self) -> str:
        return TYPE_ICONS.get(self.note.type, "") if self.note else ""

    @property
    def url(self) -> str:
        return reverse("admin:notes_note_change", args=[self.note.pk]) if self.note else ""


def _note_ids(output: Any) -> list[int]:
    if not isinstance(output, dict):
        return []
    ids = output.get("note_ids")
    if not isinstance(ids, list):
        return []
    return [int(i) for i in ids if isinstance(i, int) and not isinstance(i, bool) and i > 0]


def injected_notes(
    *, client: Client, steps_by_trace: dict[int, Iterable[Any]]
) -> dict[int, list[InjectedNote]]:
    """{trace id: the notes its `notes` step recorded}, in prompt order, with one query for the
    whole conversation. Ids are looked up within the client only."""
    ids_by_trace: dict[int, list[int]] = {}
    for trace_id, steps in steps_by_trace.items():
        for step in steps:
            if step.name == NOTES_STEP:
                ids_by_trace.setdefault(trace_id, []).extend(_note_ids(step.output))
    wanted = {i for ids in ids_by_trace.values() for i in ids}
    found = Note.objects.for_client(client).in_bulk(wanted) if wanted else {}
    return {
        trace_id: [InjectedNote(note_id=i, note=found.get(i)) for i in ids]
        for trace_id, ids in ids_by_trace.items()
    }
