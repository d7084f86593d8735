"""`synthesize` — after deliberative mode's loop, the customer-facing answer written from the
reasoning steps, in `assess`'s fields (so a proposed tool call goes through the same critique
trigger and guards as adaptive mode)."""

from __future__ import annotations

from typing import Any

from apps.reasoning.steps import _data
from apps.reasoning.steps import _deliberative as d
from apps.reasoning.steps._base import Step
from apps.reasoning.steps._shared import business_facts, extend
from apps.reasoning.steps.assess import AssessOut

INSTRUCTIONS = """Now write the answer the customer will read, from your reasoning steps above
(none: answer directly; the customer has not seen them). Return JSON: response (text for the
customer), confidence (1-10), tool_call (name or null), tool_params, missing_params (required
params you don't have), is_destructive, needs_confirmation, needs_more_context ([] — or
the keys of sections listed but not given above, or kb:<search words> keys to search the
business's knowledge base, to read them before you answer)."""


def prompt(
    *, prefix: list[dict[str, str]], transcript: list[dict[str, str]]
) -> list[dict[str, str]]:
    """The shared prefix (`_shared.shared_prefix`: our rules, the business's context, the
    notes, the conversation, the knowledge-base excerpts, the confirmation state), the
    reasoning loop's `transcript` (the protocol, the steps and the feedback — as the loop sent
    them, so the whole loop is a cached prefix), then the instructions: a trailing system
    message."""
    return extend(prefix, *transcript, _data.instructions_message(INSTRUCTIONS))


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
    "complaint": False,
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
