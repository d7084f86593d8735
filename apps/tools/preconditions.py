"""What must hold before a destructive tool's confirmation question is asked: the client's
declaration on a `ClientTool` (`precondition`), checked against the client's tools when it is
saved, and read (purely) by the turn (apps/reasoning/preconditions.py).

A precondition is a small JSON object:

    {"tool": "get_order_status", "params": {"order_id": "order_id"},
     "field": "status", "allowed": ["processing", "pending"]}

- `tool`: a **read** tool of the same client that looks the object up;
- `params`: the read tool's parameter → the destructive tool's parameter whose value it takes
  (each name must be a property of the respective schema; at least one);
- `field`: where the state is in the read tool's result — a name, or names joined by dots
  for a nested value (`order.status`);
- `allowed`: the states in which the action is possible (strings, numbers or booleans; text
  is compared without regard to case or surrounding spaces).

`{}` (the default) = no precondition. Only a destructive tool may have one: it is checked
right before the customer would be asked to confirm. The check only ever *removes* a
question — the confirmation of the exact params in a later message is still what lets the
destructive tool run."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

KEYS = ("tool", "params", "field", "allowed")
MAX_ALLOWED = 50
FIELD_PATH = re.compile(r"^[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*$")
EXAMPLE = (
    '{"tool": "get_order_status", "params": {"order_id": "order_id"}, "field": "status", '
    '"allowed": ["processing"]}'
)
LABEL = _("Check before asking")
HELP = _(
    "For a destructive tool: a read tool that looks the object up before the customer is asked "
    'to confirm, and the states in which the action is possible, e.g. {"tool": '
    '"get_order_status", "params": {"order_id": "order_id"}, "field": "status", "allowed": '
    '["processing"]}. In any other state the customer is told plainly that it is not possible '
    "and nothing is asked. Empty = always ask."
)


@dataclass(frozen=True)
class Precondition:
    """A readable precondition (`precondition_of`)."""

    tool: str
    params: dict[str, str]  # read tool's param → the destructive tool's param
    field: str
    allowed: tuple[Any, ...]

    def read_params(self, params: dict[str, Any]) -> dict[str, Any] | None:
        """The read tool's params for a call with `params`, or None when a value it needs is
        not among them (then nothing is read)."""
        read: dict[str, Any] = {}
        for read_name, own_name in self.params.items():
            if own_name not in params:
                return None
            read[read_name] = params[own_name]
        return read

    def state(self, result: Any) -> Any:
        """The state at `field` of the read tool's result; None when it is not there, or is
        not a single value (an object or a list says nothing about the state)."""
        value = result
        for name in self.field.split("."):
            if not isinstance(value, dict) or name not in value:
                return None
            value = value[name]
        if isinstance(value, str | int | float | bool):
            return value
        return None

    def allows(self, state: Any) -> bool:
        return any(_same(state, allowed) for allowed in self.allowed)


def _same(state: Any, allowed: Any) -> bool:
    if isinstance(state, str) and isinstance(allowed, str):
        return state.strip().casefold() == allowed.strip().casefold()
    if isinstance(state, bool) or isinstance(allowed, bool):
        return type(state) is type(allowed) and state == allowed
    return bool(state == allowed)


def precondition_of(value: Any) -> Precondition | None:
    """The precondition a tool declares, or None (none declared, or one saved in a shape that
    cannot be read — the check is then skipped and the question is asked as usual, which is
    always safe: it never lets anything run)."""
    if not isinstance(value, dict) or not value or precondition_shape_problems(value):
        return None
    return Precondition(
        tool=value["tool"],
        params={str(k): str(v) for k, v in value["params"].items()},
        field=value["field"],
        allowed=tuple(value["allowed"]),
    )


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool)


def precondition_shape_problems(value: Any) -> list[str]:
    """What is wrong with the object itself ([] = nothing), before any tool is looked at."""
    if value in (None, {}):
        return []
    if not isinstance(value, dict):
        return [f"must be an object, e.g. {EXAMPLE}"]
    problems = [f"{key}: unknown key" for key in sorted(set(value) - set(KEYS))]
    problems += [f"{key}: required" for key in KEYS if key not in value]
    if problems:
        return problems
    if not (isinstance(value["tool"], str) and value["tool"].strip()):
        problems.append("tool: must be the name of a read tool")
    params = value["params"]
    if not (
        isinstance(params, dict)
        and params
        and all(isinstance(k, str) and isinstance(v, str) and k and v for k, v in params.items())
    ):
        problems.append(
            "params: must map the read tool's parameters to this tool's, e.g. {\"order_id\": "
            '"order_id"}'
        )
    if not (isinstance(value["field"], str) and FIELD_PATH.match(value["field"])):
        problems.append("field: must name a result field, e.g. status or order.status")
    allowed = value["allowed"]
    if not (
        isinstance(allowed, list)
        and 0 < len(allowed) <= MAX_ALLOWED
        and all(_scalar(a) and a != "" for a in allowed)
    ):
        problems.append(
            f"allowed: must be a list of 1-{MAX_ALLOWED} states (text, numbers or true/false)"
        )
    return problems


def _properties(parameters: Any) -> dict[str, Any]:
    properties = parameters.get("properties") if isinstance(parameters, dict) else None
    return properties if isinstance(properties, dict) else {}


def precondition_problems(
    value: Any,
    *,
    kind: str,
    parameters: Any,
    read_tools: dict[str, Any] | None,
) -> list[str]:
    """What is wrong with `value` as the precondition of a tool of `kind` whose params follow
    `parameters` ([] = it is valid). `read_tools`: the client's tools by name → their
    (kind, parameters) — None when they are not known here (the tool is then checked where
    they are). The messages name the precondition's key."""
    if value in (None, {}):
        return []
    problems = precondition_shape_problems(value)
    if problems:
        return problems
    if kind != "destructive":
        return ["only a destructive tool has a precondition (it is checked before the question)"]
    own = _properties(parameters)
    for own_name in value["params"].values():
        if own_name not in own:
            problems.append(f"params: {own_name!r} is not one of this tool's parameters")
    if read_tools is None:
        return problems
    found = read_tools.get(value["tool"])
    if found is None:
        return [*problems, f"tool: {value['tool']!r} is not one of the client's tools"]
    read_kind, read_parameters = found
    if read_kind != "read":
        return [*problems, f"tool: {value['tool']!r} is a {read_kind} tool; it must be a read tool"]
    theirs = _properties(read_parameters)
    for read_name in value["params"]:
        if read_name not in theirs:
            problems.append(f"params: {read_name!r} is not one of {value['tool']}'s parameters")
    required = read_parameters.get("required", []) if isinstance(read_parameters, dict) else []
    for name in required if isinstance(required, list) else []:
        if name not in value["params"]:
            problems.append(f"params: {value['tool']} needs {name!r}")
    return problems


# The states most shops name in English, in the customer's words. Any other state is shown as
# the client's system gives it (it is the client's own vocabulary, in whatever language).
STATE_WORDS = {
    "pending": _("pending"),
    "processing": _("processing"),
    "shipped": _("shipped"),
    "delivered": _("delivered"),
    "cancelled": _("cancelled"),
    "canceled": _("cancelled"),
    "refunded": _("refunded"),
    "returned": _("returned"),
    "closed": _("closed"),
}


def state_words(state: Any) -> str:
    """The state as the customer reads it, in the active language where it is a known one."""
    if isinstance(state, bool):
        return str(state).lower()
    text = str(state).strip()
    known = STATE_WORDS.get(text.casefold())
    return str(known) if known is not None else text.replace("_", " ")


def not_possible_text(*, action: str, details: dict[str, Any], state: Any, tool: Any = None) -> str:
    """What the customer is told, in the active language, instead of a confirmation question
    when the object's state does not allow the action: nothing was asked, nothing ran. With
    `tool`, its display name and parameter labels (apps/tools/wording.py) name the action and
    the details, as the confirmation question would."""
    if tool is not None:
        from apps.tools.wording import display_name, field_label, shown_value

        named = display_name(tool)
        shown = ", ".join(
            f"{field_label(tool, k)} {shown_value(tool, k, v)}" for k, v in sorted(details.items())
        )
    else:
        named = action.replace("_", " ")
        shown = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted(details.items()))
    return gettext(
        "Sorry, “%(action)s” isn't possible for %(details)s: its status is %(state)s. "
        "Nothing has been changed."
    ) % {"action": named, "details": shown, "state": state_words(state)}
