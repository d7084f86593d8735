"""Writing notes: add (validated, deduplicated within a day), review, remove.

Every write invalidates the client's cached recent notes (apps/notes/cache.py).
"""

from __future__ import annotations

import hashlib
import re
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.db import connection, transaction
from django.db.models import F, QuerySet, Value
from django.utils import timezone

from apps.core.exceptions import ApplicationError
from apps.core.models import TenantOwnedModel
from apps.notes import cache as notes_cache
from apps.notes.models import Note, NoteSource, NoteStatus, NoteType
from apps.notes.redaction import inert_line
from apps.notes.sessions import current_session_id
from apps.notes.textsearch import search_config_for

if TYPE_CHECKING:
    from apps.accounts.models import User
    from apps.clients.models import Client
    from apps.conversations.models import Conversation

MAX_CONTENT_CHARS = 2000
DEDUP_WINDOW = timedelta(hours=24)
_SPACES = re.compile(r"\s+")


def _normalise(text: str) -> str:
    return _SPACES.sub(" ", text).strip().casefold()


def note_content_hash(*, type: str, ref: str, content: str) -> str:
    """sha256 of the normalised `type|ref|content`: what makes two notes the same note."""
    key = f"{_normalise(type)}|{_normalise(ref)}|{_normalise(content)}"
    return hashlib.sha256(key.encode()).hexdigest()


# Notes whose words came from the model (and, through it, from customers) or from the insights
# job: they wait in pending_review for a person, whatever their type, and their text is masked
# (links, personal-data shapes: apps/notes/redaction.py) when it is written.
PROPOSED_SOURCES = frozenset({NoteSource.AI, NoteSource.INSIGHT})


def default_status(*, source: str, type: str) -> str:
    """A note staff write is active; anything the AI or the insights job proposes waits for a
    person (`pending_review`), whatever its type — nothing a customer or the model wrote reaches
    another conversation's prompt before staff approve it.

    The one exception is chosen by its writer, not by default: the automatic outcome notes of a
    finished turn (apps/reasoning/turn_notes.py) are composed only of the system's own words
    (tool name and kind, outcome, failure kind, escalation reason) and are written `active`.
    """
    if source in PROPOSED_SOURCES:
        return NoteStatus.PENDING_REVIEW
    return NoteStatus.ACTIVE


def _validate(
    *,
    type: str,
    content: str,
    language: str,
    ref: str,
    confidence: float | None,
    source: str,
    status: str | None,
) -> dict[str, str]:
    errors: dict[str, str] = {}
    if type not in NoteType.values:
        errors["type"] = f"Must be one of {', '.join(NoteType.values)}."
    if not isinstance(content, str) or not content.strip():
        errors["content"] = "Must not be empty."
    elif len(content) > MAX_CONTENT_CHARS:
        errors["content"] = f"At most {MAX_CONTENT_CHARS} characters."
    if not isinstance(language, str) or len(language) > 16:
        errors["language"] = "A language code of at most 16 characters ('' = any)."
    if not isinstance(ref, str) or len(ref) > 200:
        errors["ref"] = "At most 200 characters."
    if confidence is not None and (
        isinstance(confidence, bool)
        or not isinstance(confidence, int | float)
        or not 0.0 <= float(confidence) <= 1.0
    ):
        errors["confidence"] = "A number from 0 to 1."
    if source not in NoteSource.values:
        errors["source"] = f"Must be one of {', '.join(NoteSource.values)}."
    if status is not None and status not in NoteStatus.values:
        errors["status"] = f"Must be one of {', '.join(NoteStatus.values)}."
    return errors


def update_search_vector(note: Note) -> None:
    """PostgreSQL only: the note's language configuration plus 'simple' (exact words, refs)."""
    if connection.vendor != "postgresql":
        return
    from django.contrib.postgres.search import SearchVector

    Note.objects.filter(pk=note.pk, client_id=note.client_id).update(
        search_vector=SearchVector("content", config=Value(search_config_for(note.language)))
        + SearchVector("content", "ref", config=Value("simple"))
    )


@transaction.atomic
def note_add(
    *,
    client: Client,
    type: str,
    content: str,
    language: str = "",
    ref: str = "",
    confidence: float | None = None,
    source: str,
    status: str | None = None,
    conversation: Conversation | None = None,
    trace: TenantOwnedModel | None = None,
    session_id: str | None = None,
) -> Note:
    """Add a note for `client`, or bump the counter of the same note written within a day.

    The same note = same client, type, ref and normalised content (`content_hash`) written in
    the last 24 hours: its `hits` goes up by one and `updated_at` moves, no new row. An AI or
    insight proposal that staff already rejected is not put up for review again (its `hits`
    counts the repeat). Default status (`default_status`): staff notes are `active`, AI and
    insight proposals start `pending_review`. The content and ref of AI and insight notes are
    put on one line with links and personal-data shapes masked before they are stored.
    """
    language = (language or "").strip().lower() if isinstance(language, str) else language
    ref = ref.strip() if isinstance(ref, str) else ref
    content = content.strip() if isinstance(content, str) else content
    if source in PROPOSED_SOURCES:
        content = inert_line(content) if isinstance(content, str) else content
        ref = inert_line(ref) if isinstance(ref, str) else ref
    errors = _validate(
        type=type,
        content=content,
        language=language,
        ref=ref,
        confidence=confidence,
        source=source,
        status=status,
    )
    if errors:
        raise ApplicationError("Invalid note.", {"fields": errors})
    for related in (conversation, trace):
        if related is not None and related.client_id != client.pk:
            raise ValueError(f"{related.__class__.__name__} belongs to another client")

    content_hash = note_content_hash(type=type, ref=ref, content=content)
    notes = Note.objects.for_client(client).filter(content_hash=content_hash)
    existing = (
        notes.filter(created_at__gte=timezone.now() - DEDUP_WINDOW).order_by("-created_at").first()
    )
    if existing is None and source != NoteSource.STAFF:
        existing = notes.filter(rejected=True).order_by("-created_at").first()
    if existing is not None:
        Note.objects.for_client(client).filter(pk=existing.pk).update(
            hits=F("hits") + 1, updated_at=timezone.now()
        )
        existing.refresh_from_db()
        notes_cache.invalidate(client.pk)
        return existing

    note = Note(
        client=client,
        type=type,
        content=content,
        language=language,
        ref=ref,
        confidence=None if confidence is None else float(confidence),
        source=source,
        status=status or default_status(source=source, type=type),
        conversation=conversation,
        trace_id=None if trace is None else trace.pk,
        session_id=session_id or current_session_id(),
        content_hash=content_hash,
    )
    note.full_clean(exclude=["client", "conversation", "trace", "reviewed_by"])
    note.save()
    update_search_vector(note)
    notes_cache.invalidate(client.pk)
    return note


@transaction.atomic
def note_update(*, note: Note, **fields: Any) -> Note:
    """Change a note's content, type, ref, language or confidence (staff edits)."""
    allowed = {"type", "content", "ref", "language", "confidence"}
    unknown = set(fields) - allowed
    if unknown:
        raise ApplicationError(
            "Invalid note.", {"fields": dict.fromkeys(sorted(unknown), "Cannot be changed.")}
        )
    values = {name: getattr(note, name) for name in allowed} | fields
    values["language"] = (values["language"] or "").strip().lower()
    errors = _validate(source=note.source, status=None, **values)
    if errors:
        raise ApplicationError("Invalid note.", {"fields": errors})
    for name, value in values.items():
        setattr(note, name, value)
    note.content_hash = note_content_hash(type=note.type, ref=note.ref, content=note.content)
    note.save()
    update_search_vector(note)
    notes_cache.invalidate(note.client_id)
    return note


REVIEW_ACTIONS = ("approve", "archive", "reject")


@transaction.atomic
def note_set_status(*, note: Note, status: str, by: User | None = None) -> Note:
    """Review a note: `active` (approve), `archived` (archive) or `rejected` (archived and
    remembered, so the same proposal does not come back for review).

    `status` is a `NoteStatus` value or one of the review actions approve / archive / reject.
    """
    target = {"approve": NoteStatus.ACTIVE, "archive": NoteStatus.ARCHIVED}.get(status, status)
    rejected = status == "reject"
    if rejected:
        target = NoteStatus.ARCHIVED
    if target not in NoteStatus.values:
        raise ApplicationError(
            "Invalid note status.",
            {"fields": {"status": f"Must be one of {', '.join(NoteStatus.values)} or reject."}},
        )
    note.status = target
    note.rejected = rejected
    if by is not None or target != NoteStatus.PENDING_REVIEW:
        note.reviewed_by = by
        note.reviewed_at = timezone.now()
    note.save(update_fields=["status", "rejected", "reviewed_by", "reviewed_at", "updated_at"])
    notes_cache.invalidate(note.client_id)
    return note


@transaction.atomic
def notes_delete(*, client: Client, queryset: QuerySet[Note] | None = None) -> int:
    """Delete `client`'s notes in `queryset` (all of them when None); returns how many.

    The queryset is re-scoped to the client, so another tenant's notes are never touched.
    """
    base = queryset if queryset is not None else Note.objects.for_client(client)
    scoped = Note.objects.for_client(client).filter(pk__in=base.values("pk"))
    deleted, _ = scoped.delete()
    notes_cache.invalidate(client.pk)
    return deleted
