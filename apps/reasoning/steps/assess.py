"""`assess` — adaptive mode's call: the reply plus a self-assessment, from a minimal context
(the model may ask for more with `needs_more_context`)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from apps.reasoning.steps import _demo
from apps.reasoning.steps._base import Step
from apps.reasoning.steps._shared import (
    CONFIRMATION_RULE,
    RULES,
    business_facts,
    chat_messages,
)
from apps.reasoning.steps.respond import RespondOut


def _str_list(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value if v not in (None, "")] if isinstance(value, list) else []


class AssessOut(RespondOut):
    # A reply without a confidence counts as the least confident one.
    confidence: int = Field(1, ge=1, le=10)
    missing_params: list[str] = Field(default_factory=list)
    is_destructive: bool = False
    needs_confirmation: bool = False
    needs_more_context: list[str] = Field(default_factory=list)
    # Read by "deliberate when needed" (apps/reasoning/modes/as_needed.py): the model's own
    # judgement, in any language — never a keyword rule.
    complaint: bool = Field(
        False,
        description="true when the customer complains, disputes a charge or a decision, or "
        "is upset about how they were treated.",
    )

    _lists = field_validator("missing_params", "needs_more_context", mode="before")(_str_list)

    @field_validator("confidence", mode="before")
    @classmethod
    def _confidence(cls, value: Any) -> int:
        if value is None:
            return 1  # no confidence counts as the lowest
        try:
            number = round(float(value))
        except (TypeError, ValueError):
            return 1  # unreadable confidence counts as low confidence
        if number == 0:
            # A zero on a 1–10 scale (small models start scales at 0) says "not confident":
            # the lowest, which triggers the critique — never a reason to trust the reply more.
            return 1
        if not 1 <= number <= 10:
            raise ValueError(f"must be between 1 and 10, not {value!r}")
        return number

    def may_be_blank(self) -> bool:
        # Asking for more context (adaptive mode fetches it and asks again) is an answer too.
        return super().may_be_blank() or bool(self.needs_more_context)


# The topics are data (a "knowledge base topics" block after this message:
# `knowledge.topics_message`); the keys line lists `kb:<search words>` (`context.keys_text`).
# Nothing more to say: this is every adaptive turn's first call.
KB_RULE = ""

# Kept short: this is every adaptive turn's first call (docs/benchmarks.md, "Cost per turn by
# mode"). The reply's fields are not listed: the schema is the request's `response_format`, or
# the gateway's format line where a provider takes no schema (`llm.format_instruction`).
PROMPT = """You are the support assistant of {business}. Ask for more context with
needs_more_context keys: {keys}
{kb}{rules}{confirmation}

{context}
{fetched}"""


def prompt(
    *,
    keys: str,
    context: str,
    fetched: str,
    pending: str,
    history: list[dict[str, str]],
    notes: str = "",
    knowledge: list[dict[str, str]] | None = None,
    kb: bool = False,
    business: str = "",
    reference: list[dict[str, str]] | None = None,
) -> list[dict[str, str]]:
    """System: our rules and the business's configured context (minimal + fetched sections
    staff wrote). Then `reference` (the knowledge topics, a data message), the notes block
    (`notes`, from apps.notes; '' for none), the conversation, the knowledge fetched on demand
    (`knowledge`: data messages — `kb:` excerpts, FAQs), and the confirmation state (`pending`;
    with one, the system message says how to read it). `kb`: the business has a knowledge base
    (the prompt explains `kb:`). `business`: the business's name, for a `context` without its
    "Business:" line (the first line names it)."""
    system = PROMPT.format(
        business=business or "the business below",
        keys=keys,
        kb=KB_RULE if kb else "",
        rules=RULES,
        # Only with a confirmation state to read: adaptive's prompts are under the providers'
        # cache minimum (1,024 tokens), so a prefix kept stable by it would save nothing.
        confirmation=f"\n{CONFIRMATION_RULE}" if pending else "",
        context=context,
        fetched=fetched,
    )
    return chat_messages(
        system,
        history=history,
        notes=notes,
        pending=pending,
        after=knowledge,
        reference=reference,
    )


def hint(
    *,
    business_info: dict[str, Any] | None,
    fetched: list[str],
    available_keys: list[str],
    knowledge: list[dict[str, str]] | None = None,
    kb: bool = False,
) -> dict[str, Any]:
    """`knowledge`: the chunks fetched so far; `kb`: the client has a knowledge base to search."""
    return {
        **business_facts(business_info),
        "fetched": fetched,
        "available_keys": available_keys,
        "knowledge": knowledge or [],
        "kb": kb,
    }


def offline(hint: dict[str, Any]) -> dict[str, Any]:
    return _demo.answer(hint, adaptive=True)


# What a reply looks like (docs/llm-protocol.md shows it; a test validates it).
EXAMPLE: dict[str, Any] = {
    "tool_call": "cancel_order",
    "tool_params": {"order_id": "123"},
    "confidence": 7,
    "missing_params": [],
    "is_destructive": True,
    "needs_confirmation": True,
    "needs_more_context": [],
    "complaint": False,
    "response": "I can cancel order 123 for you.",
}


STEP = Step(
    name="assess",
    output=AssessOut,
    prompt=prompt,
    hint=hint,
    offline=offline,
    description="Adaptive mode: the reply plus a self-assessment, from a minimal context.",
    example=EXAMPLE,
    language="reply",
)
