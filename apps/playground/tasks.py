"""Playground runs off the request: through the fleet's slots on a worker (at a lower priority
than live turns, at most PLAYGROUND_RUNS_PER_CLIENT at once per client; apps/platform/slots.py), or
— with no broker (the demo) — in a background thread of the web process, so the page's POST
returns at once either way."""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.db import connections

from apps.core.tasks import tenant_task
from apps.core.tenancy import tenant_scope
from apps.platform import slots
from apps.playground.models import PlaygroundRun
from apps.playground.services import playground_run_execute

logger = logging.getLogger(__name__)


def run_playground_job(job: str) -> None:
    """The scheduler's runner for playground runs (a job is a run id). Never raises."""
    try:
        playground_run_execute(run_id=int(job))
    except Exception:
        logger.exception("playground run failed outside the service", extra={"run": job})


slots.register_runner(slots.PLAYGROUND, run_playground_job)


@tenant_task("playground.execute_run", ("playground.PlaygroundRun", "run_id"))
def execute_run(run_id: int | None = None, *, parked: bool = False) -> None:
    """Run one playground run when the slots allow (else it waits, parked, and a thread that
    finishes a job runs it); `parked`: run whatever parked job should run now. A redelivered
    task finds its run claimed and does nothing."""
    if parked or run_id is None:
        slots.run_parked()
        return
    client_id = (
        PlaygroundRun.objects.for_current_client()  # the run's client (TenantTask)
        .filter(pk=run_id)
        .values_list("client_id", flat=True)
        .first()
    )
    if client_id is None:
        return
    slots.run_fairly(tenant=str(client_id), kind=slots.PLAYGROUND, job=str(run_id))


def _in_thread(run_id: int, client_id: int) -> None:
    try:
        with tenant_scope(client_id):
            playground_run_execute(run_id=run_id)
    except Exception:
        logger.exception("playground run failed outside the service", extra={"run": run_id})
    finally:
        connections.close_all()  # a thread of our own: its connections are ours to close


def enqueue_run(run_id: int, *, client_id: int) -> None:
    """Start the run: on a worker when a broker is configured (parked in the slots first, so it
    waits behind live turns); else in a background thread (`PLAYGROUND_EAGER_THREAD`, on by
    default) or, with that off, right here."""
    if not execute_run.app.conf.task_always_eager:
        try:
            if client_id is not None and slots.park(
                tenant=str(client_id), kind=slots.PLAYGROUND, job=str(run_id)
            ):
                execute_run.delay(parked=True)
            else:
                execute_run.delay(run_id, client_id=client_id)
            return
        except Exception:
            logger.exception("could not queue the playground run; running it in a thread")
    if not settings.PLAYGROUND_EAGER_THREAD:
        with tenant_scope(client_id):
            playground_run_execute(run_id=run_id)
        return
    threading.Thread(
        target=_in_thread, args=(run_id, client_id), name=f"playground-{run_id}", daemon=True
    ).start()
