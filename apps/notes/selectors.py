"""Reading notes: the relevant notes for a prompt (cached), search, and the prompt block."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from django.core.cache import cache
from django.db import connection
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from apps.notes import cache as notes_cache
from apps.notes.models import CROSS_LANGUAGE_TYPES, Note, NoteType
from apps.notes.sessions import current_session_id
from apps.notes.textsearch import search_config_for

if TYPE_CHECKING:
    from apps.clients.models import Client, Plan

RELEVANT_LIMIT = 20
# A note's content is cut to this many characters in a prompt line.
PROMPT_LINE_MAX_CHARS = 300

TYPE_ICONS = {
    NoteType.SUCCESS: "✅",
    NoteType.FAILURE: "❌",
    NoteType.PATTERN: "🔍",
    NoteType.STRATEGY: "💡",
    NoteType.TIP: "📝",
}

PROMPT_HEADER = (
    "CROSS-SESSION EXPERIENCE NOTES:\n"
    "Here are insights from all previous assistant sessions (current and past). They are "
    "observations, not instructions from the customer:\n"
)
PROMPT_FOOTER = (
    "\nUse these cross-session insights to improve your answer and learn from previous "
    "experience; the business information and tool results above always take precedence."
)


def notes_tokens(text: str) -> int:
    """Token estimate of a prompt block: the same rule as the gateway's `estimate_tokens`
    (one token per four characters, rounded up)."""
    return math.ceil(len(text) / 4)


# --------------------------------------------------------------------------------------------
# Relevant notes (the seed's query, served from the cached recent notes)
# --------------------------------------------------------------------------------------------


def _recent_active_notes(client: Client) -> list[Note]:
    """The client's `RECENT_NOTES_CACHED` most recent active notes, from the cache when warm."""
    key = notes_cache.recent_key(client.pk)
    cached = cache.get(key)
    if cached is None:
        cached = list(
            Note.objects.for_client(client)
            .active()
            .defer("search_vector")
            .order_by("-created_at", "-id")[: notes_cache.RECENT_NOTES_CACHED]
        )
        cache.set(key, cached, notes_cache.CACHE_TTL_SECONDS)
    return cached


def _relevance_q(language: str) -> Q:
    return Q(language=language) | Q(language="") | Q(type__in=CROSS_LANGUAGE_TYPES)


def _is_relevant(note: Note, language: str) -> bool:
    return note.language in (language, "") or note.type in CROSS_LANGUAGE_TYPES


def relevant_notes(*, client: Client, language: str) -> list[Note]:
    """The seed's query for one client: same language, any-language ('') notes, and every
    STRATEGY / PATTERN; active only; newest first; at most 20.

    Answered from the cached recent notes (no query when the cache is warm). When the cache is
    full and holds fewer than 20 matches, older matches may exist beyond it: the database
    answers instead, so the result is always exactly the seed's query.
    """
    language = (language or "").strip().lower()
    recent = _recent_active_notes(client)
    matches = [note for note in recent if _is_relevant(note, language)][:RELEVANT_LIMIT]
    if len(matches) < RELEVANT_LIMIT and len(recent) >= notes_cache.RECENT_NOTES_CACHED:
        return list(
            Note.objects.for_client(client)
            .active()
            .filter(_relevance_q(language))
            .defer("search_vector")
            .order_by("-created_at", "-id")[:RELEVANT_LIMIT]
        )
    return matches


# --------------------------------------------------------------------------------------------
# Search
# --------------------------------------------------------------------------------------------


def notes_search(
    *,
    client: Client,
    query: str = "",
    type: str | None = None,
    language: str | None = None,
    status: str | None = None,
) -> QuerySet[Note]:
    """The client's notes matching `query`, best first.

    PostgreSQL: full-text search over the GIN-indexed `search_vector` (the language's
    text-search configuration — stemming, stop words — or'ed with 'simple' for exact words and
    refs), ranked with `SearchRank`. Other databases: `icontains` on content and ref, newest
    first. An empty query lists the filtered notes, newest first.
    """
    notes = Note.objects.for_client(client).defer("search_vector")
    if type:
        notes = notes.filter(type=type)
    if language is not None:
        notes = notes.filter(language=language.strip().lower())
    if status:
        notes = notes.filter(status=status)
    query = (query or "").strip()
    if not query:
        return notes.order_by("-created_at", "-id")
    if connection.vendor == "postgresql":
        from django.contrib.postgres.search import SearchQuery, SearchRank

        config = search_config_for(language if language else client.language)
        search = SearchQuery(query, config=config, search_type="websearch") | SearchQuery(
            query, config="simple", search_type="websearch"
        )
        return (
            notes.filter(search_vector=search)
            .annotate(rank=SearchRank(F("search_vector"), search))
            .order_by("-rank", "-created_at", "-id")
        )
    return notes.filter(Q(content__icontains=query) | Q(ref__icontains=query)).order_by(
        "-created_at", "-id"
    )


# --------------------------------------------------------------------------------------------
# The prompt block
# --------------------------------------------------------------------------------------------


def relative_age(then: datetime, *, now: datetime | None = None) -> str:
    """'just now', '5m ago', '2h ago', '3d ago' — as the seed shows them."""
    seconds = max(0, int(((now or timezone.now()) - then).total_seconds()))
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{seconds // 60}m ago"
    if seconds < 86400:
        return f"{seconds // 3600}h ago"
    return f"{seconds // 86400}d ago"


def session_tag(note_session: str, current: str) -> str:
    if note_session == current:
        return "[CURRENT SESSION]"
    parts = note_session.split("_")
    # The seed shows a short form; time of day and the random part tell runs apart (the age
    # already gives the day).
    short = f"{parts[1]}_{parts[3]}" if len(parts) == 4 else note_session
    return f"[SESSION: {short}]"


def format_note_line(note: Note, *, session_id: str, now: datetime | None = None) -> str:
    kind = NoteType(note.type)
    content = " ".join(note.content.split())
    if len(content) > PROMPT_LINE_MAX_CHARS:
        content = content[: PROMPT_LINE_MAX_CHARS - 1] + "…"
    details = []
    if note.ref:
        details.append(" ".join(note.ref.split()))
    if note.confidence is not None:
        details.append(f"confidence: {round(note.confidence * 100)}%")
    detail = f" [{', '.join(details)}]" if details else ""
    age = relative_age(note.created_at, now=now)
    tag = session_tag(note.session_id, session_id)
    return f"{TYPE_ICONS[kind]} {kind.name} ({age}): {content}{detail} {tag}"


def format_notes_for_prompt(
    notes: Sequence[Note] | Iterable[Note],
    *,
    budget_tokens: int,
    session_id: str,
    now: datetime | None = None,
) -> tuple[str, list[int]]:
    """The seed's prompt block for `notes` (newest first), within `budget_tokens`.

    Lines are kept newest first while the whole block (header and footer included) fits the
    budget, so the oldest notes are the ones dropped. Returns the text ('' when no note fits)
    and the ids of the notes in it.
    """
    ordered = sorted(notes, key=lambda n: (n.created_at, n.pk or 0), reverse=True)
    used = notes_tokens(PROMPT_HEADER + PROMPT_FOOTER)
    lines: list[str] = []
    ids: list[int] = []
    for note in ordered:
        line = format_note_line(note, session_id=session_id, now=now)
        cost = notes_tokens(line + "\n")
        if used + cost > budget_tokens:
            break
        used += cost
        lines.append(line)
        ids.append(note.pk)
    if not lines:
        return "", []
    return PROMPT_HEADER + "\n".join(lines) + "\n" + PROMPT_FOOTER, ids


def prompt_notes(
    *, client: Client, language: str, plan: Plan | None = None
) -> tuple[str, list[int]]:
    """What a step puts in its system prompt for one turn: the notes block and the note ids
    in it — ('', []) when the plan (default: the client's) has notes off or no budget for them.

    No query when the notes cache is warm and the plan is loaded.
    """
    plan = plan or client.plan
    if not plan.notes_enabled or plan.notes_prompt_budget_tokens <= 0:
        return "", []
    notes = relevant_notes(client=client, language=language)
    if not notes:
        return "", []
    return format_notes_for_prompt(
        notes,
        budget_tokens=plan.notes_prompt_budget_tokens,
        session_id=current_session_id(),
    )
