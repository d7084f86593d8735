"""How a tool run is kept on the turn's trace, the same for the call the model proposed
(`turn.run_tool`) and for a precondition's read (`preconditions`): the call counted, a `tool`
step, and an internal message with the result."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from apps.conversations.models import Kind
from apps.reasoning.traces import pretty
from apps.tools.models import ClientTool, ExecutionStatus, ToolExecution

if TYPE_CHECKING:
    from apps.reasoning.turn import Turn


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
