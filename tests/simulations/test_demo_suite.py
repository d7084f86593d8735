"""The shipped demo suite (demo/simulations/demo.json) on the offline demo model, as `make
simulate` runs it: every case passes its code-checked expectations; the judged criteria come out
as the offline judge can give them (it checks quoted texts only, and says so otherwise); running
it writes nothing a customer could see; and the same model gives the same report twice."""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from apps.clients.models import Client
from apps.conversations.models import Conversation, Message
from apps.core.tenancy import tenant_scope
from apps.escalations.models import Escalation
from apps.simulations.models import CaseRun, SimCase, SimulationRun
from apps.simulations.services import simulation_run_create, simulation_run_execute
from apps.tools.models import PendingAction, ToolExecution
from tests.conftest import DEMO_TENANT
from tests.simulations.conftest import DEMO_CASES

pytestmark = pytest.mark.django_db

SUITE = json.loads(DEMO_CASES.read_text(encoding="utf-8"))["tests"]
NEEDS_REAL_MODEL = {c["name"] for c in SUITE if "needs-real-model" in c.get("tags", [])}
# The offline judge's verdicts: a criterion that quotes a text is checked (here: met); a
# free-form one is "cannot judge offline" — a fail, shown as the model's opinion, never hidden.
JUDGED_OFFLINE = {
    "cancel-confirmed": True,
    "return-window": True,
    "prompt-injection-refund": True,
    "sim-return-window": True,
    "return-after-40-days": False,
    "out-of-scope": False,
    "spanish-order-status": False,
}
TIMINGS = {"latency_ms", "latency_p50_ms", "latency_p95_ms", "latency_p95", "duration_ms"}


def run_suite(client: Client) -> SimulationRun:
    run = simulation_run_create(
        client=client,
        source="cli",
        kind="cases",
        selection={"suite": "demo"},
        overrides={},
        compare=False,
        enqueue=False,
    )
    with tenant_scope(client.pk):
        simulation_run_execute(run_id=run.pk)
    return SimulationRun.objects.unscoped("test checks the database directly").get(pk=run.pk)


def live_rows(client: Client) -> dict[str, int]:
    reason = "test checks the database directly"
    return {
        model.__name__: model.objects.unscoped(reason).filter(client=client).count()
        for model in (Conversation, Message, ToolExecution, PendingAction, Escalation)
    }


def without_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


def test_the_suite_is_shipped_and_loaded_by_demo_setup(demo):
    assert len(SUITE) >= 30
    cases = SimCase.objects.unscoped("test checks the database directly").filter(client=demo)
    assert sorted(c.name for c in cases) == sorted(c["name"] for c in SUITE)
    assert {c.suite for c in cases} == {"demo"}
    # The kinds of case the suite is for are all there.
    tags = {tag for c in SUITE for tag in c.get("tags", [])}
    assert {"cancel", "return", "exchange", "address", "policy", "handoff", "injection"} <= tags
    assert {"changed-mind", "disabled-tool", "simulated", "judged", "missing-params"} <= tags
    for name in NEEDS_REAL_MODEL:
        case = next(c for c in SUITE if c["name"] == name)
        assert "real model" in case["description"], name


def test_demo_setup_again_and_demo_reset_keep_the_suite(demo):
    out = StringIO()
    call_command("demo_reset", "--tenant", str(DEMO_TENANT), stdout=StringIO())
    call_command(
        "demo_setup", "--tenant", str(DEMO_TENANT), "--simulations", str(DEMO_CASES), stdout=out
    )
    assert f"{len(SUITE)} test case(s) for trailhead" in out.getvalue()
    assert "kept as they are" in out.getvalue()  # staff's edits to the suite are never undone
    reason = "test checks the database directly"
    assert SimCase.objects.unscoped(reason).filter(client=demo).count() == len(SUITE)


def test_make_simulate_passes_every_case_on_the_offline_model(demo, tmp_path):
    """What `make simulate` runs: baseline and candidate (the same live configuration), JUnit
    XML, exit status 0; nothing a customer could see is written."""
    before = live_rows(demo)
    out, junit = StringIO(), tmp_path / "simulate.xml"
    call_command(
        "simulate", "--suite", "demo", "--junit", str(junit), "--no-progress", stdout=out
    )  # exits 1 (SystemExit) when a case fails
    run = SimulationRun.objects.unscoped("test checks the database directly").get()
    assert run.status == "done", run.error
    case_runs = list(CaseRun.objects.unscoped("test checks the database directly").filter(run=run))
    by_name: dict[str, list[CaseRun]] = {}
    for case_run in case_runs:
        by_name.setdefault(case_run.case_name, []).append(case_run)
    assert sorted(by_name) == sorted(c["name"] for c in SUITE)
    failures = {
        cr.case_name: [c for c in cr.checks if not c.get("passed")] or cr.error
        for cr in case_runs
        if cr.status != "passed"
    }
    assert failures == {}
    judged = {
        name: {cr.judged_passed for cr in runs}
        for name, runs in by_name.items()
        if name in JUDGED_OFFLINE
    }
    assert judged == {name: {verdict} for name, verdict in JUDGED_OFFLINE.items()}
    assert all(cr.judged_passed is None for cr in case_runs if cr.case_name not in JUDGED_OFFLINE)
    # Two sides, and k attempts where the case asks for them.
    assert len(by_name["order-status"]) == 4 and len(by_name["cancel-confirmed"]) == 2
    # The sandbox: no conversation, message, tool run, confirmation or hand-off was written.
    assert live_rows(demo) == before
    for side in ("baseline", "candidate"):
        counts = run.report["sides"][side]
        assert (counts["passed"], counts["failed"], counts["errors"]) == (len(SUITE), 0, 0)
    assert run.report["summary"]["unchanged_pass"] == len(SUITE)
    xml = junit.read_text(encoding="utf-8")
    assert xml.count("<testcase") >= len(SUITE) and "<failure" not in xml
    assert "(trailhead): done" in out.getvalue()


def test_the_same_model_gives_the_same_report_twice(demo):
    first, second = run_suite(demo), run_suite(demo)
    assert first.report["cases"] and first.public_id != second.public_id
    assert without_timings(first.report) == without_timings(second.report)
