"""`critique` — validating a planned action before it runs (adaptive mode, when triggered)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import field_validator

from apps.reasoning.steps import _data, _demo
from apps.reasoning.steps._base import Out, Step

Decision = Literal["PROCEED", "ASK_USER", "ESCALATE"]


class CritiqueOut(Out):
    decision: Decision
    reasoning: str = ""
    message: str = ""

    @field_validator("decision", mode="before")
    @classmethod
    def _decision(cls, value: Any) -> str:
        return str(value).strip().upper().replace("-", "_").replace(" ", "_")


PROMPT = """You are validating a planned action before execution. The customer's message, the
planned action (tool, kind, parameters), the assistant's draft reply and any confirmation state
are given as data blocks in the user message.

Available tools for this client: {tool_list}
Parameter schema of the planned tool: {schema}
Assistant's confidence: {confidence}/10
Why this check runs: {reasons}

Checklist:
1. Does the tool exist in the available tools list?
2. Are all required parameters provided with valid values?
3. Did the customer explicitly request this action (not just implied)?
4. For destructive actions (cancel/delete/refund): has the customer confirmed?
5. Confidence below 6 -> escalate or ask.

Return JSON: decision (PROCEED | ASK_USER | ESCALATE), reasoning (brief),
message (the question for the customer if ASK_USER, or the reason if ESCALATE)."""


def prompt(
    *,
    user_message: str,
    tool_name: str,
    tool_kind: str,
    params: str,
    schema: str,
    tool_list: str,
    draft: str,
    confidence: int,
    reasons: str,
    pending: str,
) -> list[dict[str, str]]:
    """System: the checklist, the client's tools and the planned tool's schema (ours). Data:
    the customer's message, the planned action and draft (a model chose them from the
    customer's words) and the confirmation state."""
    system = PROMPT.format(
        tool_list=tool_list, schema=schema, confidence=confidence, reasons=reasons
    )
    return [
        _data.system_message(system),
        _data.data_message(
            _data.block(_data.CUSTOMER, user_message),
            _data.block(
                _data.PLANNED_ACTION, f"tool: {tool_name} ({tool_kind})\nparameters: {params}"
            ),
            _data.block(_data.DRAFT, draft),
            _data.block(_data.CONFIRMATION, pending) if pending else "",
        ),
    ]


def hint(
    *, assessment: dict[str, Any], reasons: list[str], tool_kind: str | None
) -> dict[str, Any]:
    return {"assessment": assessment, "reasons": reasons, "tool_kind": tool_kind}


def offline(hint: dict[str, Any]) -> dict[str, Any]:
    assessment = hint.get("assessment", {})
    reasons = hint.get("reasons", [])
    if "unknown_tool" in reasons:
        return {
            "decision": "ASK_USER",
            "reasoning": "The tool is not in the arsenal.",
            "message": _demo.say(hint, "cannot"),
        }
    if assessment.get("missing_params"):
        missing = ", ".join(assessment["missing_params"])
        return {
            "decision": "ASK_USER",
            "reasoning": f"Missing required parameter: {missing}",
            "message": assessment.get("response", ""),
        }
    if hint.get("tool_kind") == "destructive" and not hint.get("confirmed"):
        return {
            "decision": "ASK_USER",
            "reasoning": "Destructive action requires the customer's confirmation.",
            "message": "",
        }
    return {"decision": "PROCEED", "reasoning": "All checks pass.", "message": ""}


# What a reply looks like (docs/llm-protocol.md shows it; a test validates it).
EXAMPLE: dict[str, Any] = {
    "decision": "ASK_USER",
    "reasoning": "Not confirmed.",
    "message": "Sure?",
}


STEP = Step(
    name="critique",
    output=CritiqueOut,
    prompt=prompt,
    hint=hint,
    offline=offline,
    description="Validates a planned action: PROCEED, ASK_USER or ESCALATE.",
    example=EXAMPLE,
    language="review",
)
