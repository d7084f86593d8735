"""Read-side helpers of the customer widget (docs/widget.md). Every query is scoped to the client
the widget key resolved to; the widget only ever reads visible messages."""

from __future__ import annotations

from typing import NamedTuple
from uuid import UUID

from django.core.cache import cache

from apps.clients.models import Client, normalize_origin
from apps.conversations.models import Conversation, Message

ALLOWED_ORIGINS_CACHE_KEY = "widget:allowed-origins:v1"
ALLOWED_ORIGINS_CACHE_SECONDS = 60


class ConversationState(NamedTuple):
    status: str
    last_seq: int


def widget_client_by_key(*, key: str) -> Client | None:
    """The client a public widget key belongs to (active or not: the caller decides)."""
    if not key or len(key) > 64 or "\x00" in key:
        return None  # (PostgreSQL refuses NUL in text: never send it a query with one)
    return Client.objects.select_related("plan").filter(widget_key=key).first()


def widget_conversation_get(*, client: Client, public_id: UUID) -> Conversation | None:
    return Conversation.objects.for_client(client).filter(public_id=public_id).first()


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
