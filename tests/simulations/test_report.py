"""The diff report over hand-built (unsaved) case runs: every figure below is worked out by hand
in the comments next to it."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from apps.simulations.models import CaseRun, CaseStatus, RunKind, SimulationRun
from apps.simulations.report import nearest_rank, report_build
from tests.simulations.factories_sim import failed_check, transcript_turn

BASE_CONFIG = {"mode": "standard", "model": "gpt-4o-mini"}
CAND_CONFIG = {"mode": "deliberative", "model": "gpt-4o-mini"}


def turn(
    index: int, calls: int, prompt: int, completion: int, cost: str, latency: int, **more: Any
) -> dict[str, Any]:
    return transcript_turn(
        index,
        reply="ok",
        llm_calls=calls,
        prompt_tokens=prompt,
        completion_tokens=completion,
        cost_usd=cost,
        latency_ms=latency,
        **more,
    )


def tool(name: str) -> dict[str, Any]:
    return {"name": name, "params": {"order_id": "TH-10042"}}


def case_run(
    name: str,
    side: str,
    attempt: int,
    status: str,
    transcript: list[dict[str, Any]],
    cost: str,
    **more: Any,
) -> CaseRun:
    return CaseRun(
        case_name=name,
        side=side,
        attempt=attempt,
        status=status,
        passed={"passed": True, "failed": False}.get(status),
        transcript=transcript,
        cost_usd=Decimal(cost),
        **more,
    )


def a_turns(
    calls: int, prompt: int, completion: int, cost: str, latency: int
) -> list[dict[str, Any]]:
    """Case A: the cancel is proposed, then runs."""
    return [
        turn(0, calls, prompt, completion, cost, latency, tools_proposed=[tool("cancel_order")]),
        turn(1, calls, prompt, completion, cost, latency, tools_ran=[tool("cancel_order")]),
    ]


FAILED_CHECK = failed_check()


def baseline_a_turns() -> list[dict[str, Any]]:
    """Case A on the baseline: (1 call, 100+20 tokens, $0.0001, 1000 ms), then (2, 200+30,
    $0.0002, 2000 ms)."""
    return [
        turn(0, 1, 100, 20, "0.0001", 1000, tools_proposed=[tool("cancel_order")]),
        turn(1, 2, 200, 30, "0.0002", 2000, tools_ran=[tool("cancel_order")]),
    ]


BASELINE = [
    # A, 2 attempts: turns (1 call, 100+20 tokens, $0.0001, 1000 ms) and (2, 200+30, $0.0002,
    # 2000 ms) — the second attempt failed a check.
    case_run(
        "a-cancel",
        "baseline",
        1,
        CaseStatus.PASSED,
        baseline_a_turns(),
        "0.0003",
        checks=[{**FAILED_CHECK, "passed": True}],
    ),
    case_run(
        "a-cancel",
        "baseline",
        2,
        CaseStatus.FAILED,
        baseline_a_turns(),
        "0.0003",
        checks=[FAILED_CHECK],
    ),
    # B: handed off in its first turn (1 call, 50+10, $0.00005, 500 ms); the second is skipped.
    case_run(
        "b-status",
        "baseline",
        1,
        CaseStatus.FAILED,
        [
            turn(0, 1, 50, 10, "0.00005", 500, escalated=True, escalation_reason="low_confidence"),
            {"index": 1, "customer": "hello?", "skipped": "handed off"},
        ],
        "0.00005",
    ),
    # C: one turn (1, 100+0, $0.0001, 800 ms) and a judge call ($0.00005 more on the case run).
    case_run(
        "c-policy",
        "baseline",
        1,
        CaseStatus.PASSED,
        [turn(0, 1, 100, 0, "0.0001", 800)],
        "0.00015",
        judged_passed=True,
    ),
]
CANDIDATE = [
    # A, 2 attempts, both passed: each turn 2 calls, 300+40, $0.0004, 3000 ms.
    *[
        case_run(
            "a-cancel",
            "candidate",
            attempt,
            CaseStatus.PASSED,
            a_turns(2, 300, 40, "0.0004", 3000),
            "0.0008",
        )
        for attempt in (1, 2)
    ],
    # B: answered with a read tool (2, 100+20, $0.0002, 1500 ms) and (1, 100+20, $0.0001, 1000).
    case_run(
        "b-status",
        "candidate",
        1,
        CaseStatus.PASSED,
        [
            turn(0, 2, 100, 20, "0.0002", 1500, tools_ran=[tool("get_order_status")]),
            turn(1, 1, 100, 20, "0.0001", 1000),
        ],
        "0.0003",
    ),
    # C: could not finish.
    case_run("c-policy", "candidate", 1, CaseStatus.ERROR, [], "0", error="budget reached"),
]


def run(**fields: Any) -> SimulationRun:
    values: dict[str, Any] = {
        "kind": RunKind.CASES,
        "compare": True,
        "baseline": BASE_CONFIG,
        "candidate": CAND_CONFIG,
    }
    return SimulationRun(**(values | fields))


def test_nearest_rank() -> None:
    values = [15, 20, 35, 40, 50]
    assert [nearest_rank(values, p) for p in (0, 5, 30, 40, 50, 95, 100)] == [
        15,
        15,
        20,
        20,
        35,
        50,
        50,
    ]
    assert nearest_rank([], 50) is None
    assert nearest_rank([7], 95) == 7


def test_both_sides_by_hand() -> None:
    report = report_build(run=run(), case_runs=[*CANDIDATE, *BASELINE])  # any order
    base, cand = report["sides"]["baseline"], report["sides"]["candidate"]
    assert base == {
        "config": BASE_CONFIG,
        "cases": 3,
        "passed": 1,  # c
        "failed": 2,  # a (1 of 2 attempts), b
        "errors": 0,
        "pass_rate": 0.3333,  # 1/3
        "pass_hat_k": 0.3333,  # only c passed every attempt
        "pass_at_1": 0.5,  # (1/2 + 0 + 1) / 3
        "judged": {"cases": 1, "passed": 1, "rate": 1.0},
        "turns": 6,  # a 2+2, b 1 (one skipped), c 1
        "llm_calls_per_turn": 1.3333,  # (3+3+1+1) / 6
        "tokens_per_turn": 143.3333,  # (350+350+60+100) / 6
        "cost_per_turn_usd": "0.000125",  # 0.00075 / 6
        "cost_usd": "0.0008",  # 0.0003+0.0003+0.00005+0.00015
        "latency_p50_ms": 1000,  # [500, 800, 1000, 1000, 2000, 2000]: rank 3
        "latency_p95_ms": 2000,  # rank ceil(5.7) = 6
        "escalations": 1,
        "tools_ran": 2,
        "conversations": 4,  # a twice, b, c
        "offline": False,
    }
    assert cand == {
        "config": CAND_CONFIG,
        "cases": 3,
        "passed": 2,
        "failed": 0,
        "errors": 1,
        "pass_rate": 0.6667,  # 2/3
        "pass_hat_k": 0.6667,
        "pass_at_1": 0.6667,  # (1 + 1 + 0) / 3
        "judged": {"cases": 0, "passed": 0, "rate": None},
        "turns": 6,  # a 2+2, b 2, c none
        "llm_calls_per_turn": 1.8333,  # (4+4+3) / 6
        "tokens_per_turn": 266.6667,  # (680+680+240) / 6
        "cost_per_turn_usd": "0.00031667",  # 0.0019 / 6, to 8 places
        "cost_usd": "0.0019",  # 0.0008+0.0008+0.0003+0
        "latency_p50_ms": 3000,  # [1000, 1500, 3000, 3000, 3000, 3000]: rank 3
        "latency_p95_ms": 3000,
        "escalations": 0,
        "tools_ran": 3,
        "conversations": 4,  # a twice, b, c
        "offline": False,
    }
    assert report["ratio"] == {
        "llm_calls_per_turn": 1.375,  # 11 / 8
        "tokens_per_turn": 1.8605,  # 1600 / 860
        "cost_per_turn": 2.5333,  # 0.0019 / 0.00075
        "latency_p95": 1.5,  # 3000 / 2000
    }
    assert report["summary"] == {"fixed": 2, "broke": 1, "unchanged_pass": 0, "unchanged_fail": 0}
    assert report["kind"] == "cases"
    json.dumps(report)  # JSON as it is


def test_each_case_by_hand() -> None:
    cases = {c["name"]: c for c in report_build(run=run(), case_runs=BASELINE + CANDIDATE)["cases"]}
    assert list(cases) == ["a-cancel", "b-status", "c-policy"]
    a = cases["a-cancel"]
    assert a["baseline"] == {
        "status": "failed",
        "attempts": 2,
        "passed_attempts": 1,
        "failed_checks": [{**FAILED_CHECK, "attempt": 2}],
        "judged_passed": None,
    }
    assert a["candidate"]["status"] == "passed" and a["candidate"]["passed_attempts"] == 2
    assert (a["change"], a["tool_changes"], a["escalation_change"]) == ("fixed", [], "")
    b = cases["b-status"]
    assert b["change"] == "fixed"
    assert b["tool_changes"] == ["get_order_status: not called → ran"]
    assert b["escalation_change"] == "escalated → handled"
    c = cases["c-policy"]
    assert c["baseline"]["judged_passed"] is True
    assert c["candidate"] == {
        "status": "error",
        "attempts": 1,
        "passed_attempts": 0,
        "failed_checks": [],
        "judged_passed": None,
        "error": "budget reached",
    }
    assert (c["change"], c["tool_changes"], c["escalation_change"]) == ("broke", [], "")


def test_tool_states_and_unchanged_cases() -> None:
    proposed_only = [turn(0, 1, 10, 1, "0", 10, tools_proposed=[tool("cancel_order")])]
    ran = [turn(0, 1, 10, 1, "0", 10, tools_ran=[tool("cancel_order")])]
    refused = [turn(0, 1, 10, 1, "0", 10, tools_refused=[{**tool("refund"), "verdict": "refuse"}])]
    rows = [
        case_run("x", "baseline", 1, CaseStatus.PASSED, proposed_only + refused, "0"),
        case_run("x", "candidate", 1, CaseStatus.PASSED, ran, "0"),
        case_run("y", "baseline", 1, CaseStatus.FAILED, ran, "0"),
        case_run(
            "y",
            "candidate",
            1,
            CaseStatus.FAILED,
            [turn(0, 1, 1, 1, "0", 1, escalated=True, escalation_reason="policy")],
            "0",
        ),
    ]
    report = report_build(run=run(), case_runs=rows)
    x, y = report["cases"]
    assert x["change"] == "unchanged"
    assert x["tool_changes"] == ["cancel_order: proposed → ran", "refund: refused → not called"]
    assert y["change"] == "unchanged"
    assert y["tool_changes"] == ["cancel_order: ran → not called"]
    assert y["escalation_change"] == "handled → escalated"
    assert report["summary"] == {"fixed": 0, "broke": 0, "unchanged_pass": 1, "unchanged_fail": 1}


def test_a_changed_escalation_reason_is_shown() -> None:
    def handed(reason: str) -> list[dict[str, Any]]:
        return [turn(0, 1, 1, 1, "0", 1, escalated=True, escalation_reason=reason)]

    rows = [
        case_run("x", "baseline", 1, CaseStatus.PASSED, handed("customer_request"), "0"),
        case_run("x", "candidate", 1, CaseStatus.PASSED, handed("low_confidence"), "0"),
    ]
    (x,) = report_build(run=run(), case_runs=rows)["cases"]
    assert x["escalation_change"] == "escalated (customer_request) → escalated (low_confidence)"


def test_without_a_baseline() -> None:
    report = report_build(run=run(compare=False), case_runs=CANDIDATE)
    assert list(report["sides"]) == ["candidate"]
    assert report["ratio"] == {
        "llm_calls_per_turn": None,
        "tokens_per_turn": None,
        "cost_per_turn": None,
        "latency_p95": None,
    }
    assert report["summary"] == {"fixed": 0, "broke": 0, "unchanged_pass": 0, "unchanged_fail": 0}
    assert all(c["change"] == "" and "baseline" not in c for c in report["cases"])


def test_a_zero_baseline_gives_no_ratio() -> None:
    rows = [
        case_run("x", "baseline", 1, CaseStatus.PASSED, [turn(0, 0, 0, 0, "0", 0)], "0"),
        case_run("x", "candidate", 1, CaseStatus.PASSED, [turn(0, 1, 10, 1, "0.001", 5)], "0"),
    ]
    assert set(report_build(run=run(), case_runs=rows)["ratio"].values()) == {None}


def test_an_empty_run() -> None:
    report = report_build(run=run(), case_runs=[])
    side = report["sides"]["candidate"]
    assert side["cases"] == 0 and side["pass_rate"] is None and side["turns"] == 0
    assert side["llm_calls_per_turn"] is None and side["cost_usd"] == "0"
    assert side["latency_p95_ms"] is None
    assert report["cases"] == []


def test_a_replay_is_compared_with_the_original() -> None:
    original_0 = {
        "reply": "Let me get a person",
        "tools_ran": [],
        "tools_proposed": [],
        "escalated": True,
        "escalation_reason": "low_confidence",
    }
    original_1 = {
        "reply": "Shall I cancel?",
        "tools_ran": [],
        "tools_proposed": [tool("cancel_order")],
        "escalated": False,
        "escalation_reason": None,
    }
    transcript = [
        turn(
            0, 1, 10, 1, "0.00001", 700, tools_ran=[tool("get_order_status")], original=original_0
        ),
        turn(
            1, 1, 10, 1, "0.00001", 900, tools_proposed=[tool("cancel_order")], original=original_1
        ),
    ]
    rows = [
        case_run("conversation-3f2a91c0", "candidate", 1, CaseStatus.PASSED, transcript, "0.00002"),
        case_run(
            "conversation-3f2a91c0",
            "baseline",
            1,
            CaseStatus.FAILED,
            [
                turn(
                    0, 1, 10, 1, "0.00001", 600, escalated=True, escalation_reason="low_confidence"
                ),
                {"index": 1, "customer": "cancel", "skipped": "handed off"},
            ],
            "0.00001",
        ),
    ]
    report = report_build(run=run(kind=RunKind.REPLAY), case_runs=rows)
    assert report["kind"] == "replay"
    (entry,) = report["cases"]
    assert entry["change"] == "fixed"
    assert entry["tool_changes"] == ["turns[0] get_order_status: not called → ran"]
    assert entry["escalation_change"] == "escalated → handled"
    assert entry["baseline_tool_changes"] == [
        "cancel_order: not called → proposed",
        "get_order_status: not called → ran",
    ]
    assert entry["baseline_escalation_change"] == "escalated → handled"
    assert report["ratio"]["latency_p95"] == pytest.approx(900 / 600, abs=1e-4)


def test_the_same_rows_give_the_same_report() -> None:
    assert report_build(run=run(), case_runs=BASELINE + CANDIDATE) == report_build(
        run=run(), case_runs=list(reversed(BASELINE + CANDIDATE))
    )


def test_an_attempt_that_did_not_finish_is_an_error() -> None:
    rows = [
        case_run("x", "candidate", 1, CaseStatus.PASSED, [turn(0, 1, 1, 1, "0", 1)], "0"),
        case_run("x", "candidate", 2, CaseStatus.STOPPED, [], "0"),
    ]
    report = report_build(run=run(compare=False), case_runs=rows)
    (x,) = report["cases"]
    assert x["candidate"]["status"] == "error"
    assert x["candidate"]["error"] == "attempt 2 did not finish (stopped)"
    side = report["sides"]["candidate"]
    assert (side["errors"], side["pass_hat_k"], side["pass_at_1"]) == (1, 0.0, 0.5)


def test_a_failed_turn_is_left_out_of_the_per_turn_figures() -> None:
    failed = turn(1, 0, 0, 0, "0", 12, error="respond failed", escalated=True)
    rows = [
        case_run(
            "x",
            "candidate",
            1,
            CaseStatus.ERROR,
            [turn(0, 2, 10, 2, "0.0001", 900), failed],
            "0.0001",
        ),
    ]
    side = report_build(run=run(compare=False), case_runs=rows)["sides"]["candidate"]
    assert (side["turns"], side["llm_calls_per_turn"], side["latency_p50_ms"]) == (1, 2.0, 900)
    assert (side["escalations"], side["errors"]) == (1, 1)
