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

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from apps.core.languages import detect
from apps.simulations.schema import EXPECTATIONS, expect_normalize

__all__ = ["case_check", "expect_check", "params_match", "replay_check"]

_EXCERPT = 160
# A reply with fewer letters than this is too short to tell its language ("OK!"): the
# `reply_language` check fails with that detail rather than guessing. Longer ones are judged
# by the one detector (`apps.core.languages.detect`) among every shipped language.
REPLY_LANGUAGE_LETTERS = 12
_LETTER = re.compile(r"[^\W\d_]", re.UNICODE)


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
    if n == 0:
        return _("no times")
    return _("once") if n == 1 else _("%(n)d times") % {"n": n}


def _spec_text(spec: dict[str, Any]) -> str:
    params = spec.get("params")
    if not params:
        return str(spec["name"])
    return _("%(name)s with %(params)s") % {"name": spec["name"], "params": _show(params)}


def _ran(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [tool for turn in turns for tool in turn.get("tools_ran") or []]


def _names(tools: list[dict[str, Any]]) -> str:
    return ", ".join(sorted({str(t.get("name")) for t in tools})) or _("none")


def _tool_called(spec: dict[str, Any], turns: list[dict[str, Any]]) -> tuple[bool, str]:
    ran = _ran(turns)
    same_name = [t for t in ran if t.get("name") == spec["name"]]
    matching = [t for t in same_name if params_match(spec.get("params") or {}, t.get("params"))]
    n = len(matching)
    what = {"tool": _spec_text(spec), "times": _times(n)}
    times = spec.get("times")
    if times is not None:
        detail = _("%(tool)s ran %(times)s, expected exactly %(expected)d") % {
            **what,
            "expected": times,
        }
        if n == 0 and same_name:
            detail += " " + _("(it ran with %(params)s)") % {
                "params": _show(same_name[0].get("params"))
            }
        return n == times, detail
    if n:
        return True, _("%(tool)s ran %(times)s") % what
    if same_name:
        return False, _("%(name)s ran, but not with %(expected)s (ran with %(params)s)") % {
            "name": spec["name"],
            "expected": _show(spec["params"]),
            "params": "; ".join(_show(t.get("params")) for t in same_name),
        }
    return False, _("%(name)s did not run (tools that ran: %(ran)s)") % {
        "name": spec["name"],
        "ran": _names(ran),
    }


def _tool_not_called(name: str, turns: list[dict[str, Any]]) -> tuple[bool, str]:
    ran = _ran(turns)
    if name == "*":
        if not ran:
            return True, _("no tool ran")
        return False, _("expected no tool to run; ran: %(ran)s") % {"ran": _names(ran)}
    runs = [t for t in ran if t.get("name") == name]
    if not runs:
        return True, _("%(name)s did not run") % {"name": name}
    return False, _("%(name)s ran %(times)s (with %(params)s)") % {
        "name": name,
        "times": _times(len(runs)),
        "params": _show(runs[0].get("params")),
    }


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
        return True, _("%(tool)s was put to the customer for confirmation, not run") % {
            "tool": _spec_text(spec)
        }
    if ran_too:
        return False, _("%(tool)s was proposed but also ran in the same turn") % {
            "tool": _spec_text(spec)
        }
    if proposed_any:
        return False, _("%(name)s was proposed, but with %(params)s") % {
            "name": spec["name"],
            "params": "; ".join(_show(p.get("params")) for p in proposed_any),
        }
    proposed = [p for t in turns for p in t.get("tools_proposed") or []]
    return False, _("%(name)s was not proposed (proposed: %(proposed)s)") % {
        "name": spec["name"],
        "proposed": _names(proposed),
    }


def _escalated(expected: Any, turns: list[dict[str, Any]]) -> tuple[bool, str]:
    handed = [t for t in turns if t.get("escalated")]
    reason = handed[0].get("escalation_reason") if handed else None
    what = _("handed off (%(reason)s)") % {"reason": reason} if handed else _("not handed off")
    if isinstance(expected, dict):
        want = expected.get("reason")
        if not handed:
            return False, _("not handed off, expected a hand-off (%(reason)s)") % {"reason": want}
        return reason == want, _("%(what)s, expected %(reason)s") % {"what": what, "reason": want}
    if bool(expected) == bool(handed):
        return True, what
    if expected:
        return False, _("%(what)s, expected a hand-off") % {"what": what}
    return False, _("%(what)s, expected no hand-off") % {"what": what}


def _asked(expected: bool, turns: list[dict[str, Any]]) -> tuple[bool, str]:
    asked = any(t.get("asked") for t in turns)
    if asked == bool(expected):
        return True, (
            _("asked the customer a question") if asked else _("asked no clarifying question")
        )
    if expected:
        return False, _("asked no clarifying question, expected a question")
    return False, _("asked the customer a question, expected none")


def _reply(turns: list[dict[str, Any]]) -> str:
    return "\n".join(str(t.get("reply") or "") for t in turns if t.get("reply"))


def _contains(text: str, turns: list[dict[str, Any]], *, negate: bool) -> tuple[bool, str]:
    reply = _reply(turns)
    found = text.casefold() in reply.casefold()
    what = {"text": _show(text), "reply": _excerpt(reply)}
    if found == negate:  # a text that should not be there is, or one that should is not
        if found:
            return False, _("the reply contains %(text)s: %(reply)s") % what
        return False, _("the reply does not contain %(text)s: %(reply)s") % what
    if found:
        return True, _("the reply contains %(text)s") % what
    return True, _("the reply does not contain %(text)s") % what


def _matches(pattern: str, turns: list[dict[str, Any]]) -> tuple[bool, str]:
    reply = _reply(turns)
    try:
        found = re.search(pattern, reply, re.IGNORECASE)
    except re.error as exc:
        return False, _("%(pattern)s is not a valid regular expression: %(error)s") % {
            "pattern": _show(pattern),
            "error": exc,
        }
    if found:
        return True, _("the reply matches %(pattern)s (%(found)s)") % {
            "pattern": _show(pattern),
            "found": _show(found.group(0)),
        }
    return False, _("the reply does not match %(pattern)s: %(reply)s") % {
        "pattern": _show(pattern),
        "reply": _excerpt(reply),
    }


def _language(code: str, turns: list[dict[str, Any]]) -> tuple[bool, str]:
    reply = _reply(turns)
    if not reply.strip():
        return False, _("no reply to tell the language of, expected %(code)s") % {"code": code}
    found = detect(reply) if len(_LETTER.findall(reply)) >= REPLY_LANGUAGE_LETTERS else ""
    if not found:
        return False, _(
            "the reply's language cannot be told (too short or ambiguous), expected %(code)s"
        ) % {"code": code}
    if found == code:
        return True, _("the reply is in %(code)s") % {"code": code}
    return False, _("the reply is in %(found)s, expected %(code)s") % {"found": found, "code": code}


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


_LIMITS: dict[str, tuple[Any, Callable[[dict[str, Any]], Decimal]]] = {
    "max_llm_calls": (gettext_lazy("LLM calls"), _calls),
    "max_tokens": (gettext_lazy("tokens"), _tokens),
    "max_cost_usd": ("USD", _turn_cost),
}


def _limit(key: str, limit: Any, turns: list[dict[str, Any]], *, case: bool) -> tuple[bool, str]:
    unit, measure = _LIMITS[key]
    if not turns:
        return True, _("no turn ran")
    worst = max(turns, key=measure)
    used = measure(worst)
    what = {
        "used": format(used, "f"),
        "unit": unit,
        "limit": limit,
        "turn": _turn_name(worst),
    }
    if used <= _cost(limit):
        if case:
            return True, _("every turn within %(limit)s %(unit)s (most: %(used)s, %(turn)s)") % what
        return True, _("%(used)s %(unit)s, at most %(limit)s") % what
    if case:
        return False, _("%(turn)s used %(used)s %(unit)s, at most %(limit)s expected") % what
    return False, _("%(used)s %(unit)s, at most %(limit)s expected") % what


def _evaluation(outcomes: list[str], turns: list[dict[str, Any]]) -> tuple[bool, str]:
    if not turns:
        return True, _("no turn ran")
    off = [t for t in turns if (t.get("evaluation") or "") not in outcomes]
    if not off:
        seen = sorted({_show(t.get("evaluation") or "") for t in turns})
        return True, _("evaluation %(seen)s") % {"seen": ", ".join(seen)}
    return False, _("%(turn)s: evaluation %(got)s, expected %(wanted)s") % {
        "turn": _turn_name(off[0]),
        "got": _show(off[0].get("evaluation") or ""),
        "wanted": _(" or ").join(_show(o) for o in outcomes),
    }


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
    turn = f"turns[{index}]"
    if entry is None:
        return _("%(turn)s did not run (the run ended before it)") % {"turn": turn}
    if entry.get("skipped"):
        return _("%(turn)s did not run: %(why)s in an earlier turn") % {
            "turn": turn,
            "why": entry["skipped"],
        }
    if entry.get("error"):
        return _("%(turn)s failed: %(error)s") % {"turn": turn, "error": entry["error"]}
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
            why = _("handed off (%(reason)s)") % {"reason": entry.get("escalation_reason")}
        checks.append(
            {
                "turn": index,
                "expect": "handled",
                "spec": True,
                "passed": not why,
                "detail": why or _("handled without a hand-off"),
            }
        )
    return all(c["passed"] for c in checks), checks
