"""Test settings: fast hashing, in-memory e-mail and cache. DATABASE_URL and CELERY_BROKER_URL
still come from the environment so CI runs against the real PostgreSQL."""

import os
import re

# `make test` runs the suite in parallel (pytest-xdist, `TEST_WORKERS`). Each worker process
# gets its own Redis database, so one worker's slot, throttle, queue and draft keys (and a
# test's clean-up of them) never meet another's: gw0 uses database 1, gw1 database 2, … Set
# before the settings read CELERY_BROKER_URL, and inherited by the servers a test starts.
_XDIST_WORKER = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
if _XDIST_WORKER and os.environ.get("CELERY_BROKER_URL", "").startswith("redis://"):
    os.environ["CELERY_BROKER_URL"] = re.sub(
        r"(redis://[^/]*)(/\d*)?$",
        rf"\g<1>/{int(_XDIST_WORKER[1]) % 15 + 1}",
        os.environ["CELERY_BROKER_URL"],
    )

from .base import *  # noqa: E402, F403
from .base import INSTALLED_APPS, env  # noqa: E402

DEBUG = False
SECRET_KEY = "test-secret-key-not-for-production"  # noqa: S105
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
# Tests talk to a local fake OpenAI-compatible server; never to a real provider.
OPENAI_API_KEY = "test-key"
OPENAI_BASE_URL = "http://127.0.0.1:9/v1"
LLM_MODEL = "gpt-4o-mini"
LLM_TIMEOUT = 5.0
LLM_OFFLINE_STREAM_SECONDS = 0.0  # the demo's typing pace; a test that wants it sets it
# Task publishing is exercised against the broker in CI, but tests run tasks in-process.
CELERY_TASK_ALWAYS_EAGER = True
# Playground runs execute in the test's thread (and transaction); the browser tests turn the
# background thread back on.
PLAYGROUND_EAGER_THREAD = False
SIMULATION_EAGER_THREAD = False
# The fake tool servers listen on 127.0.0.1 (the SSRF guard itself is tested with this off).
TOOL_WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
TOOL_WEBHOOK_ALLOW_HTTP = True
# The knowledge import tests serve their small site on 127.0.0.1 too.
KNOWLEDGE_FETCH_ALLOW_PRIVATE_NETWORKS = True
# Tests read the schema anonymously (schemathesis); the staff-only gate is tested with this off.
# `/` is the landing page, as in production; tests of the demo page turn DEMO_PAGE on.
API_DOCS_PUBLIC = True
# Tests sign superusers in without TOTP; the MFA tests switch this on (production's default).
MFA_REQUIRED_FOR_SUPERUSERS = False
LOGGING = {"version": 1, "disable_existing_loggers": False, "root": {"level": "WARNING"}}
TEST_BROKER_URL = env("CELERY_BROKER_URL", default="")
# WhiteNoise serves straight from the source folders in tests (no collectstatic run needed).
WHITENOISE_AUTOREFRESH = True
WHITENOISE_USE_FINDERS = True
# No Redis unless a test asks for it (tests/widget/test_push.py): streams poll, no turn slots.
REDIS_URL = ""
SLOTS_REDIS_URL = ""

# The benchmark commands are tested too (local and test settings only; docs/benchmarks.md).
INSTALLED_APPS = [*INSTALLED_APPS, "devtools.benchmarks"]
