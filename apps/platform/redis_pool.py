"""One Redis connection pool per process for Django's cache (`CACHES`, docs/deployment.md).

Django keeps a cache backend per thread and, under ASGI, per request context: each new backend
builds its own `redis.ConnectionPool`, so a web process served almost every request on a new
Redis connection — a TCP connect, the `HELLO`/`CLIENT SETINFO` handshake and redis-py reading
its own version from the package metadata (≈ 0.7 ms of CPU) each time. The cache's
`pool_class` option names this class instead: `from_url` hands every backend of the process
the same pool for the same URL and options. redis-py's pools are thread-safe, and a pool used
after a fork starts afresh in the child (`ConnectionPool._checkpid`)."""

from __future__ import annotations

import threading
from typing import Any

import redis

# Django's own Redis cache backend (what CACHE_URL=rediscache://… selects).
REDIS_CACHE_BACKEND = "django.core.cache.backends.redis.RedisCache"

_pools: dict[tuple[str, str], SharedConnectionPool] = {}
_lock = threading.Lock()


class SharedConnectionPool(redis.ConnectionPool):
    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> SharedConnectionPool:
        key = (url, repr(sorted(kwargs.items(), key=lambda item: item[0])))
        with _lock:
            pool = _pools.get(key)
            if pool is None:
                pool = _pools[key] = super().from_url(url, **kwargs)
            return pool


def shared_pool_options(cache: dict[str, Any]) -> dict[str, Any]:
    """`cache` (one entry of `CACHES`) with the shared pool when its backend is Django's Redis
    cache and its options name no pool class of their own; any other backend unchanged."""
    if cache.get("BACKEND") != REDIS_CACHE_BACKEND:
        return cache
    options = dict(cache.get("OPTIONS") or {})
    options.setdefault("pool_class", f"{__name__}.SharedConnectionPool")
    return {**cache, "OPTIONS": options}
