"""Production: every secret is required (no default), so a missing one fails at boot — and so
is the broker: turns run in the Procfile's `worker`, never in the web process.
How to run it: docs/deployment.md (the Procfile)."""

from .base import *  # noqa: F403
from .base import REST_FRAMEWORK, env

DEBUG = False
SECRET_KEY = env("SECRET_KEY")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS")
DATABASES = {"default": env.db("DATABASE_URL")}
# No default: without a broker every turn would run in the web process that took the message,
# with no sweeper (beat) to finish one a failure interrupted. Boot fails instead.
CELERY_BROKER_URL = env("CELERY_BROKER_URL")
CELERY_TASK_ALWAYS_EAGER = False
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and env.int(
    "DB_POOL_MAX_SIZE", default=20
):
    # Django's native psycopg pool: a process holds at most DB_POOL_MAX_SIZE connections, and
    # a turn or an event stream gives its connection back while it waits on the network
    # (apps/platform/db.py). Pooling replaces persistent connections (CONN_MAX_AGE must be 0).
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # Django's backend whose pool drops every dead connection at once (below).
    DATABASES["default"]["ENGINE"] = "apps.platform.postgresql"
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": env.int("DB_POOL_MIN_SIZE", default=2),
        "max_size": env.int("DB_POOL_MAX_SIZE", default=20),
        "timeout": env.float("DB_POOL_TIMEOUT", default=30.0),
    }
else:
    DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=60)
# Connections are checked before use, so one the database dropped while it sat idle (a restart,
# a failover, pg_terminate_backend) is replaced instead of failing the request that got it:
# a persistent connection before its reuse; a pooled one as it leaves the pool (an empty query,
# ~0.1 ms): with a pool, CONN_HEALTH_CHECKS gives the pool a `check`
# (apps.platform.db.SweepOnFailedCheck) — and the first connection that fails it makes the pool
# test and replace every connection it holds at once, so after the database dropped them all
# the next request waits only for one new connection, not a back-off per dead one.
DATABASES["default"]["CONN_HEALTH_CHECKS"] = env.bool("CONN_HEALTH_CHECKS", default=True)
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=60 * 60 * 24 * 365)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=True)
SECURE_CONTENT_TYPE_NOSNIFF = True

# Static files: `manage.py collectstatic` writes them to STATIC_ROOT with content-hashed names
# and pre-compressed copies; WhiteNoise serves them (hashed names cached for a year, immutable;
# the unhashed /static/widget.js that tenants embed for WHITENOISE_MAX_AGE seconds).
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
WHITENOISE_MAX_AGE = env.int("WHITENOISE_MAX_AGE", default=60 * 60)

# Every e-mail (hand-offs with the customer's words, password-reset links) must reach a mail
# server, never the log: EMAIL_URL has no default here, and `check --deploy` refuses a console,
# file, in-memory or dummy backend (apps/core/checks.py).
EMAIL_CONFIG = env.email_url("EMAIL_URL")
vars().update(EMAIL_CONFIG)

# JSON only: no browsable API (its HTML forms) in production.
REST_FRAMEWORK = {
    **REST_FRAMEWORK,
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
}
