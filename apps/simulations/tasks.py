"""Simulation runs off the request: one job per case run on the workers, through the fleet's
slots as their lowest-priority kind (`apps.platform.slots.SIMULATION`: after live turns and
playground runs, at most SIMULATION_JOBS_PER_CLIENT at once per client and
SIMULATION_SLOTS_PERCENT of the fleet), so live customers never queue behind a test run. With
no broker (the demo) a run goes through one background thread of the web process, or the
caller's thread when SIMULATION_EAGER_THREAD is off (tests)."""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.db import connections

from apps.core.tasks import tenant_task
from apps.core.tenancy import tenant_scope
from apps.platform import slots
from apps.simulations.models import CaseRun, CaseStatus
from apps.simulations.services import caserun_execute, simulation_run_execute

logger = logging.getLogger(__name__)


def run_simulation_job(job: str) -> None:
    """The scheduler's runner for simulation jobs (a job is a case run id). Never raises."""
    try:
        caserun_execute(case_run_id=int(job))
    except Exception:
        logger.exception("simulation case run failed outside the service", extra={"job": job})


slots.register_runner(slots.SIMULATION, run_simulation_job)


@tenant_task("simulations.execute_case_run", ("simulations.CaseRun", "case_run_id"))
def execute_case_run(case_run_id: int | None = None, *, parked: bool = False) -> None:
    """Run one case run when the slots allow (else it waits, parked, and a thread that finishes
    a job runs it); `parked`: run whatever parked job should run now. A redelivered task finds
    its case run claimed and does nothing."""
    if parked or case_run_id is None:
        slots.run_parked()
        return
    client_id = (
        CaseRun.objects.for_current_client()
        .filter(pk=case_run_id)
        .values_list("client_id", flat=True)
        .first()
    )
    if client_id is None:
        return
    slots.run_fairly(tenant=str(client_id), kind=slots.SIMULATION, job=str(case_run_id))


def _in_thread(run_id: int, client_id: int) -> None:
    try:
        with tenant_scope(client_id):
            simulation_run_execute(run_id=run_id)
    except Exception:
        logger.exception("simulation run failed outside the service", extra={"run": run_id})
    finally:
        connections.close_all()  # a thread of our own: its connections are ours to close


def enqueue_run(run_id: int, *, client_id: int) -> None:
    """Start the run's case runs: one job each on the workers when a broker is configured
    (parked in the slots first, so they wait behind live turns); else all of them in a
    background thread (`SIMULATION_EAGER_THREAD`) or, with that off, right here."""
    if not execute_case_run.app.conf.task_always_eager:
        try:
            with tenant_scope(client_id):
                ids = list(
                    CaseRun.objects.for_current_client()
                    .filter(run_id=run_id, status=CaseStatus.QUEUED)
                    .order_by("case_name", "attempt", "side")
                    .values_list("pk", flat=True)
                )
            for case_run_id in ids:
                if slots.park(tenant=str(client_id), kind=slots.SIMULATION, job=str(case_run_id)):
                    execute_case_run.delay(parked=True)
                else:
                    execute_case_run.delay(case_run_id, client_id=client_id)
            return
        except Exception:
            logger.exception("could not queue the simulation run; running it in a thread")
    if not settings.SIMULATION_EAGER_THREAD:
        with tenant_scope(client_id):
            simulation_run_execute(run_id=run_id)
        return
    threading.Thread(
        target=_in_thread, args=(run_id, client_id), name=f"simulation-{run_id}", daemon=True
    ).start()
