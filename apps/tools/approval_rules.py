"""When a tool needs a teammate's approval: the client's rule on a `ClientTool`, checked against
the tool's JSON Schema when it is saved, and read (purely) when the guards have let a call run.

A rule is a small JSON object (`ClientTool.approval_rule`):

- `{}` — no approval (the default);
- `{"always": true}` — every call waits for a teammate;
- `{"param": "amount", "above": 100}` — a call waits when its `amount` is greater than 100
  (`param` names a top-level number or integer property of the tool's parameters);
- either may add `"timeout_minutes": N` (1–10080): how long a request waits before it becomes a
  hand-off to a person (default `TOOL_APPROVAL_TIMEOUT_MINUTES`).

A threshold is over SUMS, not single calls (three refunds of 50 are 150): the new call's amount
plus the amounts of the calls that ran, or are waiting for or got an approval, within a window,
per scope (apps/approvals/sums.py). Optional keys of a threshold rule:

- `"per"`: the scopes, a non-empty list of `"conversation"`, `"customer"` (the verified
  customer, else the visitor: `apps.approvals.sums.customer_key`) and `"order"` — default all three;
- `"order_param"`: the parameter naming the order (a string or integer property) — default
  `"order_id"` when the tool has one (without one, and unnamed, there is no order scope);
- `"window_hours"`: how far back calls count (1–720) — default 24;
- `"group"`: a name (letters, digits, `_`, `-`); the calls of every tool of the client whose rule
  names the same group count together, each with its own `param` and `order_param`.

The rule is one more gate *after* the customer's confirmation and every guard, never instead of
them (apps/approvals/services.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings

from apps.core.numbers import finite_decimal

SUM_KEYS = {"per", "order_param", "window_hours", "group"}
RULE_KEYS = {"always", "param", "above", "timeout_minutes", *SUM_KEYS}
SCOPES = ("conversation", "customer", "order")
DEFAULT_ORDER_PARAM = "order_id"
DEFAULT_WINDOW_HOURS = 24
MAX_WINDOW_HOURS = 30 * 24
MAX_TIMEOUT_MINUTES = 7 * 24 * 60
_NUMBER_TYPES = {"number", "integer"}
_ORDER_TYPES = {"string", "integer"}
_GROUP = re.compile(r"^[A-Za-z0-9_-]{1,40}$")


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
        if "param" in rule or "above" in rule or SUM_KEYS & set(rule):
            problems.append("always: cannot be combined with param/above/per/group")
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
    return problems + _sum_problems(rule, properties)


def _schema_types(spec: Any) -> set[Any]:
    types = spec.get("type") if isinstance(spec, dict) else None
    return set(types) if isinstance(types, list) else {types}


def _sum_problems(rule: dict[str, Any], properties: dict[str, Any]) -> list[str]:
    """What is wrong with the keys that say how calls add up (`per`, `order_param`,
    `window_hours`, `group`)."""
    problems = []
    per = rule.get("per", list(SCOPES))
    if not (isinstance(per, list) and per and all(isinstance(p, str) for p in per)):
        problems.append('per: must be a non-empty list, e.g. ["conversation", "customer", "order"]')
        per = []
    else:
        problems += [
            f"per: {p!r} is not a scope ({', '.join(SCOPES)})" for p in per if p not in SCOPES
        ]
        if len(set(per)) != len(per):
            problems.append("per: a scope is named twice")
    if "order_param" in rule:
        name = rule["order_param"]
        spec = properties.get(name) if isinstance(name, str) else None
        if not isinstance(spec, dict):
            problems.append(f"order_param: {name!r} is not one of the tool's parameters")
        elif not _schema_types(spec) <= _ORDER_TYPES:
            problems.append(f"order_param: {name!r} must be a string or integer parameter")
    elif "order" in rule.get("per", []) and DEFAULT_ORDER_PARAM not in properties:
        problems.append(
            'order_param: needed for the "order" scope (the tool has no "order_id" parameter)'
        )
    hours = rule.get("window_hours", DEFAULT_WINDOW_HOURS)
    if not (
        isinstance(hours, int) and not isinstance(hours, bool) and 1 <= hours <= MAX_WINDOW_HOURS
    ):
        problems.append(f"window_hours: must be a whole number from 1 to {MAX_WINDOW_HOURS}")
    if "group" in rule and not (isinstance(rule["group"], str) and _GROUP.match(rule["group"])):
        problems.append("group: must be a name of 1-40 letters, digits, _ or -")
    return problems


@dataclass(frozen=True)
class SumRule:
    """How the calls of a threshold rule add up, with the defaults filled in."""

    param: str
    above: Decimal
    scopes: tuple[str, ...]
    order_param: str
    window_hours: int
    group: str


def sum_rule(rule: Any) -> SumRule | None:
    """The threshold rule as it is summed, or None for no rule, `always`, or one that cannot be
    read (`approval_needed` fails closed for those)."""
    if not isinstance(rule, dict) or "param" not in rule or not _is_number(rule.get("above")):
        return None
    per = rule.get("per")
    scopes = tuple(p for p in SCOPES if p in per) if isinstance(per, list) else SCOPES
    hours = rule.get("window_hours")
    group = rule.get("group")
    return SumRule(
        param=str(rule["param"]),
        above=Decimal(str(rule["above"])),
        scopes=scopes or SCOPES,
        order_param=str(rule.get("order_param") or DEFAULT_ORDER_PARAM),
        window_hours=hours
        if isinstance(hours, int) and not isinstance(hours, bool) and hours > 0
        else DEFAULT_WINDOW_HOURS,
        group=group if isinstance(group, str) and group else "",
    )


def amount_of(params: Any, param: str) -> Decimal | None:
    """The call's amount under the rule's `param` (None: missing or not a number)."""
    return finite_decimal(params.get(param)) if isinstance(params, dict) else None


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
    text = f"{rule.get('param')} > {rule.get('above')}"
    summed = sum_rule(rule)
    if summed is None:
        return text
    text += f" (sum per {'/'.join(summed.scopes)}, {summed.window_hours} h"
    return text + (f", group {summed.group})" if summed.group else ")")
