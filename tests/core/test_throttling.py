"""The sliding-window throttle on Redis (apps/platform/throttling.py) answers exactly as DRF's own
`SimpleRateThrottle` does on the cache — same allow/refuse sequence, same `wait()` — in one
atomic round trip; and it lets requests through when Redis is unreachable."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
import redis
from rest_framework.throttling import SimpleRateThrottle

from apps.platform import throttling
from apps.platform.throttling import SlidingWindowThrottle
from tests.support.broker import NEEDS_REDIS, REDIS_URL


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def make(base: type[SimpleRateThrottle], rate: str, ident: str, clock: Clock) -> Any:
    class Bucket(base):  # type: ignore[valid-type]
        def get_cache_key(self, request: Any, view: Any) -> str:
            return f"throttle_test_{ident}"

    Bucket.rate = rate
    Bucket.timer = clock
    return Bucket


def run(throttle_cls: Any, steps: list[float]) -> list[tuple[bool, float | None]]:
    """Advance the clock by each step, check once, record (allowed, wait)."""
    clock = throttle_cls.timer
    answers = []
    for step in steps:
        clock.now += step
        throttle = throttle_cls()
        allowed = throttle.allow_request(None, None)
        answers.append((allowed, None if allowed else round(throttle.wait(), 6)))
    return answers


STEPS = [0, 1, 1, 1, 1, 10, 20, 27.5, 0.5, 1, 30, 1, 60, 0, 0, 0, 0]


@pytest.fixture
def redis_cache(settings):
    prefix = f"throttle-test-{uuid.uuid4().hex[:8]}"
    settings.CACHES = {
        "default": {
            "BACKEND": throttling.REDIS_CACHE_BACKEND,
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": prefix,
        }
    }
    yield
    client = redis.Redis.from_url(REDIS_URL)  # only this test's keys (never FLUSHDB)
    for key in client.scan_iter(f"{prefix}:*"):
        client.delete(key)


@NEEDS_REDIS
def test_redis_answers_exactly_as_drf_on_the_cache(redis_cache, settings):
    on_redis = run(make(SlidingWindowThrottle, "4/min", "a", Clock()), STEPS)
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    assert throttling._redis_script() is None
    drf = run(make(SimpleRateThrottle, "4/min", "a", Clock()), STEPS)
    assert on_redis == drf
    assert [a for a, _ in drf].count(False) >= 4  # the sequence does hit the limit
    assert any(w and w > 0 for _, w in drf)


@NEEDS_REDIS
def test_only_the_limit_gets_through_when_many_check_at_once(redis_cache):
    bucket = make(SlidingWindowThrottle, "10/min", "burst", Clock())
    allowed: list[bool] = []
    barrier = threading.Barrier(40)

    def check() -> None:
        barrier.wait()
        allowed.append(bucket().allow_request(None, None))

    threads = [threading.Thread(target=check) for _ in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert allowed.count(True) == 10  # DRF's get-then-set lets racing requests all through


@NEEDS_REDIS
def test_redis_down_lets_requests_through(settings):
    settings.CACHES = {
        "default": {"BACKEND": throttling.REDIS_CACHE_BACKEND, "LOCATION": "redis://127.0.0.1:1/0"}
    }
    bucket = make(SlidingWindowThrottle, "1/min", "down", Clock())
    assert [bucket().allow_request(None, None) for _ in range(3)] == [True, True, True]
