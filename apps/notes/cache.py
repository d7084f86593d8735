"""The seed's hybrid memory: each client's most recent active notes, kept in Django's cache.

Every write to a client's notes calls `invalidate(client_id)` — at once and again when the
writing transaction commits, so a reader racing the write cannot put a stale list back for
long. Production needs a shared cache (`CACHE_URL`, e.g. Redis) so that web and worker
processes see the same invalidations; the default per-process local memory cache is for
development and tests.
"""

from __future__ import annotations

from django.core.cache import cache
from django.db import transaction

RECENT_NOTES_CACHED = 50
CACHE_TTL_SECONDS = 3600


# v2: migration 0003 took unreviewed AI notes out of the prompts; a new key means no process
# serves a list cached before it.
def recent_key(client_id: int) -> str:
    return f"notes:recent:v2:{client_id}"


def invalidate(client_id: int) -> None:
    key = recent_key(client_id)
    cache.delete(key)
    transaction.on_commit(lambda: cache.delete(key))
