"""Each client's knowledge summary — its topics (`retrieval.topics`) and whether it has any
usable article (`retrieval.has_knowledge`) — kept in Django's cache: adaptive mode puts the
topics in every turn's minimal context, every mode skips searching a client with no knowledge,
and reading that must cost no query.

Every save or delete of an article or a source invalidates the client's topics (signals,
connected in `KnowledgeConfig.ready`) — at once and again when the writing transaction commits,
as the notes cache does. A bulk `QuerySet.update()` sends no signal: code that switches
articles on or off that way calls `invalidate(client_id)` itself; `TOPICS_TTL_SECONDS` bounds
what a missed invalidation can leave behind. Production needs a shared cache (`CACHE_URL`)."""

from __future__ import annotations

from typing import Any

from django.core.cache import cache
from django.db import transaction

TOPICS_TTL_SECONDS = 300


def topics_key(client_id: int) -> str:
    return f"knowledge:topics:v1:{client_id}"


def invalidate(client_id: int) -> None:
    key = topics_key(client_id)
    cache.delete(key)
    transaction.on_commit(lambda: cache.delete(key))


def on_change(sender: Any, instance: Any, **kwargs: Any) -> None:
    """Signal receiver: an article or a source of the client was saved or deleted."""
    if getattr(instance, "client_id", None):
        invalidate(instance.client_id)
