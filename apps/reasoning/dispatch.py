"""Queueing reasoning work: the one way the pipeline hands a job to a Celery worker.

The task module (`tasks.py`) is an entry point, like a view: Celery calls it, and it calls the
pipeline (a turn, the turn's notes, the sweeper). The pipeline queues those
same tasks. Were the pipeline to import `tasks.py`, the two would import each other; so nothing
in `apps` imports it but the app config, which loads it at start-up and so registers every
task under its stable name in every process, and the pipeline queues here, by that name.
import-linter holds both rules (pyproject.toml: `reasoning-tasks-by-name`,
`no-cycles-inside-apps`).

`queue` sends (and raises what the broker raises); `queue_or_run_here` is what a stored row
needs whose work must not be lost: with no broker configured (tasks run eagerly: the demo, the
tests) or one that refuses the message, the caller's `here` runs the work in this process.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from celery import current_app

logger = logging.getLogger(__name__)

# The tasks' stable names (apps/reasoning/tasks.py).
TURN = "reasoning.process_turn"
TURN_NOTES = "reasoning.turn_notes"


def queue(task: str, *args: Any, client_id: int) -> None:
    """Queue task `task` for a worker, in `client_id`'s scope (TenantTask); with no broker
    configured it runs eagerly, as Celery runs any task then. Raises what the broker raises."""
    current_app.tasks[task].delay(*args, client_id=client_id)


def queue_or_run_here(task: str, *args: Any, client_id: int, here: Callable[[], object]) -> bool:
    """Queue task `task` for a worker: True. With no broker configured, or one that refuses the
    message, call `here` instead, in this process (what it raises propagates): False."""
    if current_app.conf.task_always_eager:
        here()
        return False
    try:
        queue(task, *args, client_id=client_id)
        return True
    except Exception:
        # The broker is unreachable. The row is stored; do its work here rather than leave the
        # customer waiting for a job that was never queued.
        logger.exception("could not queue %s; running it in-process", task, extra={"job": args})
        here()
        return False
