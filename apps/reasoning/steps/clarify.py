"""`clarify` — one Socratic clarifying question when deliberative mode's first step found two
readings of the customer's message within 0.15 of each other; its options become quick-reply
buttons in the widget."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from apps.reasoning.steps import _data
from apps.reasoning.steps._base import Out, Step

MAX_OPTIONS = 4


class ClarifyOut(Out):
    question: str = Field("", description="One short clarifying question for the customer.")
    options: list[str] = Field(
        default_factory=list, description="2-4 short answers the customer can pick."
    )

    @field_validator("options", mode="before")
    @classmethod
    def _options(cls, value: Any) -> list[str]:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            return []
        seen: list[str] = []
        for option in value:
            text = str(option or "").strip()[:80]
            if text and text not in seen:
                seen.append(text)
        return seen[:MAX_OPTIONS]


PROMPT = """You are the customer-support assistant of {business}. The customer's message (a data
block in the user message) can be read in more than one way, and guessing could cost them; the
possible readings, with confidence, follow it.

Ask ONE short, friendly clarifying question so you can help with the right thing, and give the
customer 2-{max_options} short options to pick from (a few words each), in the customer's
language. Return JSON: question, options."""


def prompt(
    *, business: str, user_text: str, hypotheses: list[dict[str, Any]]
) -> list[dict[str, str]]:
    """System: the task. Data: the customer's message and the readings a model made of it."""
    readings = "\n".join(f"- {h['intent']} ({h['confidence']:.2f})" for h in hypotheses)
    return [
        _data.system_message(PROMPT.format(business=business, max_options=MAX_OPTIONS)),
        _data.data_message(
            _data.block(_data.CUSTOMER, user_text), _data.block(_data.REASONING, readings)
        ),
    ]


def hint(*, hypotheses: list[dict[str, Any]]) -> dict[str, Any]:
    return {"hypotheses": hypotheses}


def offline(hint: dict[str, Any]) -> dict[str, Any]:
    options = [str(h["intent"])[:60] for h in hint.get("hypotheses", [])[:MAX_OPTIONS]]
    return {
        "question": "Just to be sure I help with the right thing — which do you mean?",
        "options": options,
    }


# What a reply looks like (docs/llm-protocol.md shows it; a test validates it).
EXAMPLE: dict[str, Any] = {
    "question": "Would you like a refund or an exchange?",
    "options": ["Refund", "Exchange"],
}


STEP = Step(
    name="clarify",
    output=ClarifyOut,
    prompt=prompt,
    hint=hint,
    offline=offline,
    description="Deliberative mode: one clarifying question with quick-reply options.",
    example=EXAMPLE,
    language="reply",
)
