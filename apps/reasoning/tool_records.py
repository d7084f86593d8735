"""How a tool runs in a turn and is kept on its trace, the same for the call the model proposed
(`turn.run_tool`) and for a precondition's read (`preconditions`): the call counted and recorded
(`start_tool_call`), run under its idempotency key or answered by the sandbox
(`execute_tool_call`), then a `tool` step and an internal message with the result
(`record_tool_result`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from apps.conversations.models import Kind
from apps.reasoning import guards
from apps.reasoning.traces import pretty
from apps.tools.models import ClientTool, ExecutionStatus, PendingAction, ToolExecution
from apps.tools.services import tool_execute

if TYPE_CHECKING:
    from apps.reasoning.turn import Turn


def run_key(turn: Turn, tool: ClientTool, phash: str, pending: PendingAction | None) -> str:
    """The idempotency key of a run: the confirmed action's, else this turn's call's."""
    if pending is not None:
        return pending.idempotency_key
    return f"turn-{turn.rec.trace.pk}-{tool.name}-{phash[:20]}"


def start_tool_call(
    turn: Turn,
    *,
    tool: ClientTool,
    params: dict[str, Any],
    pending: PendingAction | None,
    purpose: str = "",
) -> str:
    """Count the call (the runaway guard reads `turn.calls`), check that no person has taken
    the conversation over, and record the call as an internal message; returns its
    idempotency key. `purpose` names a step that runs a call of its own (a precondition)."""
    phash = guards.params_hash(params)
    turn.calls.append((tool.name, phash))
    turn.tools_run.append(str(tool.kind))
    key = run_key(turn, tool, phash, pending)
    turn.rec.ensure_open()  # never act for a customer a person has taken over
    turn.rec.internal(
        Kind.TOOL_CALL,
        f"{tool.name} {pretty(params)}",
        {
            "tool": tool.name,
            "kind": tool.kind,
            "params": params,
            "idempotency_key": key,
            **({"purpose": purpose} if purpose else {}),
        },
    )
    return key


def execute_tool_call(
    turn: Turn,
    *,
    tool: ClientTool,
    params: dict[str, Any],
    pending: PendingAction | None,
    key: str,
) -> ToolExecution:
    """Run the call under its idempotency key, or let the sandbox answer it."""
    if turn.sandbox is not None:
        # Would run: the sandbox answers (a stub or a recorded result); no webhook is called.
        return turn.sandbox.execute(turn, tool=tool, params=params, pending=pending)
    return tool_execute(
        client=turn.client,
        tool=tool,
        params=params,
        idempotency_key=key,
        conversation=turn.conversation,
        trace=turn.rec.trace,
        pending_action=pending,
    )


def record_tool_result(
    turn: Turn, *, tool: ClientTool, params: dict[str, Any], execution: ToolExecution
) -> str:
    """Count the call and record its result on the trace (the `tool` step and an internal
    message); returns the result as the turn's sources quote it."""
    turn.rec.trace.tool_calls += 1
    outcome = {
        "ok": execution.status == ExecutionStatus.SUCCEEDED,
        "result": execution.result,
        "error": execution.error,
    }
    sandboxed = {"sandbox": True, "params": params} if turn.sandbox is not None else {}
    turn.rec.step(
        "tool",
        input_summary=f"{tool.name} {pretty(params)}",
        output={
            **outcome,
            "attempts": execution.attempts,
            "execution": execution.pk,
            **sandboxed,
        },
        latency_ms=execution.latency_ms,
        error=execution.error,
    )
    result_text = pretty(execution.result) if outcome["ok"] else f"failed: {execution.error}"
    turn.rec.internal(Kind.TOOL_RESULT, result_text, {"execution": execution.pk, **outcome})
    return result_text
