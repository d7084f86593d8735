"""`synthesize` — after deliberative mode's loop, the customer-facing answer written from the
reasoning steps, in `assess`'s fields (so a proposed tool call goes through the same critique
trigger and guards as adaptive mode)."""

from __future__ import annotations

from typing import Any

from apps.reasoning.steps import _data
from apps.reasoning.steps import _deliberative as d
from apps.reasoning.steps._base import Step
from apps.reasoning.steps._shared import (
    CONFIRMATION_RULE,
    RULES,
    business_facts,
    chat_messages,
)
from apps.reasoning.steps.assess import AssessOut

PROMPT = """You are the customer-support assistant of the business below. You have reasoned
about the customer's message in steps (the "reasoning steps so far" block after the
conversation; the customer has not seen them). Write the answer the customer will read now,
from that reasoning.
{rules}
{confirmation}

{context}

Return JSON: response (text for the customer), confidence (1-10), tool_call (name or null),
tool_params, missing_params (required params you don't have), is_destructive,
needs_confirmation, needs_more_context ([] — or kb:<search words> keys to search the
business's knowledge base once more before you answer)."""


def prompt(
    *,
    context: str,
    pending: str,
    steps: str,
    history: list[dict[str, str]],
    notes: str = "",
    knowledge: list[dict[str, str]] | None = None,
) -> list[dict[str, str]]:
    """System: our rules and the business's context. Then the notes block, the conversation,
    the knowledge-base excerpts (`knowledge`: a data message), the reasoning steps (a model
    wrote them: data) and the confirmation state."""
    system = PROMPT.format(rules=RULES, confirmation=CONFIRMATION_RULE, context=context)
    reasoning = _data.data_message(_data.block(_data.REASONING, steps))
    after = [*(knowledge or []), reasoning]
    return chat_messages(system, history=history, notes=notes, pending=pending, after=after)


def hint(
    *, business_info: dict[str, Any] | None, knowledge: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    return {**business_facts(business_info), "knowledge": knowledge or []}


def offline(hint: dict[str, Any]) -> dict[str, Any]:
    return d.demo_answer(hint)


# What a reply looks like (docs/llm-protocol.md shows it; a test validates it).
EXAMPLE: dict[str, Any] = {
    "response": "Our returns window is 30 days, so this order can't be refunded; I can pass "
    "your case to our team for an exception.",
    "confidence": 8,
    "tool_call": None,
    "tool_params": {},
    "missing_params": [],
    "is_destructive": False,
    "needs_confirmation": False,
    "needs_more_context": [],
}


STEP = Step(
    name="synthesize",
    output=AssessOut,
    prompt=prompt,
    hint=hint,
    offline=offline,
    description="Deliberative mode: the customer-facing answer written from the steps.",
    example=EXAMPLE,
    language="reply",
)
