"""Django's Redis cache shares one connection pool per process (apps/platform/redis_pool.py):
a cache backend made for a new request or thread reuses the connections of the ones before."""

from __future__ import annotations

import threading

from django.core.cache import caches

from apps.platform.redis_pool import SharedConnectionPool, shared_pool_options
from tests.support.broker import NEEDS_REDIS, REDIS_URL

REDIS_CACHE = "django.core.cache.backends.redis.RedisCache"


def test_only_the_redis_cache_gets_the_shared_pool() -> None:
    local = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "x"}
    assert shared_pool_options(local) == local

    redis_cache = shared_pool_options({"BACKEND": REDIS_CACHE, "LOCATION": "redis://h:6379/1"})
    assert redis_cache["OPTIONS"] == {"pool_class": "apps.platform.redis_pool.SharedConnectionPool"}

    own = {"BACKEND": REDIS_CACHE, "LOCATION": "redis://h/1", "OPTIONS": {"pool_class": "my.Pool"}}
    assert shared_pool_options(own)["OPTIONS"]["pool_class"] == "my.Pool"


def test_the_same_url_and_options_give_the_same_pool_and_others_their_own() -> None:
    a = SharedConnectionPool.from_url("redis://127.0.0.1:6379/14", socket_timeout=2)
    assert SharedConnectionPool.from_url("redis://127.0.0.1:6379/14", socket_timeout=2) is a
    assert SharedConnectionPool.from_url("redis://127.0.0.1:6379/15", socket_timeout=2) is not a
    assert SharedConnectionPool.from_url("redis://127.0.0.1:6379/14", socket_timeout=3) is not a


@NEEDS_REDIS
def test_backends_of_other_threads_reuse_one_connection(settings) -> None:
    settings.CACHES = {
        "default": shared_pool_options({"BACKEND": REDIS_CACHE, "LOCATION": REDIS_URL})
    }
    key = f"redis-pool-test-{threading.get_ident()}"
    first = caches.create_connection("default")
    first.set(key, "stored", 30)
    pool = first._cache._get_connection_pool(write=True)
    assert isinstance(pool, SharedConnectionPool)
    connections = pool._created_connections
    seen: list[object] = []

    def request() -> None:  # a later request: a backend of its own, as Django makes one
        backend = caches.create_connection("default")
        seen.append(backend.get(key))

    for _ in range(5):
        thread = threading.Thread(target=request)
        thread.start()
        thread.join()

    assert seen == ["stored"] * 5
    # (with Django's own pool class each backend would have connected anew)
    assert pool._created_connections == connections
    first.delete(key)
