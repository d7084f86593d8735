"""Per-key concurrency slots shared by every worker process (Redis), for per-tenant fairness:
at most `limit` turns of one tenant run at once across the whole fleet, so one tenant's burst or
slow webhook cannot occupy every worker thread. Over the limit the caller retries shortly (the
task goes back to the queue behind other tenants' work); nothing is dropped.

A slot is a member of a Redis sorted set scored by when it was taken; slots older than the lease
(a worker that died) stop counting. Without Redis (the demo runs turns in-process) every call
gets a slot."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_client: tuple[str, Any] | None = None


def _redis() -> Any | None:
    """A Redis client for the slots (thread-safe, one per process), or None without Redis."""
    global _client
    url = str(getattr(settings, "SLOTS_REDIS_URL", "") or "")
    if not url.startswith(("redis://", "rediss://", "unix://")):
        return None
    with _lock:
        if _client is None or _client[0] != url:
            import redis

            _client = (url, redis.Redis.from_url(url, socket_timeout=5, health_check_interval=30))
        return _client[1]


@contextmanager
def slot(key: str, *, limit: int, lease_seconds: float) -> Iterator[bool]:
    """Take one of `limit` slots of `key`; yields False (and takes nothing) when all are busy.
    A Redis error yields True: fairness must never stop turns from running."""
    client = _redis()
    if client is None or limit <= 0:
        yield True
        return
    name = f"guidedesk:slots:{key}"
    member = uuid.uuid4().hex
    try:
        now = time.time()
        pipe = client.pipeline()
        pipe.zremrangebyscore(name, 0, now - lease_seconds)
        pipe.zadd(name, {member: now})
        pipe.zrank(name, member)
        pipe.expire(name, int(lease_seconds) + 60)
        rank = pipe.execute()[2]
    except Exception:
        logger.warning("slots: Redis unavailable, not limiting %s", key, exc_info=True)
        yield True
        return
    if rank is not None and rank >= limit:
        _release(client, name, member)
        yield False
        return
    try:
        yield True
    finally:
        _release(client, name, member)


def _release(client: Any, name: str, member: str) -> None:
    try:
        client.zrem(name, member)
    except Exception:  # the lease expires it
        logger.warning("slots: could not release a slot of %s", name, exc_info=True)
