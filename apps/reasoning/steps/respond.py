"""`respond` — standard mode's one call: the reply (and a proposed tool call) from the full
context."""

from __future__ import annotations

from typing import Any, Self

from pydantic import Field, field_validator, model_validator

from apps.reasoning.steps import _demo
from apps.reasoning.steps._base import Out, Step
from apps.reasoning.steps._shared import (
    CONFIRMATION_RULE,
    RULES,
    business_facts,
    chat_messages,
)


def _tool_name(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        # An object (`{"name": ...}`) or a number is not a tool name: never str() it into one.
        raise ValueError(f"must be a tool name (a string) or null, not {type(value).__name__}")
    text = value.strip()
    return None if text.lower() in {"", "null", "none", "no", "false"} else text


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


class RespondOut(Out):
    """Tolerant on purpose: "null"/"" mean no tool, a non-object tool_params is empty. Strict
    where a reply would be empty: a blank `response` with no tool call, or a `tool_call` that
    is not a string, fails the step's contract. `response` is asked for last: the tool call
    decides whether the reply may be shown while it is written (streaming)."""

    written_last = "response"

    response: str = Field("", description="The reply shown to the customer.")
    tool_call: str | None = Field(None, description="Name of the tool to call, or null.")
    tool_params: dict[str, Any] = Field(
        default_factory=dict, description="Parameters for the tool call."
    )

    _tool = field_validator("tool_call", mode="before")(_tool_name)
    _params = field_validator("tool_params", mode="before")(_obj)

    def may_be_blank(self) -> bool:
        """A reply with no text for the customer is still an answer when this holds."""
        return self.tool_call is not None

    @model_validator(mode="after")
    def _answered(self) -> Self:
        if not self.response.strip() and not self.may_be_blank():
            raise ValueError("response is empty and there is no tool_call")
        return self


def final_as_written(partial: dict[str, Any]) -> bool:
    """A reply (parsed so far) whose `tool_call` is known and none: its text goes out as
    written (streamed to the widget; `apps.reasoning.turn.Turn.llm`)."""
    if "tool_call" not in partial:
        return False
    try:
        return _tool_name(partial["tool_call"]) is None
    except ValueError:
        return False


PROMPT = """You are the customer-support assistant of the business below.
{rules}
{confirmation}

{context}

Return JSON: response (text for the customer), tool_call (tool name or null),
tool_params (object)."""


def prompt(
    *,
    context: str,
    pending: str,
    history: list[dict[str, str]],
    notes: str = "",
    knowledge: list[dict[str, str]] | None = None,
    reference: list[dict[str, str]] | None = None,
) -> list[dict[str, str]]:
    """System: our rules and the business's configured context. Then `reference` (FAQs the
    business info document carries, as data), the notes block (`notes`, from apps.notes; ''
    for none), the conversation, the knowledge-base excerpts for the message (`knowledge`: a
    data message) and the confirmation state — as data."""
    system = PROMPT.format(rules=RULES, confirmation=CONFIRMATION_RULE, context=context)
    return chat_messages(
        system,
        history=history,
        notes=notes,
        pending=pending,
        after=knowledge,
        reference=reference,
    )


def hint(
    *, business_info: dict[str, Any] | None, knowledge: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    return {**business_facts(business_info), "knowledge": knowledge or []}


def offline(hint: dict[str, Any]) -> dict[str, Any]:
    return _demo.answer(hint, adaptive=False)


# What a reply looks like (docs/llm-protocol.md shows it; a test validates it).
EXAMPLE: dict[str, Any] = {"tool_call": None, "tool_params": {}, "response": "Hi!"}


STEP = Step(
    name="respond",
    output=RespondOut,
    prompt=prompt,
    hint=hint,
    offline=offline,
    description="Standard mode: the reply and a proposed tool call, from the full context.",
    example=EXAMPLE,
    language="reply",
)
