"""Staff maintenance of notes: edits and deletes from the admin and the API, clearing by age
(`manage.py clean_notes`, the seed's `-clean-notes=30d`), the per-plan retention the beat task
applies, and export / import as JSON Lines (the seed's "Export/Import: backup and share session
knowledge").

Every write here ends by invalidating the client's cached recent notes, exactly as the note
services do, so a prompt never shows a note that was edited or removed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from django.db import transaction
from django.db.models import Count, Max, Q, QuerySet
from django.utils import timezone
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from apps.clients.models import Client
from apps.core.exceptions import ApplicationError
from apps.notes import cache as notes_cache
from apps.notes.models import Note, NoteStatus, NoteType
from apps.notes.redaction import inert_line
from apps.notes.selectors import notes_search
from apps.notes.services import (
    MAX_CONTENT_CHARS,
    PROPOSED_SOURCES,
    note_content_hash,
    notes_delete,
    update_search_vector,
)
from apps.notes.sessions import current_session_id
from apps.platform.parsers import UnsafeString, loads

MAX_REF_CHARS = 200
MAX_LANGUAGE_CHARS = 16
DEFAULT_RETENTION_DAYS = 90

# The fields of one exported note (one JSON object per line), in this order. The seed's columns
# map as timestamp → created_at, note_type → type, phelps_code → ref.
EXPORT_FIELDS = (
    "type",
    "content",
    "language",
    "ref",
    "confidence",
    "session_id",
    "source",
    "status",
    "hits",
    "rejected",
    "created_at",
    "content_hash",
)


# ---------------------------------------------------------------------------------------------
# Reads for the staff surfaces (the API, the admin's health numbers).
# ---------------------------------------------------------------------------------------------


def _staff_queryset(notes: QuerySet[Note]) -> QuerySet[Note]:
    return notes.select_related("conversation", "reviewed_by")


def note_get(*, client: Client, note_id: int) -> Note | None:
    """One of the client's notes; None for a missing id and for another client's note."""
    return _staff_queryset(Note.objects.for_client(client)).filter(pk=note_id).first()


def notes_list(
    *,
    client: Client,
    q: str | None = None,
    type: str | None = None,
    status: str | None = None,
    language: str | None = None,
) -> QuerySet[Note]:
    """The client's notes for staff, newest first; with `q`, the search's order (best first)."""
    if q:
        found = notes_search(client=client, query=q, type=type, language=language, status=status)
        return _staff_queryset(found)
    notes = Note.objects.for_client(client)
    if type:
        notes = notes.filter(type=type)
    if status:
        notes = notes.filter(status=status)
    if language is not None:
        notes = notes.filter(language=language)
    return _staff_queryset(notes).order_by("-created_at", "-pk")


@dataclass(frozen=True)
class NotesHealth:
    """The seed's "check note system health" query, per client: total, distinct sessions,
    latest note, and the count of each type."""

    client: Client
    total: int
    sessions: int
    latest: datetime | None
    per_type: dict[str, int]
    pending_review: int


def notes_health(*, clients: Iterable[Client]) -> list[NotesHealth]:
    """Health numbers for each of `clients` (two queries whatever their number)."""
    clients = list(clients)
    ids = [client.pk for client in clients]
    totals: dict[int, dict[str, Any]] = {
        row["client_id"]: dict(row)
        for row in Note.objects.filter(client_id__in=ids)
        .values("client_id")
        .annotate(
            total=Count("pk"),
            sessions=Count("session_id", distinct=True),
            latest=Max("created_at"),
            pending=Count("pk", filter=Q(status=NoteStatus.PENDING_REVIEW)),
        )
        .order_by()
    }
    per_type: dict[int, dict[str, int]] = {}
    for by_type in (
        Note.objects.filter(client_id__in=ids)
        .values("client_id", "type")
        .annotate(n=Count("pk"))
        .order_by()
    ):
        per_type.setdefault(by_type["client_id"], {})[by_type["type"]] = by_type["n"]
    health = []
    for client in clients:
        row = totals.get(client.pk, {})
        counts = per_type.get(client.pk, {})
        health.append(
            NotesHealth(
                client=client,
                total=row.get("total", 0),
                sessions=row.get("sessions", 0),
                latest=row.get("latest"),
                per_type={value: counts.get(value, 0) for value in NoteType.values},
                pending_review=row.get("pending", 0),
            )
        )
    return health


# ---------------------------------------------------------------------------------------------
# Single-note edits (admin change form, PATCH / DELETE in the API).
# ---------------------------------------------------------------------------------------------

EDITABLE_FIELDS = ("type", "content", "language", "ref", "confidence")


def note_delete(*, client: Client, note: Note) -> None:
    """Delete one of the client's notes (the service re-scopes to the client)."""
    notes_delete(client=client, queryset=Note.objects.for_client(client).filter(pk=note.pk))


def notes_delete_for_clients(*, notes: QuerySet[Note]) -> dict[int, int]:
    """Delete `notes`, which may span clients (an admin's selection, a clean-up across every
    client): one `notes_delete` per client, so each client's cache is invalidated. Returns
    {client id: notes deleted}."""
    deleted: dict[int, int] = {}
    client_ids = set(notes.values_list("client_id", flat=True).order_by())
    for client in Client.objects.filter(pk__in=client_ids).order_by("pk"):
        deleted[client.pk] = notes_delete(client=client, queryset=notes)
    return deleted


# ---------------------------------------------------------------------------------------------
# Clearing by age: clean_notes and the retention beat task.
# ---------------------------------------------------------------------------------------------

_DURATION = re.compile(r"^\s*(\d+)\s*([hdw])\s*$", re.IGNORECASE)
_UNITS = {"h": "hours", "d": "days", "w": "weeks"}


def parse_duration(text: str) -> timedelta:
    """`30d`, `12h`, `2w` → a timedelta; ValueError with a message a person can act on."""
    match = _DURATION.match(text or "")
    if match is None:
        raise ValueError(
            f"{text!r} is not a duration: use a whole number followed by h (hours), d (days) "
            "or w (weeks), e.g. 30d, 12h, 2w."
        )
    amount = int(match.group(1))
    if amount <= 0:
        raise ValueError(f"{text!r}: the duration must be more than zero.")
    if amount > 100 * 365:
        raise ValueError(f"{text!r} is longer than a century.")
    return timedelta(**{_UNITS[match.group(2).lower()]: amount})


@dataclass
class ClearReport:
    """What a clearing removed (or, in a dry run, would remove): per client slug and type."""

    dry_run: bool
    cutoff: datetime
    removed: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(sum(by_type.values()) for by_type in self.removed.values())


def notes_older_than(
    *,
    cutoff: datetime,
    type: str | None = None,
    language: str | None = None,
    client: Client | None = None,
) -> QuerySet[Note]:
    """Notes created before `cutoff`, optionally of one type / language / client. A language
    filter matches that language exactly (`''` = the notes for any language)."""
    notes = (
        Note.objects.for_client(client)
        if client is not None
        else Note.objects.unscoped("notes of every client, by age")
    ).filter(created_at__lt=cutoff)
    if type is not None:
        notes = notes.filter(type=type)
    if language is not None:
        notes = notes.filter(language=language)
    return notes


def notes_clear(
    *,
    older_than: timedelta,
    type: str | None = None,
    language: str | None = None,
    client: Client | None = None,
    dry_run: bool = False,
    now: datetime | None = None,
) -> ClearReport:
    """Delete the notes older than `older_than` that match the filters (every client unless
    `client`); with `dry_run` count them and change nothing. Staff only: the model never gets
    this (`clear_notes` is not a model tool)."""
    if type is not None and type not in NoteType.values:
        raise ApplicationError(
            f"Unknown note type {type!r}; use one of {', '.join(NoteType.values)}."
        )
    cutoff = (now or timezone.now()) - older_than
    notes = notes_older_than(cutoff=cutoff, type=type, language=language, client=client)
    report = ClearReport(dry_run=dry_run, cutoff=cutoff)
    with transaction.atomic():
        rows = notes.values_list("client__slug", "type").order_by()
        for slug, note_type in rows:
            by_type = report.removed.setdefault(slug, {})
            by_type[note_type] = by_type.get(note_type, 0) + 1
        if not dry_run and report.removed:
            notes_delete_for_clients(notes=notes)
    return report


def notes_retention_apply(*, now: datetime | None = None) -> dict[str, int]:
    """Delete every client's notes older than its plan's `notes_retention_days`; returns
    {client slug: notes deleted}. Idempotent: run it as often as you like."""
    now = now or timezone.now()
    removed: dict[str, int] = {}
    clients = Client.objects.select_related("plan").order_by("pk")
    for client in clients:
        days = _retention_days(client)
        if days <= 0:
            continue
        report = notes_clear(older_than=timedelta(days=days), client=client, now=now)
        if report.total:
            removed[client.slug] = report.total
    return removed


def _retention_days(client: Client) -> int:
    return int(client.plan.notes_retention_days or DEFAULT_RETENTION_DAYS)


# ---------------------------------------------------------------------------------------------
# Export / import (JSON Lines).
# ---------------------------------------------------------------------------------------------


def note_export_record(note: Note) -> dict[str, Any]:
    return {
        "type": note.type,
        "content": note.content,
        "language": note.language,
        "ref": note.ref,
        "confidence": note.confidence,
        "session_id": note.session_id,
        "source": note.source,
        "status": note.status,
        "hits": note.hits,
        "rejected": note.rejected,
        "created_at": note.created_at.isoformat(),
        "content_hash": note.content_hash,
    }


def notes_export_lines(*, client: Client, chunk_size: int = 500) -> Iterator[str]:
    """The client's notes, oldest first, one JSON object per line (each line ends in `\\n`).
    Read in chunks, so a large export never sits in memory."""
    notes = Note.objects.for_client(client).order_by("created_at", "pk")
    for note in notes.iterator(chunk_size=chunk_size):
        yield json.dumps(note_export_record(note), ensure_ascii=False) + "\n"


class NoteLine(BaseModel):
    """One line of an import: the export's fields. Only `type` and `content` are required;
    `content_hash` is ignored (it is recomputed, so an edited line cannot lie about it)."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    type: Literal["success", "failure", "pattern", "strategy", "tip"]
    content: str = Field(min_length=1, max_length=MAX_CONTENT_CHARS)
    language: str = Field(default="", max_length=MAX_LANGUAGE_CHARS)
    ref: str = Field(default="", max_length=MAX_REF_CHARS)
    confidence: float | None = Field(default=None, ge=0, le=1)
    session_id: str = Field(default="", max_length=100)
    source: Literal["ai", "staff", "insight"] = "staff"
    status: Literal["active", "pending_review", "archived"] = "active"
    hits: int = Field(default=1, ge=1, le=1_000_000)
    rejected: bool = False
    created_at: datetime | None = None
    content_hash: str | None = None

    @field_validator("type", "source", "status", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        # the seed writes types in capitals (SUCCESS, FAILURE, …)
        return value.lower() if isinstance(value, str) else value

    @field_validator("language")
    @classmethod
    def _language(cls, value: str) -> str:
        return value.lower()  # as note_add stores it

    @field_validator("created_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and timezone.is_naive(value):
            raise ValueError("must include a time zone (e.g. 2026-03-02T09:15:00+00:00)")
        if value is not None and value > timezone.now() + timedelta(minutes=5):
            raise ValueError("is in the future")
        return value


@dataclass
class ImportResult:
    created: int
    skipped: int


MAX_IMPORT_ERRORS = 20


def _line_errors(number: int, exc: ValidationError) -> list[dict[str, Any]]:
    errors = []
    for error in exc.errors():
        name = ".".join(str(part) for part in error["loc"]) or "line"
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            message = "Unknown field."
        errors.append({"line": number, "field": name, "message": message})
    return errors


def notes_parse_lines(text: str) -> list[NoteLine]:
    """Validate every line of a JSON Lines document; raise one ApplicationError listing the
    problems by line number and field (blank lines are allowed and skipped)."""
    lines: list[NoteLine] = []
    errors: list[dict[str, Any]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            data = loads(raw)
        except UnsafeString as exc:
            errors.append({"line": number, "field": exc.path, "message": exc.message})
            continue
        except ValueError as exc:
            errors.append({"line": number, "field": "line", "message": f"Not valid JSON: {exc}"})
            continue
        if not isinstance(data, dict):
            errors.append({"line": number, "field": "line", "message": "Must be a JSON object."})
            continue
        try:
            lines.append(NoteLine.model_validate(data))
        except ValidationError as exc:
            errors.extend(_line_errors(number, exc))
        if len(errors) >= MAX_IMPORT_ERRORS:
            break
    if errors:
        first = errors[0]
        raise ApplicationError(
            f"line {first['line']}, {first['field']}: {first['message']}",
            extra={"fields": {"lines": errors[:MAX_IMPORT_ERRORS]}},
        )
    if not lines:
        raise ApplicationError(
            "The body holds no notes: send one JSON object per line.",
            extra={"fields": {"lines": [{"line": 1, "field": "line", "message": "Empty."}]}},
        )
    return lines


def _as_proposal(line: NoteLine) -> NoteLine:
    status = NoteStatus.PENDING_REVIEW if line.status == NoteStatus.ACTIVE else line.status
    return line.model_copy(
        update={
            "content": inert_line(line.content),
            "ref": inert_line(line.ref),
            "status": status,
        }
    )


@transaction.atomic
def notes_import(*, client: Client, lines: Iterable[NoteLine]) -> ImportResult:
    """Create the client's notes from validated lines, in one transaction. Idempotent on the
    content hash: a line whose (type, ref, content) the client already holds — or that appeared
    earlier in the same import — is skipped, so importing the same file twice changes nothing.

    A line from the assistant or the insights job (source `ai` / `insight`) is treated like a
    new proposal: its text is masked (apps/notes/redaction.py) and an `active` one arrives
    `pending_review` — an export does not say whether staff approved it, and a file exported
    before unreviewed notes were gated may quote customers. Staff approve them in admin → Notes.
    """
    lines = [_as_proposal(line) if line.source in PROPOSED_SOURCES else line for line in lines]
    rows: list[tuple[str, NoteLine]] = [
        (note_content_hash(type=line.type, ref=line.ref, content=line.content), line)
        for line in lines
    ]
    known = set(
        Note.objects.for_client(client)
        .filter(content_hash__in={digest for digest, _ in rows})
        .values_list("content_hash", flat=True)
    )
    session = current_session_id()
    created: list[tuple[Note, NoteLine]] = []
    skipped = 0
    for digest, line in rows:
        if digest in known:
            skipped += 1
            continue
        known.add(digest)
        note = Note(
            client=client,
            type=line.type,
            content=line.content,
            language=line.language,
            ref=line.ref,
            confidence=line.confidence,
            session_id=line.session_id or session,
            source=line.source,
            status=line.status,
            hits=line.hits,
            rejected=line.rejected,
            content_hash=digest,
        )
        created.append((note, line))
    notes = Note.objects.bulk_create([note for note, _ in created])
    # Keep the original ages: relevance ("2h ago") and retention read created_at, which the
    # insert set to now (auto_now_add); bulk_update writes the values as given.
    dated = []
    for note, (_, line) in zip(notes, created, strict=True):
        if line.created_at is not None:
            note.created_at = line.created_at
            dated.append(note)
    if dated:
        Note.objects.bulk_update(dated, ["created_at"])
    for note in notes:
        update_search_vector(note)  # what note_add does for each new note (PostgreSQL FTS)
    if notes:
        notes_cache.invalidate(client.pk)
    return ImportResult(created=len(notes), skipped=skipped)
