"""The Redis the suite was given (CELERY_BROKER_URL: index 5 locally, CI's Redis in CI), for the
tests that need a real one: push, throttles in Redis, turn slots, the background queue."""

from __future__ import annotations

import pytest
from django.conf import settings

REDIS_URL = str(settings.TEST_BROKER_URL)
NEEDS_REDIS = pytest.mark.skipif(
    not REDIS_URL.startswith("redis://"), reason="needs Redis (CELERY_BROKER_URL=redis://…)"
)
