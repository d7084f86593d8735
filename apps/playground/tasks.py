"""Playground runs off the request: a Celery task, or — with no broker (the demo) — a
background thread of the web process, so the page's POST returns at once either way."""

from __future__ import annotations

import logging
import threading

from celery import shared_task
from django.conf import settings
from django.db import connections

from apps.playground.services import playground_run_execute

logger = logging.getLogger(__name__)


@shared_task(name="playground.execute_run", ignore_result=True, acks_late=True)
def execute_run(run_id: int) -> None:
    """Run one playground run; a redelivered task finds it claimed and does nothing."""
    playground_run_execute(run_id=run_id)


def _in_thread(run_id: int) -> None:
    try:
        playground_run_execute(run_id=run_id)
    except Exception:
        logger.exception("playground run failed outside the service", extra={"run": run_id})
    finally:
        connections.close_all()  # a thread of our own: its connections are ours to close


def enqueue_run(run_id: int) -> None:
    """Start the run: on a worker when a broker is configured; else in a background thread
    (`PLAYGROUND_EAGER_THREAD`, on by default) or, with that off, right here."""
    if not execute_run.app.conf.task_always_eager:
        try:
            execute_run.delay(run_id)
            return
        except Exception:
            logger.exception("could not queue the playground run; running it in a thread")
    if not settings.PLAYGROUND_EAGER_THREAD:
        playground_run_execute(run_id=run_id)
        return
    threading.Thread(
        target=_in_thread, args=(run_id,), name=f"playground-{run_id}", daemon=True
    ).start()
