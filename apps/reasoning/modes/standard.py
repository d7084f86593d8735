"""Standard mode (seed: guided-reasoning-plan): one `respond` call with the full context — all
business info, all tool schemas, recent history. The guards still decide what a tool call may do;
a tool that ran gets a `compose` call (or its result template) for the reply."""

from __future__ import annotations

from decimal import Decimal

from apps.clients.modes import Mode
from apps.reasoning.context import full_context, history_messages, pending_text
from apps.reasoning.steps import respond
from apps.reasoning.turn import Outcome, Turn, act_on_tool_call


def run_standard(turn: Turn) -> Outcome:
    context = full_context(client=turn.client, tools=turn.enabled_tools)
    turn.add_source("full context (business info and tools)", context)
    turn.draft_reasoning = (
        "Standard mode: one respond call with the full business info; the model gives no "
        "confidence of its own (counted as 70 %)."
    )
    messages = respond.prompt(
        context=context,
        pending=pending_text(turn.confirmed, turn.declined),
        history=history_messages(turn.history),
        notes=turn.notes_prompt(),
    )
    result = turn.llm(respond.STEP, messages, business_info=turn.business_info)
    out = result.parsed
    name, params = out.tool_call, out.tool_params
    if name is None and turn.confirmed is not None:
        # The customer said yes to exactly this action; run what they confirmed.
        name, params = turn.confirmed.tool.name, turn.confirmed.params
    return act_on_tool_call(turn, name=name, params=params, draft=out.response)


MODE = Mode(
    name="standard",
    label="Standard — one call with the full context",
    summary="One `respond` call with all business info, tool schemas and recent history; a tool "
    "that ran gets a `compose` call (or its result template).",
    steps=("respond", "compose"),
    default_multiplier=Decimal("1.0"),
    cost_rank=10,
    message_kinds=(),
    run=run_standard,
)
