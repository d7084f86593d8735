"""When a tool needs a teammate's approval: the client's rule on a `ClientTool`, checked against
the tool's JSON Schema when it is saved, and read (purely) when the guards have let a call run.

A rule is a small JSON object (`ClientTool.approval_rule`):

- `{}` — no approval (the default);
- `{"always": true}` — every call waits for a teammate;
- `{"param": "amount", "above": 100}` — a call waits when its `amount` is greater than 100
  (`param` names a top-level number or integer property of the tool's parameters);
- either may add `"timeout_minutes": N` (1–10080): how long a request waits before it becomes a
  hand-off to a person (default `TOOL_APPROVAL_TIMEOUT_MINUTES`).

The rule is one more gate *after* the customer's confirmation and every guard, never instead of
them (apps/reasoning/approvals.py)."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings

RULE_KEYS = {"always", "param", "above", "timeout_minutes"}
MAX_TIMEOUT_MINUTES = 7 * 24 * 60
_NUMBER_TYPES = {"number", "integer"}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | Decimal) and not isinstance(value, bool)


def approval_rule_problems(rule: Any, parameters: Any) -> list[str]:
    """What is wrong with `rule` for a tool whose params follow the JSON Schema `parameters`
    ([] = it is valid). The messages name the rule's key."""
    if rule in (None, {}):
        return []
    if not isinstance(rule, dict):
        return ['must be an object, e.g. {"always": true} or {"param": "amount", "above": 100}']
    problems = [f"{key}: unknown key" for key in sorted(set(rule) - RULE_KEYS)]
    timeout = rule.get("timeout_minutes")
    if "timeout_minutes" in rule and not (
        isinstance(timeout, int)
        and not isinstance(timeout, bool)
        and 1 <= timeout <= MAX_TIMEOUT_MINUTES
    ):
        problems.append(f"timeout_minutes: must be a whole number from 1 to {MAX_TIMEOUT_MINUTES}")
    if "always" in rule:
        if rule["always"] is not True:
            problems.append("always: must be true (leave the rule empty for no approval)")
        if "param" in rule or "above" in rule:
            problems.append("always: cannot be combined with param/above")
        return problems
    if "param" not in rule or "above" not in rule:
        problems.append('param/above: both are needed, e.g. {"param": "amount", "above": 100}')
        return problems
    if not _is_number(rule["above"]):
        problems.append("above: must be a number")
    name = rule["param"]
    properties = parameters.get("properties", {}) if isinstance(parameters, dict) else {}
    spec = properties.get(name) if isinstance(name, str) and isinstance(properties, dict) else None
    if not isinstance(spec, dict):
        problems.append(f"param: {name!r} is not one of the tool's parameters")
        return problems
    types = spec.get("type")
    types = set(types) if isinstance(types, list) else {types}
    if not types or not types <= _NUMBER_TYPES:
        problems.append(f"param: {name!r} must be a number or integer parameter in the schema")
    return problems


def approval_needed(rule: Any, params: dict[str, Any]) -> bool:
    """Whether a call with these (schema-valid) params waits for a teammate under `rule`. Fails
    closed: a threshold rule whose value is missing or not a number asks for approval."""
    if not isinstance(rule, dict) or not rule:
        return False
    if rule.get("always") is True:
        return True
    if "param" not in rule or not _is_number(rule.get("above")):
        return bool(rule)  # a malformed rule (saved before validation) never lets a call through
    value = params.get(str(rule["param"]))
    if value is None:
        return True
    try:
        return Decimal(str(value)) > Decimal(str(rule["above"]))
    except InvalidOperation:
        return True


def approval_timeout_minutes(rule: Any) -> int:
    """How long a request under `rule` waits for a teammate before it becomes a hand-off."""
    if isinstance(rule, dict):
        timeout = rule.get("timeout_minutes")
        if isinstance(timeout, int) and not isinstance(timeout, bool) and timeout > 0:
            return timeout
    return int(settings.TOOL_APPROVAL_TIMEOUT_MINUTES)


def approval_rule_text(rule: Any) -> str:
    """The rule in a few words, for the admin list and the console."""
    if not isinstance(rule, dict) or not rule:
        return ""
    if rule.get("always") is True:
        return "always"
    return f"{rule.get('param')} > {rule.get('above')}"
