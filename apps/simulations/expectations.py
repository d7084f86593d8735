"""The code-checked expectations of a simulation case, over the transcript of one attempt.

Pure functions: no database, no model. `case_check` reads the case's `turns[i].expect` (checked
against turn i) and its case-wide `expect` (checked across the turns), and returns one check per
expectation — per item, for an expectation that lists several (each tool, each text) — with a
`detail` a person reads ("cancel_order ran 2 times, expected exactly 1").

Rules worth knowing (docs/simulations.md):

* `tool_called` counts runs (a tool the guards let run and the stub answered, ok or not) whose
  params include the expected ones (`params` is a subset; nested objects too); `times` is an
  exact count, without it at least one run is expected;
* `tool_proposed` holds when the tool was put to the customer for confirmation with those params
  *and did not run in that same turn*;
* a per-turn expectation on a turn that did not run — after a hand-off, or when the run
  stopped — fails, saying so; case-wide expectations look at the turns that ran;
* case-wide `max_llm_calls` / `max_tokens` / `max_cost_usd` / `evaluation` hold for every turn
  that ran; case-wide `reply_*` read every reply, joined;
* `reply_language` fails when the language cannot be told (too short or ambiguous).

A replayed conversation has no expectations: `replay_check` passes it when the assistant
handled every turn without a hand-off or an error."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from apps.simulations.language import UNKNOWN, detect_language
from apps.simulations.schema import EXPECTATIONS, expect_normalize

__all__ = ["case_check", "expect_check", "params_match", "replay_check"]

_EXCERPT = 160


def params_match(expected: Any, actual: Any) -> bool:
    """`expected` is a subset of `actual`: every key of an expected object is in the actual one
    with a matching value (objects recursively; anything else equal, and a boolean only equals a
    boolean, so `true` never matches `1`)."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            key in actual and params_match(value, actual[key]) for key, value in expected.items()
        )
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and expected is actual
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(expected) == len(actual)
            and all(params_match(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return bool(expected == actual)


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _excerpt(text: str) -> str:
    text = " ".join(str(text).split())
    return _show(text if len(text) <= _EXCERPT else text[: _EXCERPT - 1] + "…")


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def _spec_text(spec: dict[str, Any]) -> str:
    params = spec.get("params")
    return f"{spec['name']} with {_show(params)}" if params else str(spec["name"])


def _ran(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [tool for turn in turns for tool in turn.get("tools_ran") or []]


def _names(tools: list[dict[str, Any]]) -> str:
    return ", ".join(sorted({str(t.get("name")) for t in tools})) or "none"


def _tool_called(spec: dict[str, Any], turns: list[dict[str, Any]]) -> tuple[bool, str]:
    ran = _ran(turns)
    same_name = [t for t in ran if t.get("name") == spec["name"]]
    matching = [t for t in same_name if params_match(spec.get("params") or {}, t.get("params"))]
    n = len(matching)
    with_params = f" with {_show(spec['params'])}" if spec.get("params") else ""
    times = spec.get("times")
    if times is not None:
        passed = n == times
        verdict = f"{spec['name']}{with_params} ran {_times(n) if n else 'no times'}"
        detail = f"{verdict}, expected exactly {times}"
        if n == 0 and same_name:
            detail += f" (it ran with {_show(same_name[0].get('params'))})"
        return passed, detail
    if n:
        return True, f"{spec['name']}{with_params} ran {_times(n)}"
    if same_name:
        params = "; ".join(_show(t.get("params")) for t in same_name)
        return (
            False,
            f"{spec['name']} ran, but not with {_show(spec['params'])} (ran with {params})",
        )
    return False, f"{spec['name']} did not run (tools that ran: {_names(ran)})"


def _tool_not_called(name: str, turns: list[dict[str, Any]]) -> tuple[bool, str]:
    ran = _ran(turns)
    if name == "*":
        if not ran:
            return True, "no tool ran"
        return False, f"expected no tool to run; ran: {_names(ran)}"
    runs = [t for t in ran if t.get("name") == name]
    if not runs:
        return True, f"{name} did not run"
    return False, f"{name} ran {_times(len(runs))} (with {_show(runs[0].get('params'))})"


def _tool_proposed(spec: dict[str, Any], turns: list[dict[str, Any]]) -> tuple[bool, str]:
    """Proposed with matching params, and not run in that same turn."""
    proposed_any: list[dict[str, Any]] = []
    ran_too = False
    for turn in turns:
        proposals = [p for p in turn.get("tools_proposed") or [] if p.get("name") == spec["name"]]
        proposed_any.extend(proposals)
        if not any(params_match(spec.get("params") or {}, p.get("params")) for p in proposals):
            continue
        if any(t.get("name") == spec["name"] for t in turn.get("tools_ran") or []):
            ran_too = True
            continue
        return True, f"{_spec_text(spec)} was put to the customer for confirmation, not run"
    if ran_too:
        return False, f"{_spec_text(spec)} was proposed but also ran in the same turn"
    if proposed_any:
        params = "; ".join(_show(p.get("params")) for p in proposed_any)
        return False, f"{spec['name']} was proposed, but with {params}"
    proposed = [p for t in turns for p in t.get("tools_proposed") or []]
    return False, f"{spec['name']} was not proposed (proposed: {_names(proposed)})"


def _escalated(expected: Any, turns: list[dict[str, Any]]) -> tuple[bool, str]:
    handed = [t for t in turns if t.get("escalated")]
    reason = handed[0].get("escalation_reason") if handed else None
    what = f"handed off ({reason})" if handed else "not handed off"
    if isinstance(expected, dict):
        want = expected.get("reason")
        if not handed:
            return False, f"not handed off, expected a hand-off ({want})"
        return reason == want, f"{what}, expected {want}"
    if bool(expected) == bool(handed):
        return True, what
    return False, f"{what}, expected {'a hand-off' if expected else 'no hand-off'}"


def _asked(expected: bool, turns: list[dict[str, Any]]) -> tuple[bool, str]:
    asked = any(t.get("asked") for t in turns)
    what = "asked the customer a question" if asked else "asked no clarifying question"
    if asked == bool(expected):
        return True, what
    return False, f"{what}, expected {'a question' if expected else 'none'}"


def _reply(turns: list[dict[str, Any]]) -> str:
    return "\n".join(str(t.get("reply") or "") for t in turns if t.get("reply"))


def _contains(text: str, turns: list[dict[str, Any]], *, negate: bool) -> tuple[bool, str]:
    reply = _reply(turns)
    found = text.casefold() in reply.casefold()
    if negate:
        if not found:
            return True, f"the reply does not contain {_show(text)}"
        return False, f"the reply contains {_show(text)}: {_excerpt(reply)}"
    if found:
        return True, f"the reply contains {_show(text)}"
    return False, f"the reply does not contain {_show(text)}: {_excerpt(reply)}"


def _matches(pattern: str, turns: list[dict[str, Any]]) -> tuple[bool, str]:
    reply = _reply(turns)
    try:
        found = re.search(pattern, reply, re.IGNORECASE)
    except re.error as exc:
        return False, f"{_show(pattern)} is not a valid regular expression: {exc}"
    if found:
        return True, f"the reply matches {_show(pattern)} ({_show(found.group(0))})"
    return False, f"the reply does not match {_show(pattern)}: {_excerpt(reply)}"


def _language(code: str, turns: list[dict[str, Any]]) -> tuple[bool, str]:
    reply = _reply(turns)
    if not reply.strip():
        return False, f"no reply to tell the language of, expected {code}"
    found = detect_language(reply)
    if found == UNKNOWN:
        return (
            False,
            f"the reply's language cannot be told (too short or ambiguous), expected {code}",
        )
    if found == code:
        return True, f"the reply is in {code}"
    return False, f"the reply is in {found}, expected {code}"


def _cost(value: Any) -> Decimal:
    try:
        return Decimal(str(value if value not in (None, "") else 0))
    except InvalidOperation:
        return Decimal(0)


def _calls(turn: dict[str, Any]) -> Decimal:
    return Decimal(int(turn.get("llm_calls") or 0))


def _tokens(turn: dict[str, Any]) -> Decimal:
    return Decimal(int(turn.get("prompt_tokens") or 0) + int(turn.get("completion_tokens") or 0))


def _turn_cost(turn: dict[str, Any]) -> Decimal:
    return _cost(turn.get("cost_usd"))


_LIMITS: dict[str, tuple[str, Callable[[dict[str, Any]], Decimal]]] = {
    "max_llm_calls": ("LLM calls", _calls),
    "max_tokens": ("tokens", _tokens),
    "max_cost_usd": ("USD", _turn_cost),
}


def _limit(key: str, limit: Any, turns: list[dict[str, Any]], *, case: bool) -> tuple[bool, str]:
    unit, measure = _LIMITS[key]
    bound = _cost(limit)
    if not turns:
        return True, "no turn ran"
    worst = max(turns, key=measure)
    used = measure(worst)
    shown = format(used, "f")
    if used <= bound:
        if case:
            return True, f"every turn within {limit} {unit} (most: {shown}, {_turn_name(worst)})"
        return True, f"{shown} {unit}, at most {limit}"
    where = f"{_turn_name(worst)} used " if case else ""
    return False, f"{where}{shown} {unit}, at most {limit} expected"


def _evaluation(outcomes: list[str], turns: list[dict[str, Any]]) -> tuple[bool, str]:
    wanted = " or ".join(_show(o) for o in outcomes)
    if not turns:
        return True, "no turn ran"
    off = [t for t in turns if (t.get("evaluation") or "") not in outcomes]
    if not off:
        seen = sorted({_show(t.get("evaluation") or "") for t in turns})
        return True, f"evaluation {', '.join(seen)}"
    got = _show(off[0].get("evaluation") or "")
    return False, f"{_turn_name(off[0])}: evaluation {got}, expected {wanted}"


def _turn_name(turn: dict[str, Any]) -> str:
    return f"turns[{turn.get('index')}]"


def _items(key: str, value: Any) -> list[Any]:
    """What one check is made for: each tool spec, name, text or pattern; the rest whole."""
    if key in (
        "tool_called",
        "tool_not_called",
        "tool_proposed",
        "reply_contains",
        "reply_not_contains",
        "reply_matches",
    ):
        return list(value)
    return [value]


def _one(key: str, spec: Any, turns: list[dict[str, Any]], *, case: bool) -> tuple[bool, str]:
    if key == "tool_called":
        return _tool_called(spec, turns)
    if key == "tool_not_called":
        return _tool_not_called(spec, turns)
    if key == "tool_proposed":
        return _tool_proposed(spec, turns)
    if key == "escalated":
        return _escalated(spec, turns)
    if key == "clarifying_question":
        return _asked(spec, turns)
    if key in ("reply_contains", "reply_not_contains"):
        return _contains(spec, turns, negate=key == "reply_not_contains")
    if key == "reply_matches":
        return _matches(spec, turns)
    if key == "reply_language":
        return _language(spec, turns)
    if key in _LIMITS:
        return _limit(key, spec, turns, case=case)
    if key == "evaluation":
        return _evaluation(spec, turns)
    raise ValueError(f"unknown expectation {key!r}")  # case_validate refuses it first


def expect_check(
    *, expect: dict[str, Any], turns: list[dict[str, Any]], turn: int | None
) -> list[dict[str, Any]]:
    """The checks of one `expect` object over `turns` (one turn, or every turn that ran for a
    case-wide `expect`, `turn=None`)."""
    checks = []
    for key, value in expect_normalize(expect).items():
        for spec in _items(key, value):
            passed, detail = _one(key, spec, turns, case=turn is None)
            checks.append(
                {"turn": turn, "expect": key, "spec": spec, "passed": passed, "detail": detail}
            )
    return checks


def _not_run(entry: dict[str, Any] | None, index: int) -> str:
    """Why turn `index` has nothing to check, or "" when it ran."""
    if entry is None:
        return f"turns[{index}] did not run (the run ended before it)"
    if entry.get("skipped"):
        return f"turns[{index}] did not run: {entry['skipped']} in an earlier turn"
    if entry.get("error"):
        return f"turns[{index}] failed: {entry['error']}"
    return ""


def case_check(
    *, case: dict[str, Any], transcript: list[dict[str, Any]]
) -> tuple[bool | None, list[dict[str, Any]]]:
    """(passed, checks) for one attempt of `case` — a case dict as `case_validate` returns it
    (or a SimCase's fields). `passed` is None when the case expects nothing code can check."""
    by_index = {entry.get("index", i): entry for i, entry in enumerate(transcript)}
    checks: list[dict[str, Any]] = []
    for index, turn in enumerate(case.get("turns") or []):
        expect = turn.get("expect") or {}
        if not expect:
            continue
        entry = by_index.get(index)
        why = _not_run(entry, index)
        if why:
            for key, value in expect_normalize(expect).items():
                for spec in _items(key, value):
                    checks.append(
                        {"turn": index, "expect": key, "spec": spec, "passed": False, "detail": why}
                    )
            continue
        assert entry is not None
        checks.extend(expect_check(expect=expect, turns=[entry], turn=index))
    ran = [e for e in transcript if not e.get("skipped")]
    checks.extend(expect_check(expect=case.get("expect") or {}, turns=ran, turn=None))
    order = {key: i for i, key in enumerate(EXPECTATIONS)}
    checks.sort(key=lambda c: (c["turn"] is None, c["turn"] or 0, order[c["expect"]]))
    if not checks:
        return None, []
    return all(c["passed"] for c in checks), checks


def replay_check(*, transcript: list[dict[str, Any]]) -> tuple[bool, list[dict[str, Any]]]:
    """A replayed conversation: each turn passes when the assistant handled it — no hand-off,
    no error, not skipped."""
    checks = []
    for i, entry in enumerate(transcript):
        index = entry.get("index", i)
        why = _not_run(entry, index)
        if not why and entry.get("escalated"):
            why = f"handed off ({entry.get('escalation_reason')})"
        checks.append(
            {
                "turn": index,
                "expect": "handled",
                "spec": True,
                "passed": not why,
                "detail": why or "handled without a hand-off",
            }
        )
    return all(c["passed"] for c in checks), checks
