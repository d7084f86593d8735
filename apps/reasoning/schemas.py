"""What the model returns at each step (the LLM protocol, docs/llm-protocol.md).

The pydantic models are tolerant on purpose — extra keys are ignored, "null"/"" mean no tool,
numbers may come as strings, a decision in lower case is accepted — because models drift. The
JSON Schemas are what we ask for with `response_format`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class _Out(BaseModel):
    model_config = ConfigDict(extra="ignore")


def _tool_name(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return None if text.lower() in {"", "null", "none", "no", "false"} else text


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str_list(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value if v not in (None, "")] if isinstance(value, list) else []


class RespondOut(_Out):
    response: str = ""
    tool_call: str | None = None
    tool_params: dict[str, Any] = Field(default_factory=dict)

    _tool = field_validator("tool_call", mode="before")(_tool_name)
    _params = field_validator("tool_params", mode="before")(_obj)


class AssessOut(RespondOut):
    confidence: int = 5
    missing_params: list[str] = Field(default_factory=list)
    is_destructive: bool = False
    needs_confirmation: bool = False
    needs_more_context: list[str] = Field(default_factory=list)

    _lists = field_validator("missing_params", "needs_more_context", mode="before")(_str_list)

    @field_validator("confidence", mode="before")
    @classmethod
    def _confidence(cls, value: Any) -> int:
        try:
            number = round(float(value))
        except (TypeError, ValueError):
            return 1  # unreadable confidence counts as low confidence
        return max(1, min(10, number))


class CritiqueOut(_Out):
    decision: Literal["PROCEED", "ASK_USER", "ESCALATE"]
    reasoning: str = ""
    message: str = ""

    @field_validator("decision", mode="before")
    @classmethod
    def _decision(cls, value: Any) -> str:
        return str(value).strip().upper().replace("-", "_").replace(" ", "_")


class ComposeOut(_Out):
    response: str = Field(min_length=1)


_TOOL_FIELDS: dict[str, Any] = {
    "response": {"type": "string", "description": "The reply shown to the customer."},
    "tool_call": {
        "type": ["string", "null"],
        "description": "Name of the tool to call, or null.",
    },
    "tool_params": {"type": "object", "description": "Parameters for the tool call."},
}

STEP_SCHEMAS: dict[str, dict[str, Any]] = {
    "respond": {
        "type": "object",
        "properties": _TOOL_FIELDS,
        "required": ["response", "tool_call", "tool_params"],
    },
    "assess": {
        "type": "object",
        "properties": {
            **_TOOL_FIELDS,
            "confidence": {"type": "integer", "minimum": 1, "maximum": 10},
            "missing_params": {"type": "array", "items": {"type": "string"}},
            "is_destructive": {"type": "boolean"},
            "needs_confirmation": {"type": "boolean"},
            "needs_more_context": {"type": "array", "items": {"type": "string"}},
        },
        "required": [
            "response",
            "confidence",
            "tool_call",
            "tool_params",
            "missing_params",
            "is_destructive",
            "needs_confirmation",
            "needs_more_context",
        ],
    },
    "critique": {
        "type": "object",
        "properties": {
            "decision": {"type": "string", "enum": ["PROCEED", "ASK_USER", "ESCALATE"]},
            "reasoning": {"type": "string"},
            "message": {"type": "string"},
        },
        "required": ["decision", "reasoning", "message"],
    },
    "compose": {
        "type": "object",
        "properties": {"response": {"type": "string"}},
        "required": ["response"],
    },
}

STEP_MODELS: dict[str, type[_Out]] = {
    "respond": RespondOut,
    "assess": AssessOut,
    "critique": CritiqueOut,
    "compose": ComposeOut,
}

Decision = Literal["PROCEED", "ASK_USER", "ESCALATE"]
