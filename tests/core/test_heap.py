"""A long-running process freezes what starting built (apps/platform/heap.py): the Procfile's web
worker after loading the application, the Celery worker once it is ready."""

from __future__ import annotations

import gc
import sys

import pytest
from celery import signals

from apps.platform import heap
from apps.platform.uvicorn_worker import BoundedUvicornWorker
from config.celery import settle_heap


@pytest.fixture
def unfrozen():
    yield
    gc.unfreeze()  # the test process goes on collecting as before


def test_settle_imports_the_lazy_modules_and_freezes_what_is_left(unfrozen) -> None:
    sys.modules.pop("openai.resources.chat.completions", None)

    frozen = heap.settle()

    assert frozen > 10_000
    assert gc.get_freeze_count() > 10_000  # (fewer, as frozen objects are freed by refcount)
    assert "openai.resources.chat.completions" in sys.modules
    made_after = [object()]  # what requests and tasks allocate later is collected as before
    assert gc.is_tracked(made_after)
    assert gc.get_freeze_count() <= frozen


def test_the_procfile_processes_settle_after_starting(monkeypatch) -> None:
    calls: list[str] = []

    def settle() -> int:
        calls.append("settled")
        return 0

    monkeypatch.setattr(heap, "settle", settle)
    monkeypatch.setattr(
        "uvicorn_worker.UvicornWorker.load_wsgi", lambda self: calls.append("loaded")
    )

    BoundedUvicornWorker.load_wsgi(object.__new__(BoundedUvicornWorker))
    assert calls == ["loaded", "settled"]

    assert settle_heap in signals.worker_ready._live_receivers(None)
    settle_heap()
    assert calls == ["loaded", "settled", "settled"]
