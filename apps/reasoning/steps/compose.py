"""`compose` — the reply after a tool ran, written from its result."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from apps.reasoning.steps import _data, _demo
from apps.reasoning.steps._base import Out, Step, required_text


class ComposeOut(Out):
    response: str = Field(min_length=1)

    _text = field_validator("response")(required_text)


PROMPT = """You are the customer-support assistant of {business}. A tool has just run for the
customer. Tell them the outcome in one or two friendly sentences, using only the tool result
given. If it failed, say so plainly and offer what they can do next.

Return JSON: response."""


def prompt(
    *, business: str, tool_name: str, params: str, outcome: str, user_message: str
) -> list[dict[str, str]]:
    """System: the task (ours). Data: the customer's message, then the tool's parameters and
    outcome (a webhook's answer may echo what the customer typed)."""
    return [
        _data.system_message(PROMPT.format(business=business)),
        _data.data_message(
            _data.block(_data.CUSTOMER, user_message),
            _data.block(
                _data.TOOL_RESULT,
                f"tool: {tool_name}\nparameters: {params}\noutcome: {outcome}",
            ),
        ),
    ]


def hint(
    *,
    tool: str,
    params: dict[str, Any],
    ok: bool,
    result: Any,
    error: str,
    worded: str = "",
    shown: dict[str, str] | None = None,
) -> dict[str, Any]:
    """`worded`: the outcome as GuideDesk words it itself in the customer's language
    (apps/tools/wording.py) — what the offline demo model says when it has no phrase of its
    own; `shown`: the result's values as the customer reads them (amounts, statuses)."""
    return {
        "tool": tool,
        "params": params,
        "ok": ok,
        "result": result,
        "error": error,
        "worded": worded,
        "shown": shown or {},
    }


def offline(hint: dict[str, Any]) -> dict[str, Any]:
    return _demo.compose_answer(hint)


# What a reply looks like (docs/llm-protocol.md shows it; a test validates it).
EXAMPLE: dict[str, Any] = {"response": "Order 123 is cancelled."}


STEP = Step(
    name="compose",
    output=ComposeOut,
    prompt=prompt,
    hint=hint,
    offline=offline,
    description="The reply after a tool ran, written from the tool's result.",
    example=EXAMPLE,
    language="reply",
)
