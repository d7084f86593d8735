"""Simulation rows for the surface tests: cases in the case format, and finished runs written
the way the engine writes them (a report in the report's shape, case runs with transcripts), so
the API, admin and command can be tested without running a model."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from apps.simulations.models import CaseRun, RunStatus, SimCase, SimulationRun


def case_rows(client: Any, *fields: str) -> list[tuple[Any, ...]]:
    """The client's saved cases, by name: (name, *fields) each, read past the tenant scope."""
    return list(
        SimCase.objects.unscoped("test checks the database directly")
        .filter(client=client)
        .order_by("name")
        .values_list("name", *fields)
    )


def cancel_turns(**confirmed: Any) -> list[dict[str, Any]]:
    """A case's two turns: the customer asks to cancel TH-10042 (proposed, not run), then says
    yes (run); `confirmed` adds expectations to the second turn."""

    def order() -> dict[str, Any]:
        return {"name": "cancel_order", "params": {"order_id": "TH-10042"}}

    return [
        {
            "customer": "Please cancel order TH-10042",
            "expect": {"tool_proposed": order(), "tool_not_called": "cancel_order"},
        },
        {"customer": "Yes, cancel it", "expect": {"tool_called": order(), **confirmed}},
    ]


def case_data(name: str = "cancel-confirmed", **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": name,
        "suite": "demo",
        "description": "A destructive tool waits for the customer's confirmation.",
        "tags": ["cancel", "destructive"],
        "turns": cancel_turns(),
        "expect": {"tool_called": {"name": "cancel_order", "times": 1}},
        "criteria": ["does not promise a refund"],
        "tools": {"cancel_order": {"ok": True, "result": {"cancelled": True}}},
    }
    data.update(extra)
    return data


def make_case(client: Any, name: str = "cancel-confirmed", **extra: Any) -> SimCase:
    data = case_data(name, **extra)
    return SimCase.objects.create(client=client, **data)


def side_stats(passed: int, failed: int) -> dict[str, Any]:
    cases = passed + failed
    return {
        "config": {"mode": "standard"},
        "cases": cases,
        "passed": passed,
        "failed": failed,
        "errors": 0,
        "pass_rate": passed / cases if cases else 0.0,
        "pass_hat_k": passed / cases if cases else 0.0,
        "pass_at_1": passed / cases if cases else 0.0,
        "judged": {"cases": 1, "passed": 1, "rate": 1.0},
        "turns": 2 * cases,
        "llm_calls_per_turn": 2.0,
        "tokens_per_turn": 900.0,
        "cost_per_turn_usd": "0.00020",
        "cost_usd": "0.00080",
        "latency_p50_ms": 40,
        "latency_p95_ms": 90,
        "escalations": 0,
        "tools_ran": 1,
    }


def failed_check() -> dict[str, Any]:
    return {
        "turn": 1,
        "expect": "tool_called",
        "spec": {"name": "cancel_order"},
        "passed": False,
        "detail": "cancel_order did not run",
    }


def transcript_turn(index: int, **fields: Any) -> dict[str, Any]:
    """One transcript entry, as the engine writes it (defaults: a plain answer)."""
    entry: dict[str, Any] = {
        "index": index,
        "customer": f"message {index}",
        "replies": [],
        "reply": "",
        "tools_ran": [],
        "tools_proposed": [],
        "tools_refused": [],
        "asked": False,
        "escalated": False,
        "escalation_reason": None,
        "evaluation": "",
        "confidence": None,
        "llm_calls": 1,
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "cost_usd": "0.00010",
        "latency_ms": 900,
        "trace": 1,
        "error": "",
    }
    return entry | fields


def transcript(trace: int | None = None) -> list[dict[str, Any]]:
    return [
        transcript_turn(
            0,
            customer="Please cancel order TH-10042",
            replies=[{"text": "Shall I cancel TH-10042?", "kind": "text", "data": {}}],
            reply="Shall I cancel TH-10042?",
            tools_proposed=[{"name": "cancel_order", "params": {"order_id": "TH-10042"}}],
            llm_calls=2,
            prompt_tokens=800,
            completion_tokens=100,
            cost_usd="0.0002",
            latency_ms=40,
            trace=trace,
        )
    ]


def make_finished_run(client: Any, *, candidate_fails: bool = True, **extra: Any) -> SimulationRun:
    """A finished run of two cases: `fixed-one` passes only on the candidate, `broke-one`
    (when `candidate_fails`) only on the baseline."""
    fixed = make_case(client, "fixed-one")
    broke = make_case(client, "broke-one")
    ok = {
        "status": "passed",
        "attempts": 1,
        "passed_attempts": 1,
        "failed_checks": [],
        "judged_passed": True,
    }
    bad = {
        "status": "failed",
        "attempts": 1,
        "passed_attempts": 0,
        "failed_checks": [failed_check()],
        "judged_passed": None,
    }
    report = {
        "kind": "cases",
        "sides": {
            "baseline": side_stats(1, 1),
            "candidate": side_stats(1, 1) if candidate_fails else side_stats(2, 0),
        },
        "ratio": {
            "llm_calls_per_turn": 1.5,
            "tokens_per_turn": 1.4,
            "cost_per_turn": 1.6,
            "latency_p95": 1.2,
        },
        "summary": {
            "fixed": 1,
            "broke": int(candidate_fails),
            "unchanged_pass": 0,
            "unchanged_fail": 0,
        },
        "cases": [
            {
                "name": "broke-one",
                "baseline": ok,
                "candidate": bad if candidate_fails else ok,
                "change": "broke" if candidate_fails else "unchanged",
                "tool_changes": ["cancel_order: ran → proposed"] if candidate_fails else [],
                "escalation_change": "",
            },
            {
                "name": "fixed-one",
                "baseline": bad,
                "candidate": ok,
                "change": "fixed",
                "tool_changes": ["cancel_order: proposed → ran"],
                "escalation_change": "",
            },
        ],
    }
    run = SimulationRun.objects.create(
        client=client,
        name=extra.pop("name", "Deliberative?"),
        selection={"suite": "demo"},
        candidate_overrides={"mode": "deliberative"},
        baseline={"mode": "standard"},
        candidate={"mode": "deliberative"},
        status=RunStatus.DONE,
        total=4,
        completed=4,
        report=report,
        started_at=timezone.now(),
        finished_at=timezone.now(),
        **extra,
    )
    for case, base_ok, cand_ok in ((fixed, False, True), (broke, True, not candidate_fails)):
        for side, good in (("baseline", base_ok), ("candidate", cand_ok)):
            CaseRun.objects.create(
                client=client,
                run=run,
                case=case,
                case_name=case.name,
                side=side,
                status="passed" if good else "failed",
                passed=good,
                transcript=transcript(),
                checks=[] if good else [failed_check()],
                llm_calls=2,
                duration_ms=120,
                finished_at=timezone.now(),
            )
    return run
