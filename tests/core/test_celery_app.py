"""The Celery app makes its (disabled) result backend once per process, not once per thread:
making one scans the installed packages' entry points (config/celery.py)."""

from __future__ import annotations

import threading

from celery.backends.base import DisabledBackend

from config.celery import GuideDeskCelery, app


def backends_of_new_threads(celery: GuideDeskCelery, count: int = 3) -> list[object]:
    seen: list[object] = []

    def first_queued_task() -> None:  # what a new web thread does on its first turn
        seen.append(celery.backend)

    for _ in range(count):
        thread = threading.Thread(target=first_queued_task)
        thread.start()
        thread.join()
    return seen


def test_every_thread_shares_the_disabled_backend() -> None:
    seen = backends_of_new_threads(app)

    assert isinstance(seen[0], DisabledBackend)
    assert all(backend is seen[0] for backend in seen)


def test_a_configured_backend_stays_per_thread() -> None:
    celery = GuideDeskCelery("with-results", backend="cache+memory://", set_as_current=False)

    seen = backends_of_new_threads(celery)

    assert len({id(backend) for backend in seen}) == 3
