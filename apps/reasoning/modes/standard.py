"""Standard mode (seed: guided-reasoning-plan): one `respond` call with the full context — the
business info, all tool schemas, recent history — and the knowledge-base chunks that best match
the customer's message (within REASONING_STANDARD_KB_TOKENS, as a data block). The guards
still decide what a tool call may do; a tool that ran gets a `compose` call (or its result
template) for the reply."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.utils.translation import gettext_noop

from apps.clients.modes import Deliberation, Mode, ModeHelp, TokenReserve
from apps.reasoning import knowledge
from apps.reasoning.context import (
    full_context,
    history_messages,
    own_faqs,
    pending_text,
    reference_message,
)
from apps.reasoning.steps import respond
from apps.reasoning.turn import Outcome, Turn, act_on_tool_call


def run_standard(turn: Turn) -> Outcome:
    context = full_context(
        client=turn.client, tools=turn.enabled_tools, signin_tools=turn.signin_tools
    )
    turn.add_source("full context (business info and tools)", context)
    faqs = own_faqs(turn.client)  # knowledge: data, never the system message
    for key, text in faqs.items():
        turn.add_source(key, text)
    knowledge.fetch(
        turn,
        query=turn.user_message.text,
        token_budget=settings.REASONING_STANDARD_KB_TOKENS,
        purpose="respond",
    )
    turn.draft_reasoning = (
        "Standard mode: one respond call with the full business info; the model gives no "
        "confidence of its own (counted as 70 %)."
    )
    messages = respond.prompt(
        context=context,
        pending=pending_text(turn.confirmed, turn.declined),
        history=history_messages(turn.history),
        notes=turn.notes_prompt(),
        knowledge=knowledge.knowledge_message(turn.knowledge),
        reference=reference_message(faqs),
    )
    result = turn.llm(
        respond.STEP,
        messages,
        shown_when=respond.final_as_written,
        business_info=turn.business_info,
        knowledge=knowledge.demo_facts(turn),
    )
    out = result.parsed
    name, params = out.tool_call, out.tool_params
    if name is None and turn.confirmed is not None:
        # The customer said yes to exactly this action; run what they confirmed.
        name, params = turn.confirmed.tool.name, turn.confirmed.params
    return act_on_tool_call(turn, name=name, params=params, draft=out.response)


MODE = Mode(
    name="standard",
    label=gettext_noop("Standard — one call with the full context"),
    summary="One `respond` call with all business info, tool schemas, recent history and the "
    "knowledge-base chunks for the message; a tool that ran gets a `compose` call (or its "
    "result template).",
    steps=("respond", "compose"),
    default_multiplier=Decimal("1.0"),
    cost_rank=10,
    message_kinds=(),
    # A draft with no tool call is the reply: it may be shown while the model writes it.
    streams=True,
    deliberates=Deliberation.NEVER,
    token_reserve=TokenReserve.TURN,
    color="#417690",
    help=ModeHelp(
        happens=gettext_noop(
            "One call with the full business info and every tool. Fast; relies on the "
            "model's own judgement. Destructive tools still need the customer's confirmation "
            "(enforced in code)."
        ),
        llm_calls=gettext_noop("always 1"),
        cost_effect=gettext_noop(
            "≈ 2,000 input tokens per message (about $0.009 per message with a mid-priced "
            "model such as Claude Sonnet)"
        ),
    ),
    run=run_standard,
)
