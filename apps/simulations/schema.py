"""The simulation case format (docs/simulations.md): its JSON Schema and `case_validate`.

`CASE_JSON_SCHEMA` is the structure of one case (exported for the docs and the API); the
`jsonschema` library checks it, and code checks what a schema cannot say well: a case has
`turns` or a `simulated` customer (never both), regular expressions compile, a tool's stub
list has no stub that can never be reached. `case_validate` returns the case normalized —
defaults filled and every shorthand spelled out — so the engine, the checks and the exports read
one shape:

* `"tool_called": "cancel_order"` → `[{"name": "cancel_order"}]` (the same for
  `tool_proposed`); `"tool_not_called": "x"` → `["x"]`;
* `reply_contains`, `reply_not_contains`, `reply_matches`, `evaluation` → lists;
* `max_cost_usd` → a decimal string ("0.002");
* a tool's stub → a list of stubs, each with `ok`, `result` and `error` filled.

A problem is raised as `ApplicationError` with `{"fields": {"turns[1].expect.tool_called":
"…"}}`, one message per field path."""

from __future__ import annotations

import copy
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from django.utils.translation import gettext as _
from jsonschema import Draft202012Validator

from apps.core.exceptions import ApplicationError
from apps.core.languages import SHIPPED
from apps.core.schema_errors import (
    WORDS,
    SchemaProblem,
    Words,
    errors_by_path,
    json_path,
    type_label,
)

__all__ = [
    "CASE_JSON_SCHEMA",
    "ESCALATION_REASONS",
    "EXPECTATIONS",
    "MAX_CRITERIA",
    "MAX_REPEAT",
    "MAX_TEXT",
    "MAX_TURNS",
    "OUTCOMES",
    "case_validate",
    "expect_normalize",
]

MAX_TURNS = 50  # customer messages in a case
MAX_SIMULATED_TURNS = 20  # a simulated customer's max_turns (the engine stops there too)
MAX_TEXT = 4000  # characters of any text: a message, a criterion, a persona …
MAX_CRITERIA = 20
MAX_HISTORY = 100
MAX_REPEAT = 10
MAX_LIST = 20  # items of an expectation's list, tags, stubs of one tool
SLUG = r"^[-a-zA-Z0-9_]+$"
TOOL_NAME = r"^[a-zA-Z_][a-zA-Z0-9_]{0,63}$"
NOT_BLANK = r"\S"

# apps.reasoning.evaluation.OUTCOMES and apps.escalations.models.EscalationReason, spelled out
# here so the format (and its schema) is one self-contained document; a test keeps them equal.
OUTCOMES = ("validated", "questioned", "improved", "kept", "failed")
ESCALATION_REASONS = (
    "customer_request",
    "low_confidence",
    "policy",
    "tool_failure",
    "llm_failure",
    "usage_limit",
    "staff_takeover",
    "deadline",
    "system_failure",
    "approval_timeout",
)

# Every expectation key, in the order checks are reported.
EXPECTATIONS = (
    "tool_called",
    "tool_not_called",
    "tool_proposed",
    "escalated",
    "clarifying_question",
    "reply_contains",
    "reply_not_contains",
    "reply_matches",
    "reply_language",
    "max_llm_calls",
    "max_tokens",
    "max_cost_usd",
    "evaluation",
)

_TEXT: dict[str, Any] = {"type": "string", "maxLength": MAX_TEXT}
_FILLED_TEXT: dict[str, Any] = {**_TEXT, "minLength": 1, "pattern": NOT_BLANK}


def _one_or_list(item: dict[str, Any], *, min_items: int = 1) -> dict[str, Any]:
    return {
        "anyOf": [
            item,
            {"type": "array", "minItems": min_items, "maxItems": MAX_LIST, "items": item},
        ]
    }


_TOOL = {"type": "string", "pattern": TOOL_NAME, "description": "A tool's name."}


def _tool_spec(*, times: bool) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "name": _TOOL,
        "params": {
            "type": "object",
            "description": "A subset of the parameters: each given key must be equal.",
        },
    }
    if times:
        properties["times"] = {
            "type": "integer",
            "minimum": 0,
            "maximum": 100,
            "description": "Exactly this many runs (default: at least once).",
        }
    return {
        "anyOf": [
            _TOOL,
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["name"],
                "properties": properties,
            },
        ]
    }


def _specs(*, times: bool) -> dict[str, Any]:
    spec = _tool_spec(times=times)
    return {
        "anyOf": [
            *spec["anyOf"],
            {"type": "array", "minItems": 1, "maxItems": MAX_LIST, "items": spec},
        ]
    }


_NON_NEGATIVE_INT = {"type": "integer", "minimum": 0}

EXPECT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "description": "What code checks: per turn (turns[i].expect) or over the whole case.",
    "properties": {
        "tool_called": {
            **_specs(times=True),
            "description": "The tool ran (in that turn; case-wide: across the turns).",
        },
        "tool_not_called": {
            **_one_or_list({"type": "string", "pattern": r"^(\*|[a-zA-Z_][a-zA-Z0-9_]{0,63})$"}),
            "description": 'The tool did not run; "*" = no tool ran at all.',
        },
        "tool_proposed": {
            **_specs(times=False),
            "description": "A destructive tool was put to the customer for confirmation "
            "(and did not run in that turn).",
        },
        "escalated": {
            "anyOf": [
                {"type": "boolean"},
                {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["reason"],
                    "properties": {"reason": {"type": "string", "enum": list(ESCALATION_REASONS)}},
                },
            ],
            "description": "Handed off to a person (or not); an object also names the reason.",
        },
        "clarifying_question": {
            "type": "boolean",
            "description": "The assistant asked the customer something (not a confirmation).",
        },
        "reply_contains": {
            **_one_or_list(_FILLED_TEXT),
            "description": "Case-insensitive text in the reply.",
        },
        "reply_not_contains": {
            **_one_or_list(_FILLED_TEXT),
            "description": "Case-insensitive text not in the reply.",
        },
        "reply_matches": {
            **_one_or_list(_FILLED_TEXT),
            "description": "A Python regular expression the reply matches (case-insensitive).",
        },
        "reply_language": {
            "type": "string",
            "enum": list(SHIPPED),
            "description": "The reply's language (ISO 639-1).",
        },
        "max_llm_calls": {**_NON_NEGATIVE_INT, "description": "At most this many LLM calls."},
        "max_tokens": {
            **_NON_NEGATIVE_INT,
            "description": "At most this many tokens (prompt + completion).",
        },
        "max_cost_usd": {
            "anyOf": [
                {"type": "number", "minimum": 0},
                {"type": "string", "pattern": r"^\d+(\.\d+)?$"},
            ],
            "description": "At most this cost in USD.",
        },
        "evaluation": {
            **_one_or_list({"type": "string", "enum": [*OUTCOMES, ""]}),
            "description": 'The evaluation\'s outcome (one of them); "" = not evaluated.',
        },
    },
}

STUB_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "when": {
            "type": "object",
            "description": "Answer only calls whose params include these (no when = default).",
        },
        "ok": {"type": "boolean", "default": True},
        "result": {"description": "The tool's result (any JSON)."},
        "error": {**_TEXT, "description": "The error message when ok is false."},
    },
}

CASE_JSON_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "GuideDesk simulation case",
    "type": "object",
    "additionalProperties": False,
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "pattern": SLUG, "maxLength": 100},
        "suite": {"type": "string", "pattern": SLUG, "maxLength": 50, "default": "default"},
        "description": {**_TEXT, "default": ""},
        "tags": {
            "type": "array",
            "maxItems": MAX_LIST,
            "items": {"type": "string", "pattern": SLUG, "maxLength": 50},
            "default": [],
        },
        "history": {
            "type": "array",
            "maxItems": MAX_HISTORY,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["role", "text"],
                "properties": {
                    "role": {"type": "string", "enum": ["user", "assistant"]},
                    "text": _FILLED_TEXT,
                },
            },
            "default": [],
        },
        "turns": {
            "type": "array",
            "maxItems": MAX_TURNS,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["customer"],
                "properties": {"customer": _FILLED_TEXT, "expect": {"$ref": "#/$defs/expect"}},
            },
            "default": [],
        },
        "simulated": {
            "type": "object",
            "additionalProperties": False,
            "description": "A simulated customer instead of turns; {} = none. goal is required.",
            "properties": {
                "persona": _TEXT,
                "goal": _FILLED_TEXT,
                "max_turns": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_SIMULATED_TURNS,
                    "default": 6,
                },
            },
        },
        "expect": {"$ref": "#/$defs/expect"},
        "criteria": {
            "type": "array",
            "maxItems": MAX_CRITERIA,
            "items": _FILLED_TEXT,
            "default": [],
        },
        "tools": {
            "type": "object",
            "propertyNames": {"pattern": TOOL_NAME},
            "additionalProperties": {
                "anyOf": [
                    {"$ref": "#/$defs/stub"},
                    {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": MAX_LIST,
                        "items": {"$ref": "#/$defs/stub"},
                    },
                ]
            },
            "default": {},
        },
        "repeat": {"type": "integer", "minimum": 1, "maximum": MAX_REPEAT, "default": 1},
        "enabled": {"type": "boolean", "default": True},
    },
    "$defs": {"expect": EXPECT_SCHEMA, "stub": STUB_SCHEMA},
}

_validator = Draft202012Validator(CASE_JSON_SCHEMA)


def _resolve(schema: Any) -> dict[str, Any]:
    if isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
        return CASE_JSON_SCHEMA["$defs"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema if isinstance(schema, dict) else {}


def _tool_name(problem: SchemaProblem) -> str:
    return _("%(name)r is not a valid tool name.") % {"name": problem.error.instance}


def _any_of(problem: SchemaProblem) -> str:
    labels: list[str] = []
    for branch in problem.value:
        label = type_label(str(_resolve(branch).get("type", "")))
        if label not in labels:
            labels.append(label)
    return _("Must be %(options)s.") % {"options": _(" or ").join(labels)}


def _unknown(problem: SchemaProblem) -> str:
    if problem.error.schema is not EXPECT_SCHEMA:
        return WORDS["additionalProperties"](problem) or ""
    allowed = ", ".join(sorted(problem.error.schema.get("properties", {})))
    return _("Unknown expectation. Known: %(allowed)s.") % {"allowed": allowed}


def _pattern(problem: SchemaProblem) -> str:
    if problem.value == NOT_BLANK:
        return _("Must not be empty.")
    if problem.value == SLUG:
        return _("Letters, digits, hyphens and underscores only.")
    if problem.value == TOOL_NAME or "tool" in json_path(problem.path):
        return _tool_name(problem)
    return _("Not in the expected form.")


# A case's words where they differ from the shared ones (apps.core.schema_errors.WORDS).
_WORDS: Words = {
    "*": lambda p: _tool_name(p) if "propertyNames" in p.error.relative_schema_path else None,
    "anyOf": _any_of,
    "additionalProperties": _unknown,
    "pattern": _pattern,
}


def _where(problem: SchemaProblem) -> str:
    """A tool name that is not one is reported at that name."""
    if "propertyNames" in problem.error.relative_schema_path:
        return json_path([*problem.path, str(problem.error.instance)])
    return json_path(problem.path)


def _listed(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


_LISTS = ("tool_not_called", "evaluation", "reply_contains", "reply_not_contains", "reply_matches")


def _spec(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        return {"name": value}
    out: dict[str, Any] = {"name": value["name"]}
    if "params" in value:
        out["params"] = copy.deepcopy(value["params"])
    if value.get("times") is not None:
        out["times"] = value["times"]
    return out


def expect_normalize(expect: dict[str, Any] | None) -> dict[str, Any]:
    """One `expect` object with every shorthand spelled out (idempotent; assumes a structurally
    valid object). Keys in `EXPECTATIONS` order."""
    expect = expect or {}
    out: dict[str, Any] = {}
    for key in EXPECTATIONS:
        if key not in expect:
            continue
        value = expect[key]
        if key in ("tool_called", "tool_proposed"):
            out[key] = [_spec(v) for v in _listed(value)]
        elif key in _LISTS:
            out[key] = list(dict.fromkeys(_listed(value)))
        elif key == "escalated":
            out[key] = {"reason": value["reason"]} if isinstance(value, dict) else bool(value)
        elif key == "reply_language":
            out[key] = str(value).lower()
        elif key == "max_cost_usd":
            out[key] = format(Decimal(str(value)).normalize(), "f")
        else:
            out[key] = value
    return out


def _expect_errors(expect: dict[str, Any], where: str) -> dict[str, str]:
    errors: dict[str, str] = {}
    for i, pattern in enumerate(_listed(expect.get("reply_matches"))):
        try:
            re.compile(pattern, re.IGNORECASE)
        except re.error as exc:
            at = f"{where}.reply_matches" + (
                f"[{i}]" if isinstance(expect["reply_matches"], list) else ""
            )
            errors[at] = _("Not a valid regular expression: %(error)s.") % {"error": exc}
    if "max_cost_usd" in expect:
        try:
            Decimal(str(expect["max_cost_usd"]))
        except InvalidOperation:
            errors[f"{where}.max_cost_usd"] = _("Must be a number.")
    return errors


def _stubs(value: Any) -> list[dict[str, Any]]:
    out = []
    for stub in _listed(value):
        item: dict[str, Any] = {}
        if "when" in stub:
            item["when"] = copy.deepcopy(stub["when"])
        item["ok"] = stub.get("ok", True)
        item["result"] = copy.deepcopy(stub.get("result", {}))
        item["error"] = stub.get("error", "")
        out.append(item)
    return out


def case_validate(data: Any) -> dict[str, Any]:
    """The case `data` normalized (see the module), or `ApplicationError` with every problem by
    field path."""
    if not isinstance(data, dict):
        raise ApplicationError(
            _("Invalid simulation case."), {"fields": {"case": _("Must be an object.")}}
        )
    errors = errors_by_path(
        _validator, data, words=_WORDS, root="case", where=_where, resolve=_resolve
    )
    if errors:
        raise ApplicationError(_("Invalid simulation case."), {"fields": errors})

    turns = data.get("turns") or []
    simulated = data.get("simulated") or {}
    if turns and simulated:
        errors["simulated"] = _("Give either turns or a simulated customer, not both.")
    elif not turns and not simulated:
        errors["turns"] = _("A case needs turns (customer messages) or a simulated customer.")
    if simulated and "goal" not in simulated:
        errors["simulated.goal"] = _("This field is required.")
    for index, turn in enumerate(turns):
        errors.update(_expect_errors(turn.get("expect") or {}, f"turns[{index}].expect"))
    errors.update(_expect_errors(data.get("expect") or {}, "expect"))
    for tool, value in (data.get("tools") or {}).items():
        if not isinstance(value, list):
            continue
        for index, stub in enumerate(value[:-1]):
            if "when" not in stub:
                errors[f"tools.{tool}[{index + 1}]"] = _(
                    "Never used: the stub before it has no `when`, so it answers every call."
                )
                break
    if errors:
        raise ApplicationError(_("Invalid simulation case."), {"fields": errors})

    return {
        "name": data["name"],
        "suite": data.get("suite", "default"),
        "description": data.get("description", ""),
        "tags": list(dict.fromkeys(data.get("tags", []))),
        "history": [{"role": m["role"], "text": m["text"]} for m in data.get("history", [])],
        "turns": [
            {"customer": turn["customer"], "expect": expect_normalize(turn.get("expect"))}
            for turn in turns
        ],
        "simulated": (
            {
                "persona": simulated.get("persona", ""),
                "goal": simulated["goal"],
                "max_turns": simulated.get("max_turns", 6),
            }
            if simulated
            else {}
        ),
        "expect": expect_normalize(data.get("expect")),
        "criteria": [c.strip() for c in data.get("criteria", [])],
        "tools": {name: _stubs(value) for name, value in (data.get("tools") or {}).items()},
        "repeat": data.get("repeat", 1),
        "enabled": data.get("enabled", True),
    }
