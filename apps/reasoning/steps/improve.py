"""`improve` — refinement's rewrite of the most recent Draft or FinalSpec, addressing the latest
critique (it builds on the latest version, never the original draft)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from apps.reasoning.steps import _data
from apps.reasoning.steps._base import Out, Step, required_text
from apps.reasoning.steps._shared import extend
from apps.reasoning.steps.refine_critique import CLOSING


class ImproveOut(Out):
    # The reply text, all there is: the last improvement, when it is the version kept, is shown
    # while it is written (apps/reasoning/modes/deliberative.py).
    written_last = "response"

    response: str = Field("", description="The improved reply.", validate_default=True)

    _text = field_validator("response")(required_text)


INSTRUCTIONS = """Now improve the reply to the customer's last message in the "draft to review"
block above, before the customer sees it: rewrite it so every issue in the "review of the draft"
block is fixed; keep what was right; do not add facts that are not in the business information.
Return JSON: response (the improved reply)."""


def prompt(
    *, prefix: list[dict[str, str]], text: str, score: int, critique: str, issues: str
) -> list[dict[str, str]]:
    """The shared prefix (`_shared.shared_prefix`: our rules, the business's context, the
    conversation …), the current reply and its review (data blocks: models wrote both), then
    the task — a trailing system message."""
    review = f"score {score}/100\n{critique}\nissues:\n{issues or '(none)'}"
    return extend(
        prefix,
        _data.data_message(_data.block(_data.DRAFT, text), _data.block(_data.REVIEW, review)),
        _data.instructions_message(INSTRUCTIONS),
    )


def hint(*, text: str, issues: list[dict[str, Any]]) -> dict[str, Any]:
    return {"text": text, "issues": issues}


def offline(hint: dict[str, Any]) -> dict[str, Any]:
    text = str(hint.get("text", "")).strip()
    if CLOSING not in text:
        text = f"{text} {CLOSING}".strip()
    return {"response": text}


# What a reply looks like (docs/llm-protocol.md shows it; a test validates it).
EXAMPLE: dict[str, Any] = {
    "response": "Our returns window is 30 days, so this order can't be refunded."
}


STEP = Step(
    name="improve",
    output=ImproveOut,
    prompt=prompt,
    hint=hint,
    offline=offline,
    description="Deliberative refinement: the latest version rewritten to fix the critique.",
    example=EXAMPLE,
    language="reply",
)
