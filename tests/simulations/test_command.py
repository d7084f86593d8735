"""`manage.py simulate`: usage errors exit 2, the JUnit XML has one testsuite per side and one
testcase per case with the failed checks, and the summary table shows both sides and changes."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from apps.simulations.management.commands.simulate import junit_xml, pick_client, summary_table
from apps.simulations.models import SimulationRun
from tests.simulations.factories_sim import make_case, make_finished_run

pytestmark = pytest.mark.django_db


def simulate(*args: str) -> str:
    out = StringIO()
    call_command("simulate", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_junit_has_a_suite_per_side_and_the_failed_checks(client_a):
    run = make_finished_run(client_a)
    root = ET.fromstring(junit_xml(run, run.report))  # noqa: S314 - our own output
    suites = {suite.get("name"): suite for suite in root.iter("testsuite")}
    assert set(suites) == {"baseline", "candidate"}
    candidate = suites["candidate"]
    assert candidate.get("tests") == "2" and candidate.get("failures") == "1"
    cases = {case.get("name"): case for case in candidate.iter("testcase")}
    assert set(cases) == {"broke-one", "fixed-one"}
    failure = cases["broke-one"].find("failure")
    assert failure is not None
    assert "tool_called" in failure.get("message", "")
    assert "cancel_order did not run" in (failure.text or "")
    assert cases["fixed-one"].find("failure") is None
    assert float(cases["fixed-one"].get("time", "0")) == pytest.approx(0.12)
    baseline = {case.get("name"): case for case in suites["baseline"].iter("testcase")}
    assert baseline["fixed-one"].find("failure") is not None


def test_junit_without_a_baseline_has_one_suite(client_a):
    run = make_finished_run(client_a, compare=False)
    report = {**run.report, "sides": {"candidate": run.report["sides"]["candidate"]}}
    root = ET.fromstring(junit_xml(run, report))  # noqa: S314 - our own output
    assert [s.get("name") for s in root.iter("testsuite")] == ["candidate"]


def test_summary_table_shows_both_sides_changes_and_failures(client_a):
    run = make_finished_run(client_a)
    text = summary_table(run.report)
    assert "baseline" in text and "candidate" in text
    assert "pass rate (code checks)" in text and "50%" in text
    assert "judged (model's opinion)" in text
    assert "fixed 1 · broke 1" in text
    assert "broke  broke-one" in text
    assert "FAILED broke-one" in text
    assert "turn 1: tool_called — cancel_order did not run" in text


@pytest.mark.parametrize(
    "args",
    [
        ["--client", "no-such-shop"],
        ["--client", "acme", "--suite", "no-such-suite"],
        ["--client", "acme", "--case", "no-such-case"],
        ["--client", "acme", "--since", "2026-01-01"],
        ["--client", "acme", "--replay-escalated", "--since", "last tuesday"],
        ["--client", "acme", "--replay-escalated", "--suite", "demo"],
        ["--client", "acme", "--business-info", "/no/such/file.json"],
    ],
)
def test_usage_errors_exit_2_and_start_nothing(client_a, args):
    make_case(client_a)
    with pytest.raises(CommandError) as caught:
        simulate(*args)
    assert caught.value.returncode == 2
    assert not SimulationRun.objects.unscoped("test checks the database directly").exists()


def test_the_client_is_the_only_one_or_the_demo_shop(client_a, client_b):
    with pytest.raises(CommandError):
        pick_client(None)  # two clients, no demo shop
    client_b.slug = "trailhead"
    client_b.save(update_fields=["slug"])
    assert pick_client(None) == client_b
    client_b.is_active = False
    client_b.save(update_fields=["is_active"])
    assert pick_client(None) == client_a  # the only active one
