import logging
import os
import threading
from typing import Any

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")


class GuideDeskCelery(Celery):
    """Celery with one disabled result backend per process instead of one per thread.

    Celery keeps its result backend per thread, and making one scans the installed packages'
    entry points. Every thread of the web's pool paid that on its first queued turn — in a burst
    of new customers about a twentieth of the web's CPU (docs/benchmarks.md). Results are off
    (`CELERY_RESULT_BACKEND = None`) and the disabled backend holds no state, so one serves every
    thread; a configured backend stays per thread, as Celery has it."""

    _shared_backend: Any = None
    _shared_backend_lock = threading.Lock()

    def _get_backend(self) -> Any:
        if self.backend_cls or self.conf.result_backend:
            return super()._get_backend()  # type: ignore[misc]  # (untyped in the stubs)
        with self._shared_backend_lock:
            if self._shared_backend is None:
                self._shared_backend = super()._get_backend()  # type: ignore[misc]
            return self._shared_backend


app = GuideDeskCelery("guidedesk")
# All CELERY_* settings live in Django settings (config/settings/parts/celery.py).
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

logger = logging.getLogger(__name__)
_trace_logger = logging.getLogger("celery.app.trace")


@signals.worker_ready.connect
def settle_heap(sender: Any = None, **kwargs: Any) -> None:
    """Tasks are imported, the pool is up: freeze what starting built (apps/platform/heap.py),
    and take a core of its own when CPU_AFFINITY says so (apps/platform/affinity.py)."""
    from apps.platform import affinity, heap, slots

    heap.settle()
    affinity.claim("worker" if slots.consumes_live_queue(sender) else "background")


@signals.task_retry.connect
def log_retry(sender: Any = None, request: Any = None, reason: Any = None, **kwargs: Any) -> None:
    """Celery logs a task's retry at INFO on `celery.app.trace`, which the settings quiet (its
    per-task "succeeded" lines, LOGGING): operators still see every retry, in Celery's words."""
    if not _trace_logger.isEnabledFor(logging.INFO):
        logger.info("Task %s[%s] retry: %s", getattr(sender, "name", sender), request.id, reason)
