"""The documented shape of `Client.business_info` (docs/business-info.md) and its validation.

Every key is optional so a client can start small, but no unknown key is accepted (a typo such as
`polices` would otherwise silently hide a policy from the assistant)."""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator

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


def json_path(parts: Any) -> str:
    """['faqs', 2, 'answer'] -> 'faqs[2].answer'"""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def business_info_errors(value: Any) -> dict[str, str]:
    """Field path -> message for every problem, empty when valid."""
    errors: dict[str, str] = {}
    for error in sorted(_validator.iter_errors(value), key=lambda e: list(e.absolute_path)):
        path = json_path(error.absolute_path) or "business_info"
        if error.validator == "additionalProperties":
            extra = set(error.instance) - set(error.schema.get("properties", {}))
            allowed = ", ".join(sorted(error.schema.get("properties", {})))
            for key in sorted(extra):
                key_path = f"{path}.{key}" if path != "business_info" else key
                errors[key_path] = f"Unknown field. Allowed here: {allowed}."
            continue
        if error.validator == "required":
            missing = error.message.split("'")[1] if "'" in error.message else error.message
            errors[f"{path}.{missing}" if path != "business_info" else missing] = "Required."
            continue
        errors.setdefault(path, _human(error))
    return errors


def _human(error: Any) -> str:
    kind = error.validator
    if kind == "type":
        return f"Must be a {error.validator_value}."
    if kind == "maxLength":
        return f"At most {error.validator_value} characters."
    if kind == "minLength":
        return "Must not be empty."
    if kind == "maxItems":
        return f"At most {error.validator_value} entries."
    return str(error.message)
