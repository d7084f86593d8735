"""DRF's `SimpleRateThrottle`, kept in one round trip when the cache is Redis.

DRF keeps a bucket's history as a pickled list of timestamps in the cache: a GET and a SET per
check, both carrying the whole list (a tenant-wide bucket at 3,000/min holds up to 3,000
floats). Every widget request runs one to three such checks, which made throttling one of the
web process's largest CPU costs under load (docs/benchmarks.md). With Redis as the cache the
same sliding window lives in a sorted set instead, checked and updated by one Lua script: one
round trip, nothing pickled, and atomic (two web processes can no longer both take the last
slot). Without Redis (the demo, most tests: the local-memory cache) DRF's own code runs.

Semantics are DRF's: a request is allowed while fewer than `num_requests` were allowed in the
last `duration` seconds; refused ones are not recorded; `wait()` answers as DRF's does. If
Redis cannot be reached the request is allowed (and logged): a throttle must not take the
widget down with it."""

from __future__ import annotations

import logging
import secrets
import threading
from typing import Any

from django.conf import settings
from django.core.cache import cache
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle
from rest_framework.views import APIView

logger = logging.getLogger(__name__)

REDIS_CACHE_BACKEND = "django.core.cache.backends.redis.RedisCache"

# KEYS[1]: the bucket; ARGV: now (s), duration (s), limit, a unique member.
# Returns {allowed 0/1, requests in the window (including this one if allowed), oldest (s)}.
_SLIDING_WINDOW = """
local now = tonumber(ARGV[1])
local duration = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - duration)
local count = redis.call('ZCARD', KEYS[1])
if count >= tonumber(ARGV[3]) then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, count, oldest[2] or ARGV[1]}
end
redis.call('ZADD', KEYS[1], now, ARGV[4])
redis.call('PEXPIRE', KEYS[1], math.ceil(duration * 1000))
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {1, count + 1, oldest[2]}
"""

_lock = threading.Lock()
_script: tuple[str, Any] | None = None  # (the cache's location, the registered script)


def _redis_script() -> Any | None:
    """The sliding-window script on the cache's Redis (one client per process, shared by its
    threads), or None when the cache is not Redis."""
    global _script
    config = settings.CACHES.get("default", {})
    if config.get("BACKEND") != REDIS_CACHE_BACKEND:
        return None
    location = config.get("LOCATION")
    if isinstance(location, list | tuple):
        location = location[0]  # the primary: writes go there
    location = str(location)
    with _lock:
        if _script is None or _script[0] != location:
            import redis

            client = redis.Redis.from_url(location, socket_timeout=2, socket_connect_timeout=2)
            _script = (location, client.register_script(_SLIDING_WINDOW))
        return _script[1]


class SlidingWindowThrottle(SimpleRateThrottle):
    """`SimpleRateThrottle` in one atomic Redis round trip when the cache is Redis."""

    _window: tuple[int, float] | None = None  # (requests in the window, the oldest's time)
    num_requests: int  # (set by SimpleRateThrottle.__init__ from the rate; untyped there)
    duration: int

    def allow_request(self, request: Request, view: APIView) -> bool:
        script = _redis_script() if self.rate is not None else None
        if script is None:
            self._window = None
            return super().allow_request(request, view)
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        self.now = self.timer()
        try:
            allowed, count, oldest = script(
                keys=[cache.make_key(self.key)],
                args=[repr(self.now), self.duration, self.num_requests, secrets.token_hex(8)],
            )
        except Exception:  # Redis unreachable: let the request through rather than fail it
            logger.warning("throttle: Redis unreachable, request allowed", exc_info=True)
            self._window = (0, self.now)
            return True
        self._window = (int(count), float(oldest))
        return bool(allowed)

    def wait(self) -> float | None:
        """DRF's answer, from the window the script returned."""
        if self._window is None:
            return super().wait()
        count, oldest = self._window
        remaining = self.duration - (self.now - oldest) if count else self.duration
        available = self.num_requests - count + 1
        if available <= 0:
            return None
        return remaining / float(available)
