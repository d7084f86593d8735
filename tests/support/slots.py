"""The fleet's turn slots (apps/platform/slots.py) on the test Redis, for the slot tests."""

from __future__ import annotations

import pytest
from django.conf import settings

from apps.platform import slots

REDIS_URL = settings.TEST_BROKER_URL
NEEDS_REDIS = pytest.mark.skipif(
    not REDIS_URL.startswith("redis://"), reason="needs Redis (CELERY_BROKER_URL=redis://…)"
)


def slots_clear() -> None:
    """Every slot, worker and holder record gone from Redis."""
    import redis

    r = redis.Redis.from_url(REDIS_URL)
    keys = list(r.scan_iter(slots.PREFIX + "*"))
    if keys:
        r.delete(*keys)
