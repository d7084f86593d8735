"""The diff report of a simulation run: baseline and candidate side by side.

`report_build` is pure over the rows it is given (the run and its case runs; no query): the same
rows give the same report. Its shape (docs/simulations.md):

* per side (`sides.baseline`, `sides.candidate`): how many cases passed, failed or could not
  finish; the pass rate (code-checked expectations only) with pass^k and pass@1 (after τ-bench:
  a case run k times passes^k when all k attempts passed; pass@1 is the mean share of passing
  attempts); the judged criteria apart; and what a customer turn costs with that configuration
  — LLM calls, tokens and cost per turn that finished (a failed turn's figures are partial and
  left out), latency p50/p95 (nearest rank) — plus the side's whole spend (`cost_usd`, the
  judge's and the simulated customer's calls included);
* `ratio`: candidate ÷ baseline of the per-turn figures and of latency p95 (null when there is
  no baseline or its figure is 0);
* per case: each side's result, the change (fixed / broke / unchanged; "" without a baseline),
  the tools whose use changed ("cancel_order: proposed → ran") and the hand-off change
  ("escalated → handled"). In a replay these two compare the candidate with what happened in the
  original conversation, turn by turn (and `baseline_tool_changes` /
  `baseline_escalation_change` compare the two sides);
* `summary`: how many cases were fixed, broke, or stayed passing or failing.

Money is summed as Decimal and written as strings. The first attempt of each side is the one
whose tools and hand-offs are compared (a deterministic choice; attempts are numbered from 1)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from django.utils.translation import gettext as _

from apps.simulations.models import CaseStatus, RunKind, Side

if TYPE_CHECKING:
    from apps.simulations.models import CaseRun, SimulationRun

__all__ = ["nearest_rank", "report_build"]

MAX_FAILED_CHECKS = 50  # per case and side
_Q = Decimal("0.00000001")  # CaseRun.cost_usd's precision
_STATE_ORDER = ("ran", "proposed", "refused")
_NOT_CALLED = "not called"


def nearest_rank(values: Iterable[int], percent: float) -> int | None:
    """The nearest-rank percentile: the smallest value with at least `percent` % of the values
    at or below it (None for no values)."""
    ordered = sorted(values)
    if not ordered:
        return None
    rank = max(1, math.ceil(percent / 100 * len(ordered)))
    return ordered[rank - 1]


def _decimal(value: Any) -> Decimal:
    try:
        return Decimal(str(value)) if value not in (None, "") else Decimal(0)
    except InvalidOperation:
        return Decimal(0)


def _money(value: Decimal) -> str:
    return format(value.quantize(_Q).normalize(), "f")


def _ratio(candidate: Any, baseline: Any) -> float | None:
    """candidate ÷ baseline (Decimals divided as Decimals), or None without a baseline figure."""
    if candidate is None or not baseline:
        return None
    if isinstance(candidate, Decimal) or isinstance(baseline, Decimal):
        return round(float(_decimal(candidate) / _decimal(baseline)), 4)
    return round(float(candidate) / float(baseline), 4)


def _turns_ran(case_run: CaseRun) -> list[dict[str, Any]]:
    return [t for t in case_run.transcript or [] if isinstance(t, dict) and not t.get("skipped")]


def _finished(status: str) -> bool:
    return status in (CaseStatus.PASSED, CaseStatus.FAILED)


def _case_result(attempts: list[CaseRun]) -> dict[str, Any]:
    """C: one case on one side, over its attempts."""
    passed = sum(1 for a in attempts if a.status == CaseStatus.PASSED)
    broken = [a for a in attempts if not _finished(a.status)]
    if broken:
        status = "error"
    elif passed == len(attempts):
        status = "passed"
    else:
        status = "failed"
    failed_checks = [
        {**check, "attempt": a.attempt}
        for a in attempts
        for check in a.checks or []
        if isinstance(check, dict) and check.get("passed") is False
    ][:MAX_FAILED_CHECKS]
    judged = [a.judged_passed for a in attempts]
    if any(j is False for j in judged):
        judged_passed: bool | None = False
    elif judged and all(j is True for j in judged):
        judged_passed = True
    else:
        judged_passed = None
    out: dict[str, Any] = {
        "status": status,
        "attempts": len(attempts),
        "passed_attempts": passed,
        "failed_checks": failed_checks,
        "judged_passed": judged_passed,
    }
    if broken:
        first = broken[0]
        out["error"] = first.error or _("attempt %(n)d did not finish (%(status)s)") % {
            "n": first.attempt,
            "status": first.status,
        }
    return out


def _side(
    config: dict[str, Any], by_case: dict[str, list[CaseRun]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """S: one side's figures; and the exact per-turn figures the ratios are computed from."""
    results = {name: _case_result(attempts) for name, attempts in by_case.items()}
    cases = len(results)
    passed = sum(1 for r in results.values() if r["status"] == "passed")
    failed = sum(1 for r in results.values() if r["status"] == "failed")
    errors = sum(1 for r in results.values() if r["status"] == "error")
    all_passed = sum(
        1 for r in results.values() if r["attempts"] and r["passed_attempts"] == r["attempts"]
    )
    judged = [r["judged_passed"] for r in results.values() if r["judged_passed"] is not None]
    judged_ok = sum(1 for j in judged if j)

    ran = [t for attempts in by_case.values() for a in attempts for t in _turns_ran(a)]
    # Per-turn figures and latency: the turns that finished (a failed turn's are partial).
    turns = [t for t in ran if not t.get("error")]
    n = len(turns)
    calls = sum(int(t.get("llm_calls") or 0) for t in turns)
    tokens = sum(
        int(t.get("prompt_tokens") or 0) + int(t.get("completion_tokens") or 0) for t in turns
    )
    turn_cost = sum((_decimal(t.get("cost_usd")) for t in turns), Decimal(0))
    spent = sum(
        (_decimal(a.cost_usd) for attempts in by_case.values() for a in attempts), Decimal(0)
    )
    latencies = [int(t.get("latency_ms") or 0) for t in turns]
    exact = {
        "llm_calls_per_turn": calls / n if n else None,
        "tokens_per_turn": tokens / n if n else None,
        "cost_per_turn": turn_cost / n if n else None,
        "latency_p95": nearest_rank(latencies, 95),
    }
    side = {
        "config": config,
        "cases": cases,
        # every attempt of every case is one simulated conversation
        "conversations": sum(len(attempts) for attempts in by_case.values()),
        # every turn ran on the offline demo model (which costs nothing)
        "offline": bool(ran) and all(t.get("offline") for t in ran),
        "passed": passed,
        "failed": failed,
        "errors": errors,
        "pass_rate": round(passed / cases, 4) if cases else None,
        "pass_hat_k": round(all_passed / cases, 4) if cases else None,
        "pass_at_1": (
            round(
                sum(r["passed_attempts"] / r["attempts"] for r in results.values() if r["attempts"])
                / cases,
                4,
            )
            if cases
            else None
        ),
        "judged": {
            "cases": len(judged),
            "passed": judged_ok,
            "rate": round(judged_ok / len(judged), 4) if judged else None,
        },
        "turns": n,
        "llm_calls_per_turn": round(calls / n, 4) if n else None,
        "tokens_per_turn": round(tokens / n, 4) if n else None,
        "cost_per_turn_usd": _money(turn_cost / n) if n else None,
        "cost_usd": _money(spent),
        "latency_p50_ms": nearest_rank(latencies, 50),
        "latency_p95_ms": nearest_rank(latencies, 95),
        "escalations": sum(1 for t in ran if t.get("escalated")),
        "tools_ran": sum(len(t.get("tools_ran") or []) for t in ran),
    }
    return side, exact


def _tool_states(turns: list[dict[str, Any]]) -> dict[str, str]:
    """Each tool's furthest state over `turns`: ran, else proposed, else refused."""
    found: dict[str, set[str]] = defaultdict(set)
    for turn in turns:
        for state, key in (
            ("ran", "tools_ran"),
            ("proposed", "tools_proposed"),
            ("refused", "tools_refused"),
        ):
            for tool in turn.get(key) or []:
                if isinstance(tool, dict) and tool.get("name"):
                    found[str(tool["name"])].add(state)
    return {name: next(s for s in _STATE_ORDER if s in states) for name, states in found.items()}


def _tool_changes(before: dict[str, str], after: dict[str, str], prefix: str = "") -> list[str]:
    return [
        f"{prefix}{name}: {before.get(name, _NOT_CALLED)} → {after.get(name, _NOT_CALLED)}"
        for name in sorted(set(before) | set(after))
        if before.get(name, _NOT_CALLED) != after.get(name, _NOT_CALLED)
    ]


def _hand_off(turns: list[dict[str, Any]]) -> str:
    for turn in turns:
        if turn.get("escalated"):
            reason = turn.get("escalation_reason")
            return f"escalated ({reason})" if reason else "escalated"
    return "handled"


def _escalation_change(before: str, after: str) -> str:
    if before == after:
        return ""
    # "escalated (x) → handled" reads "escalated → handled" unless the reason is the change.
    if before.startswith("escalated") != after.startswith("escalated"):
        before, after = before.split(" (")[0], after.split(" (")[0]
    return f"{before} → {after}"


def _original(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"index": t.get("index"), **t["original"]}
        for t in turns
        if isinstance(t.get("original"), dict)
    ]


def _replay_changes(attempt: CaseRun) -> tuple[list[str], str]:
    """The candidate's first attempt against the original conversation, turn by turn."""
    turns = [t for t in attempt.transcript or [] if isinstance(t, dict)]
    changes: list[str] = []
    for turn in turns:
        original = turn.get("original")
        if not isinstance(original, dict) or turn.get("skipped"):
            continue
        changes.extend(
            _tool_changes(
                _tool_states([original]), _tool_states([turn]), f"turns[{turn.get('index')}] "
            )
        )
    before = _hand_off(_original(turns))
    after = _hand_off(_turns_ran(attempt))
    return changes, _escalation_change(before, after)


def _first(attempts: list[CaseRun]) -> CaseRun | None:
    return min(attempts, key=lambda a: a.attempt) if attempts else None


def report_build(*, run: SimulationRun, case_runs: list[CaseRun]) -> dict[str, Any]:
    """The run's report (see the module) from its case runs."""
    by_side: dict[str, dict[str, list[CaseRun]]] = {
        Side.BASELINE: defaultdict(list),
        Side.CANDIDATE: defaultdict(list),
    }
    for case_run in sorted(case_runs, key=lambda c: (c.case_name, c.side, c.attempt)):
        by_side.setdefault(case_run.side, defaultdict(list))[case_run.case_name].append(case_run)
    compare = bool(run.compare)
    replay = run.kind == RunKind.REPLAY

    sides: dict[str, Any] = {}
    base: dict[str, Any] = {}
    if compare:
        sides["baseline"], base = _side(run.baseline or {}, by_side[Side.BASELINE])
    sides["candidate"], cand = _side(run.candidate or {}, by_side[Side.CANDIDATE])
    ratio = {key: _ratio(cand[key], base.get(key)) for key in cand}

    summary = {"fixed": 0, "broke": 0, "unchanged_pass": 0, "unchanged_fail": 0}
    cases = []
    names = sorted(set(by_side[Side.BASELINE]) | set(by_side[Side.CANDIDATE]))
    for name in names:
        before_runs = by_side[Side.BASELINE].get(name, []) if compare else []
        after_runs = by_side[Side.CANDIDATE].get(name, [])
        entry: dict[str, Any] = {"name": name}
        if compare:
            entry["baseline"] = _case_result(before_runs) if before_runs else None
        entry["candidate"] = _case_result(after_runs) if after_runs else None
        change = ""
        if compare and entry["baseline"] and entry["candidate"]:
            was = entry["baseline"]["status"] == "passed"
            now = entry["candidate"]["status"] == "passed"
            change = "fixed" if now and not was else "broke" if was and not now else "unchanged"
            key = (
                change if change != "unchanged" else ("unchanged_pass" if now else "unchanged_fail")
            )
            summary[key] += 1
        entry["change"] = change

        first_before, first_after = _first(before_runs), _first(after_runs)
        side_tools: list[str] = []
        side_hand_off = ""
        if first_before is not None and first_after is not None:
            side_tools = _tool_changes(
                _tool_states(_turns_ran(first_before)), _tool_states(_turns_ran(first_after))
            )
            side_hand_off = _escalation_change(
                _hand_off(_turns_ran(first_before)), _hand_off(_turns_ran(first_after))
            )
        if replay:
            tools, hand_off = _replay_changes(first_after) if first_after else ([], "")
            entry["tool_changes"], entry["escalation_change"] = tools, hand_off
            if compare:
                entry["baseline_tool_changes"] = side_tools
                entry["baseline_escalation_change"] = side_hand_off
        else:
            entry["tool_changes"], entry["escalation_change"] = side_tools, side_hand_off
        cases.append(entry)

    return {
        "kind": run.kind,
        "sides": sides,
        "ratio": ratio,
        "summary": summary,
        "cases": cases,
    }
