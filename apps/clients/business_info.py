"""The documented shape of `Client.business_info` (docs/business-info.md) and its validation.

Every key is optional so a client can start small, but no unknown key is accepted (a typo such as
`polices` would otherwise silently hide a policy from the assistant)."""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator

from apps.core.schema_errors import Words, errors_by_path

_TEXT = {"type": "string", "maxLength": 20000}
_SHORT = {"type": "string", "maxLength": 500}

BUSINESS_INFO_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "about": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"description": {"type": "string", "maxLength": 1000}, "full": _TEXT},
        },
        "contact": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "hours": _SHORT,
                "phone": _SHORT,
                "email": {"type": "string", "maxLength": 254},
                "address": _SHORT,
            },
        },
        "policies": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"returns": _TEXT, "shipping": _TEXT, "privacy": _TEXT, "terms": _TEXT},
        },
        "faqs": {
            "type": "array",
            "maxItems": 200,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["question", "answer"],
                "properties": {
                    "question": {"type": "string", "minLength": 1, "maxLength": 1000},
                    "answer": {"type": "string", "minLength": 1, "maxLength": 5000},
                },
            },
        },
        "ai_instructions": {"type": "string", "maxLength": 5000},
    },
}

_validator = Draft202012Validator(BUSINESS_INFO_SCHEMA)

# Where its words differ from the shared ones (apps.core.schema_errors.WORDS).
_WORDS: Words = {
    "required": lambda p: "Required.",
    "type": lambda p: f"Must be a {p.value}.",
    "maxItems": lambda p: f"At most {p.value} entries.",
}


def business_info_errors(value: Any) -> dict[str, str]:
    """Field path -> message for every problem, empty when valid."""
    return errors_by_path(_validator, value, words=_WORDS, root="business_info")
