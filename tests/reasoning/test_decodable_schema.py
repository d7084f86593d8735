"""The schema sent to the model is in the form every schema-decoding server enforces
(docs/llm-protocol.md, "Constraints a decoding server enforces"): no `enum` beside a list
`type` (llama.cpp's grammar converters turn that into a union and drop the enum) and no small
integer range left to `minimum` / `maximum` (which no grammar converter enforces) — for every
registered step, in every response form that carries a schema."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from apps.reasoning import steps
from apps.reasoning.llm.formats import (
    RESPONSE_FORMS,
    build_request,
    decodable,
    format_instruction,
    step_schema,
)

TOOLS = ["cancel_order", "get_order_status"]
MESSAGES = [{"role": "system", "content": "Rules."}, {"role": "user", "content": "Hi"}]


def _fields(schema: Mapping[str, Any], where: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    yield where or "<root>", schema
    for name, spec in schema.get("properties", {}).items():
        yield from _fields(spec, f"{where}.{name}")
    items = schema.get("items")
    if isinstance(items, Mapping):
        yield from _fields(items, f"{where}[]")


def _sent_schema(step: str, form: str) -> dict[str, Any]:
    schema = step_schema(step, steps.get(step).output, TOOLS)
    _, response_format = build_request(step, MESSAGES, schema, form)
    assert response_format is not None
    if form == "json_schema":
        return response_format["json_schema"]["schema"]
    return response_format["schema"]


@pytest.mark.parametrize("form", [f for f in RESPONSE_FORMS if "schema" in f])
@pytest.mark.parametrize("step", steps.names())
def test_every_constraint_sent_is_in_an_enforceable_form(step: str, form: str) -> None:
    for where, spec in _fields(_sent_schema(step, form)):
        if "enum" in spec:
            assert not isinstance(spec.get("type"), list), f"{step} {where}: enum, list type"
        if spec.get("type") == "integer" and "minimum" in spec and "maximum" in spec:
            assert spec["maximum"] - spec["minimum"] >= 101, f"{step} {where}: small range"


CHAT_STEPS = [s for s in steps.names() if "tool_call" in steps.SCHEMAS[s]["properties"]]


@pytest.mark.parametrize("step", CHAT_STEPS)
def test_tool_call_is_an_enum_of_the_names_and_null_without_a_type(step: str) -> None:
    tool_call = step_schema(step, steps.get(step).output, TOOLS)["properties"]["tool_call"]
    assert tool_call["enum"] == [*TOOLS, None]
    assert "type" not in tool_call


@pytest.mark.parametrize(
    ("step", "field", "values"),
    [
        ("assess", "confidence", list(range(1, 11))),
        ("synthesize", "confidence", list(range(1, 11))),
        ("evaluate", "improved_confidence", list(range(101))),
        ("refine_critique", "score", list(range(101))),
    ],
)
def test_small_integer_ranges_are_sent_as_enums(step: str, field: str, values: list[int]) -> None:
    spec = step_schema(step, steps.get(step).output)["properties"][field]
    assert spec["enum"] == values
    assert not {"type", "minimum", "maximum"} & set(spec)
    # The registered schema (the documented contract) keeps the range.
    assert steps.SCHEMAS[step]["properties"][field]["minimum"] == values[0]
    # The instruction line of the schema-less forms reads it as a range, not 101 values.
    assert f'"{field}" (integer {values[0]}–{values[-1]}' in format_instruction(
        step, decodable(steps.SCHEMAS[step])
    )


def test_nested_ranges_and_wide_ranges() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "results": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"score": {"type": "integer", "minimum": 0, "maximum": 100}},
                },
            },
            "count": {"type": "integer", "minimum": 0, "maximum": 100000},
            "kind": {"type": "string", "enum": ["a", "b"]},
        },
    }
    out = decodable(schema)
    assert out["properties"]["results"]["items"]["properties"]["score"] == {
        "enum": list(range(101))
    }
    # Too many values for an enum: the range stays (validated in code).
    assert out["properties"]["count"] == {"type": "integer", "minimum": 0, "maximum": 100000}
    # A single type beside an enum is enforced as it is.
    assert out["properties"]["kind"] == {"type": "string", "enum": ["a", "b"]}
    assert schema["properties"]["results"]["items"]["properties"]["score"]["minimum"] == 0
