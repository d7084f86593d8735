"""The fleet's turn slots (apps/platform/slots.py) on the test Redis, for the slot tests."""

from __future__ import annotations

from apps.platform import slots
from tests.support.broker import REDIS_URL


def slots_clear() -> None:
    """Every slot, worker and holder record gone from Redis."""
    import redis

    r = redis.Redis.from_url(REDIS_URL)
    keys = list(r.scan_iter(slots.PREFIX + "*"))
    if keys:
        r.delete(*keys)
