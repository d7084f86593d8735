"""The database and the cache."""

from apps.platform.redis_pool import shared_pool_options
from config.settings.parts.core import BASE_DIR, env

DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
}
DATABASES["default"]["ATOMIC_REQUESTS"] = False
DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=0))
# A persistent connection (CONN_MAX_AGE > 0) is checked before its first use in each request or
# task, so one the database dropped while idle (restart, failover, a pooler) is replaced
# instead of failing the request (docs/operations.md).
DATABASES["default"].setdefault("CONN_HEALTH_CHECKS", env.bool("CONN_HEALTH_CHECKS", default=True))
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# With Redis (CACHE_URL=rediscache://…) every cache backend of a process shares one connection
# pool (apps/platform/redis_pool.py): Django would otherwise connect anew in each request.
CACHES = {"default": shared_pool_options(env.cache("CACHE_URL", default="locmemcache://guidedesk"))}
