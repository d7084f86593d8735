"""`synthesize` — after deliberative mode's loop, the customer-facing answer written from the
reasoning steps, in `assess`'s fields (so a proposed tool call goes through the same critique
trigger and guards as adaptive mode)."""

from __future__ import annotations

from typing import Any

from apps.reasoning.steps import _deliberative as d
from apps.reasoning.steps._base import Step
from apps.reasoning.steps._shared import RULES, business_facts
from apps.reasoning.steps.assess import AssessOut

PROMPT = """You are the customer-support assistant of the business below. You have reasoned
about the customer's message in the steps that follow (the customer has not seen them). Write
the answer the customer will read now, from that reasoning.
{rules}

{context}
{pending}
Your reasoning steps:
{steps}

Return JSON: response (text for the customer), confidence (1-10), tool_call (name or null),
tool_params, missing_params (required params you don't have), is_destructive,
needs_confirmation, needs_more_context ([])."""


def prompt(*, context: str, pending: str, steps: str) -> str:
    return PROMPT.format(rules=RULES, context=context, pending=pending, steps=steps)


def hint(*, business_info: dict[str, Any] | None) -> dict[str, Any]:
    return business_facts(business_info)


def offline(hint: dict[str, Any]) -> dict[str, Any]:
    return d.demo_answer(hint)


STEP = Step(
    name="synthesize",
    output=AssessOut,
    prompt=prompt,
    hint=hint,
    offline=offline,
    description="Deliberative mode: the customer-facing answer written from the steps.",
)
