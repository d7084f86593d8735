"""Read-side helpers of the customer widget (docs/widget.md). Every query is scoped to the client
the widget key resolved to; the widget only ever reads visible messages."""

from __future__ import annotations

import functools
import json
from datetime import UTC, datetime
from typing import Any, NamedTuple
from uuid import UUID

from django.core.cache import cache
from django.utils.dateparse import parse_datetime
from rest_framework import serializers

from apps.clients.models import Client, normalize_origin
from apps.clients.rowcache import client_cached
from apps.conversations.models import Conversation, Message, Visibility
from apps.conversations.rendering import message_html
from apps.conversations.selectors import conversation_by_id
from apps.conversations.serializers import WIDGET_DATA_KEYS
from apps.core.tenant_sql import sql_rows

ALLOWED_ORIGINS_CACHE_KEY = "widget:allowed-origins:v1"
ALLOWED_ORIGINS_CACHE_SECONDS = 60


class ConversationState(NamedTuple):
    status: str
    last_seq: int


def widget_client_by_key(*, key: str) -> Client | None:
    """The client a public widget key belongs to (active or not: the caller decides), with its
    plan. Every widget request runs this first: the row comes from the per-process row cache
    (apps/clients/rowcache.py: a few seconds, forgotten on any change in this process)."""
    if not key or len(key) > 64 or "\x00" in key:
        return None  # (PostgreSQL refuses NUL in text: never send it a query with one)
    return client_cached(widget_key=key)


def widget_conversation_get(*, client: Client, public_id: UUID) -> Conversation | None:
    return conversation_by_id(client_id=client.pk, public_id=public_id)


def widget_conversation_state(*, client: Client, conversation_id: int) -> ConversationState | None:
    """Status and last sequence number, re-read from the database (one small query)."""
    row = (
        Conversation.objects.for_client(client)
        .filter(pk=conversation_id)
        .values_list("status", "last_seq")
        .first()
    )
    return ConversationState(*row) if row else None


def widget_messages_after(
    *, client: Client, conversation_id: int, after: int, limit: int
) -> list[Message]:
    """Visible messages with `seq > after`, oldest first; internal messages never."""
    return list(
        Message.objects.for_client(client)
        .visible()
        .filter(conversation_id=conversation_id, seq__gt=after)
        .order_by("seq")[:limit]
    )


def widget_message_json(
    *,
    public_id: UUID | str,
    seq: int,
    role: str,
    visibility: str,
    kind: str,
    text: str,
    data: dict[str, Any] | None,
    language: str,
    created_at: datetime,
) -> dict[str, Any]:
    """A visible message as the widget gets it — exactly `WidgetMessageSerializer`'s JSON (a
    test holds the two equal), built without a serializer per message (the event streams and
    the POST build one per message and per stream)."""
    return {
        "id": str(public_id),
        "seq": seq,
        "role": role,
        "visibility": visibility,
        "kind": kind,
        "text": text,
        "data": {k: v for k, v in (data or {}).items() if k in WIDGET_DATA_KEYS},
        "language": language,
        "created_at": _DATETIME.to_representation(created_at),
        "html": message_html(role, text),
    }


_DATETIME = serializers.DateTimeField()  # DRF's own rendering of `created_at`


def widget_message_jsons(messages: list[Message]) -> list[dict[str, Any]]:
    return [
        widget_message_json(
            public_id=m.public_id,
            seq=m.seq,
            role=m.role,
            visibility=m.visibility,
            kind=m.kind,
            text=m.text,
            data=m.data,
            language=m.language,
            created_at=m.created_at,
        )
        for m in messages
    ]


def widget_message_events_after(
    *, client: Client, conversation_id: int, after: int, limit: int
) -> list[dict[str, Any]]:
    """`widget_messages_after` as the widget's JSON, in plain SQL: what an event stream reads
    each time its conversation gets a message (docs/benchmarks.md: the ORM's query building and
    model instances cost ≈ 5× the statement). Scoped to the client like every widget read."""
    rows = sql_rows(
        "widget.messages_after",
        _messages_after_sql(),
        [client.pk, conversation_id, Visibility.VISIBLE, after, limit],
        client_id=client.pk,
    )
    return [
        widget_message_json(
            public_id=_uuid(public_id),
            seq=int(seq),
            role=role,
            visibility=visibility,
            kind=kind,
            text=text,
            data=_json_object(data),
            language=language or "",
            created_at=_datetime(created_at),
        )
        for public_id, seq, role, visibility, kind, text, data, language, created_at in rows
    ]


@functools.cache
def _messages_after_sql() -> str:
    # Only the table name (from the model's metadata) is interpolated; values are parameters.
    return (
        "SELECT public_id, seq, role, visibility, kind, text, data, language, created_at"  # noqa: S608
        f" FROM {Message._meta.db_table}"
        " WHERE client_id = %s AND conversation_id = %s AND visibility = %s AND seq > %s"
        " ORDER BY seq LIMIT %s"
    )


def _uuid(raw: Any) -> UUID:
    return raw if isinstance(raw, UUID) else UUID(str(raw))  # SQLite: 32 hex digits


def _json_object(raw: Any) -> dict[str, Any]:
    value = json.loads(raw) if isinstance(raw, str | bytes) else raw  # text on both backends
    return value if isinstance(value, dict) else {}


def _datetime(raw: Any) -> datetime:
    if isinstance(raw, datetime):
        value = raw
    else:  # SQLite: naive UTC text
        parsed = parse_datetime(str(raw))
        if parsed is None:
            raise ValueError(f"not a datetime: {raw!r}")
        value = parsed
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def widget_known_origins() -> frozenset[str]:
    """Every origin some active client allows, cached briefly. Only used to answer CORS
    preflights, which carry no widget key; the real request is then checked against the
    one client its key belongs to."""
    cached = cache.get(ALLOWED_ORIGINS_CACHE_KEY)
    if cached is not None:
        return frozenset(cached)
    origins: set[str] = set()
    for allowed in Client.objects.filter(is_active=True).values_list("allowed_origins", flat=True):
        if isinstance(allowed, list):
            origins.update(normalize_origin(o) for o in allowed if isinstance(o, str))
    cache.set(ALLOWED_ORIGINS_CACHE_KEY, sorted(origins), ALLOWED_ORIGINS_CACHE_SECONDS)
    return frozenset(origins)
