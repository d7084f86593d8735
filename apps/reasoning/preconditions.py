"""Read the object's state before a destructive action is put to the customer.

A destructive tool may name a precondition (`ClientTool.precondition`,
apps/tools/preconditions.py): a read tool of the client that looks the object up, the result
field holding its state, and the states in which the action is possible. Right before the turn
would ask "this can't be undone — reply yes", `check_before_asking` runs that read tool:

- in an allowed state the question is asked as before;
- in any other state the customer is told plainly, in their language, that the action is not
  possible (and why: the state) — no question, no pending action, no destructive call;
- when nothing can be read (no precondition, a value the read needs is missing, the read tool
  is unknown, switched off, not a read tool or refused by the guards, the call budget is spent,
  the read fails, its result has no such field) the question is asked as before. Never a 500.

The read is a tool call like any other: the guards decide whether it may run (enabled,
configured, customer_scoped, JSON Schema, the per-turn call budget and no repeats); it is
recorded as `tool_call` / `tool_result` internal messages and a `tool` trace step, and what
was decided as the trace step `precondition` (and, when not possible, a `guard` message). A
read is never destructive, so it needs no confirmation; the destructive tool itself still runs
only after a later message confirmed its exact params.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from apps.conversations.models import Kind
from apps.reasoning import guards
from apps.reasoning.tool_records import execute_tool_call, record_tool_result, start_tool_call
from apps.reasoning.traces import pretty
from apps.tools.models import ClientTool, ExecutionStatus, ToolKind
from apps.tools.preconditions import Precondition, not_possible_text, precondition_of

if TYPE_CHECKING:
    from apps.reasoning.turn import Turn

STEP = "precondition"


def check_before_asking(turn: Turn, *, tool: ClientTool, params: dict[str, Any]) -> str:
    """'' when the confirmation question about `tool` with `params` is to be asked; else the
    reply that says the action is not possible in the object's current state."""
    precondition = precondition_of(tool.precondition)
    if precondition is None:
        return ""  # nothing declared: nothing recorded, the question as always
    record: dict[str, Any] = {"tool": tool.name, "read_tool": precondition.tool}
    read_params = precondition.read_params(params)
    if read_params is None:
        return _ask(turn, record, "read_params_missing")
    record["params"] = read_params
    read_tool = turn.tools_by_name.get(precondition.tool)
    if read_tool is None or read_tool.kind != ToolKind.READ:
        return _ask(turn, record, "read_tool_unavailable")
    verdict = guards.check_tool_call(
        tools_by_name=turn.tools_by_name,
        name=read_tool.name,
        params=read_params,
        confirmed=None,
        calls_this_turn=turn.calls,
        customer_verified=turn.customer_verified,
        given=turn.given_words(),
    )
    if verdict.action != "run":
        return _ask(turn, record, verdict.reason or verdict.action)
    ok, result, error = _read(turn, tool=read_tool, params=read_params)
    if not ok:
        record["error"] = error
        return _ask(turn, record, "read_failed")
    return _decide(turn, record, precondition, tool=tool, result=result)


def _decide(
    turn: Turn,
    record: dict[str, Any],
    precondition: Precondition,
    *,
    tool: ClientTool,
    result: Any,
) -> str:
    state = precondition.state(result)
    record |= {"field": precondition.field, "allowed": list(precondition.allowed)}
    if state is None:
        return _ask(turn, record, "no_state")
    record["state"] = state
    if precondition.allows(state):
        record["outcome"] = "allowed"
        turn.rec.step(STEP, input_summary=f"{tool.name} {pretty(record['params'])}", output=record)
        return ""
    record["outcome"] = "not_possible"
    turn.rec.step(STEP, input_summary=f"{tool.name} {pretty(record['params'])}", output=record)
    turn.rec.internal(
        Kind.GUARD,
        f"NOT POSSIBLE: {tool.name} — {precondition.field} is {state!r} "
        f"(allowed: {', '.join(map(str, precondition.allowed))}); nothing asked, nothing run",
        record,
    )
    # The details the customer recognises the object by: the params the read was made with,
    # under the destructive tool's own names.
    details = {own: record["params"][read] for read, own in precondition.params.items()}
    return not_possible_text(action=tool.name, details=details, state=state, tool=tool)


def _ask(turn: Turn, record: dict[str, Any], reason: str) -> str:
    """Nothing could be read: the question is asked as it always was."""
    turn.rec.step(STEP, output={**record, "outcome": "unknown", "reason": reason})
    return ""


def _read(turn: Turn, *, tool: ClientTool, params: dict[str, Any]) -> tuple[bool, Any, str]:
    """Run the read tool once, recorded like every tool call (`turn.run_tool` does the same for
    the call the model proposed); (ok, result, error). A failure is a value, never raised."""
    key = start_tool_call(turn, tool=tool, params=params, pending=None, purpose=STEP)
    # In a simulation the case's stub answers (no stub: an empty result, so nothing is known and
    # the question is asked); no webhook is called.
    execution = execute_tool_call(turn, tool=tool, params=params, pending=None, key=key)
    text = record_tool_result(turn, tool=tool, params=params, execution=execution)
    turn.add_source(f"tool result: {tool.name}", text)
    ok = execution.status == ExecutionStatus.SUCCEEDED
    return ok, execution.result, execution.error
