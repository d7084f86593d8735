"""`manage.py simulate` end to end: the real runner through the openai SDK against the scripted
server — exit status 0 when every candidate case passes, 1 when one fails, with the JUnit file
naming the failed check; nothing customer-facing written and no webhook called."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from io import StringIO

import pytest
from django.core.management import call_command

from apps.simulations.cases import simcase_create
from apps.simulations.models import RunStatus, SimulationRun
from tests.simulations.conftest import UNSCOPED, live_rows
from tests.support.shop import assess

pytestmark = pytest.mark.django_db

HOURS = assess(response="We're open Mon-Fri 9-17.", confidence=9)


def hours_case(shop, name: str, expect: dict) -> None:
    simcase_create(
        client=shop,
        data={
            "name": name,
            "suite": "smoke",
            "turns": [{"customer": "When are you open?", "expect": expect}],
        },
    )


def simulate(*args: str) -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("simulate", *args, "--no-progress", stdout=out, stderr=StringIO())
    except SystemExit as exit:
        return int(exit.code or 0), out.getvalue()
    return 0, out.getvalue()


def test_a_passing_suite_exits_0_and_writes_junit(shop, llm, webhook, tmp_path):
    hours_case(shop, "hours", {"reply_contains": "Mon-Fri", "tool_not_called": "*"})
    llm.default("assess", HOURS)
    before = live_rows()
    junit = tmp_path / "out.xml"
    status, out = simulate("--client", shop.slug, "--suite", "smoke", "--junit", str(junit))
    assert status == 0, out
    run = SimulationRun.objects.unscoped(UNSCOPED).get()
    assert run.status == RunStatus.DONE and run.source == "cli" and run.compare is True
    assert "pass rate (code checks)" in out and "100%" in out
    root = ET.fromstring(junit.read_bytes())  # noqa: S314 - our own output
    assert [s.get("name") for s in root.iter("testsuite")] == ["baseline", "candidate"]
    assert all(s.get("failures") == "0" for s in root.iter("testsuite"))
    assert live_rows() == before
    assert webhook.calls() == []  # no tool webhook was called


def test_a_failing_candidate_case_exits_1_and_names_the_check(shop, llm, webhook, tmp_path):
    hours_case(shop, "hours", {"reply_contains": "Mon-Fri"})
    hours_case(shop, "weekend", {"reply_contains": "Saturday"})
    llm.default("assess", HOURS)
    junit = tmp_path / "out.xml"
    status, out = simulate(
        "--client", shop.slug, "--candidate-only", "--no-evaluation", "--junit", str(junit)
    )
    assert status == 1, out
    assert "FAILED weekend" in out and "reply_contains" in out
    root = ET.fromstring(junit.read_bytes())  # noqa: S314 - our own output
    [suite] = root.iter("testsuite")
    assert suite.get("name") == "candidate" and suite.get("failures") == "1"
    failures = {c.get("name"): c.find("failure") for c in suite.iter("testcase")}
    assert failures["hours"] is None
    assert failures["weekend"] is not None
    assert "reply_contains" in (failures["weekend"].text or "")
