import logging
import os
from typing import Any

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

app = Celery("guidedesk")
# All CELERY_* settings live in Django settings (config/settings/parts/celery.py).
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

logger = logging.getLogger(__name__)
_trace_logger = logging.getLogger("celery.app.trace")


@signals.worker_ready.connect
def settle_heap(**kwargs: Any) -> None:
    """Tasks are imported, the pool is up: freeze what starting built (apps/platform/heap.py)."""
    from apps.platform import heap

    heap.settle()


@signals.task_retry.connect
def log_retry(sender: Any = None, request: Any = None, reason: Any = None, **kwargs: Any) -> None:
    """Celery logs a task's retry at INFO on `celery.app.trace`, which the settings quiet (its
    per-task "succeeded" lines, LOGGING): operators still see every retry, in Celery's words."""
    if not _trace_logger.isEnabledFor(logging.INFO):
        logger.info("Task %s[%s] retry: %s", getattr(sender, "name", sender), request.id, reason)
