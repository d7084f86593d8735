"""The step registry: every step has its parts, the requested JSON Schema is derived from the
step's output model (and accepts the documented replies), a new step is one module, and the
offline demo model has no generic fallback."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel

from apps.reasoning import steps
from apps.reasoning.llm import LLMError, format_instruction, llm_complete
from apps.reasoning.llm.offline import offline_complete
from apps.reasoning.steps import Out, Step, StepDefinitionError, UnknownStep

# The schemas as they were written by hand before they were derived (docs/llm-protocol.md):
# the derived ones must request exactly the same thing.
HAND_WRITTEN: dict[str, dict[str, Any]] = {
    "respond": {
        "type": "object",
        "properties": {
            "response": {"type": "string", "description": "The reply shown to the customer."},
            "tool_call": {
                "type": ["string", "null"],
                "description": "Name of the tool to call, or null.",
            },
            "tool_params": {"type": "object", "description": "Parameters for the tool call."},
        },
        "required": ["response", "tool_call", "tool_params"],
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
HAND_WRITTEN["evaluate"] = {
    "type": "object",
    "properties": {
        "valid": {
            "type": ["boolean", "null"],
            "description": "True if the draft is correct and supported by the source text.",
        },
        "improved_response": {
            "type": ["string", "null"],
            "description": "A better reply written only from the source text, or null.",
        },
        "improved_confidence": {
            "type": "integer",
            "minimum": 0,
            "maximum": 100,
            "description": "Confidence (0-100) in improved_response; 0 when null.",
        },
        "evaluation": {
            "type": "string",
            "description": "What is right or wrong with the draft, briefly.",
        },
    },
    "required": ["valid", "improved_response", "improved_confidence", "evaluation"],
}
HAND_WRITTEN["assess"] = {
    "type": "object",
    "properties": {
        **HAND_WRITTEN["respond"]["properties"],
        "confidence": {"type": "integer", "minimum": 1, "maximum": 10},
        "missing_params": {"type": "array", "items": {"type": "string"}},
        "is_destructive": {"type": "boolean"},
        "needs_confirmation": {"type": "boolean"},
        "needs_more_context": {"type": "array", "items": {"type": "string"}},
        # Added for "deliberate when needed" (the model's own complaint signal).
        "complaint": {
            "type": "boolean",
            "description": "true when the customer complains, disputes a charge or a decision, "
            "or is upset about how they were treated.",
        },
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
        "complaint",
    ],
}

# What each step's `hint(**facts)` is called with by the offline test below. A new step
# fails that test until it has an entry here (the test is parametrized over the registry).
OFFLINE_FACTS: dict[str, dict[str, Any]] = {
    "respond": {"business_info": {}},
    "assess": {"business_info": {}, "fetched": [], "available_keys": []},
    "critique": {
        "assessment": steps.get("assess").example,
        "reasons": [],
        "tool_kind": None,
    },
    "compose": {"tool": "x", "params": {}, "ok": True, "result": {"a": 1}, "error": ""},
    "evaluate": {"draft": "Within 60 days.", "confidence": 80, "sources": {"x": "30 days"}},
    "reason_step": {"index": 1, "max_steps": 10, "keys": ["a", "b"], "target": 0.75},
    "feedback": {
        "history": [{"step": 1, "scores": {"a": 0.5}, "mean": 0.5, "content": "c"}],
        "target": 0.75,
    },
    "synthesize": {"business_info": {}},
    "refine_critique": {"text": "An answer. Another sentence.", "iteration": 1},
    "improve": {"text": "An answer.", "issues": []},
    "clarify": {"hypotheses": [{"intent": "a", "confidence": 0.5}]},
    "insights": {
        "items": [
            {"conversation": f"c{i}", "kind": "escalation", "text": "refund?", "detail": ""}
            for i in range(3)
        ],
        "min_count": 2,
        "max_topics": 5,
    },
    "judge": {
        "criteria": ['says "hello"', "is polite"],
        "transcript": [{"customer": "Hi", "reply": "Hello!"}],
    },
    "simulate_customer": {"persona": "", "goal": "Track my order", "transcript": []},
}


def _hint(**extra: Any) -> dict[str, Any]:
    return {
        "client_name": "Trail Shop",
        "user_text": "Hello",
        "history": [{"role": "user", "text": "Hello"}],
        "tools": [],
        "confirmed": None,
        "declined": None,
        **extra,
    }


@pytest.mark.parametrize("name", steps.names())
def test_every_step_is_registered_with_all_its_parts(name: str) -> None:
    step = steps.get(name)
    assert step.name == name
    assert issubclass(step.output, Out)
    assert callable(step.prompt) and callable(step.hint) and callable(step.offline)
    assert step.description
    assert step.schema["type"] == "object"


@pytest.mark.parametrize("name", sorted(HAND_WRITTEN))
def test_derived_schema_requests_what_the_hand_written_one_did(name: str) -> None:
    derived = steps.get(name).schema
    expected = HAND_WRITTEN[name]
    assert derived["properties"] == expected["properties"]
    assert sorted(derived["required"]) == sorted(expected["required"])
    assert {k: v for k, v in derived.items() if k != "required"} == {
        k: v for k, v in expected.items() if k != "required"
    }
    # Every field is listed (structured-output endpoints require it); no pydantic noise.
    assert set(derived["required"]) == set(derived["properties"])
    assert "title" not in json.dumps(derived) and "default" not in json.dumps(derived)


@pytest.mark.parametrize("name", steps.names())
def test_the_example_reply_of_every_step_fits_its_schema_and_parser(name: str) -> None:
    step = steps.get(name)
    jsonschema.validate(step.example, step.schema)
    parsed = step.output.model_validate(step.example)
    # Every field of the reply is one the step declares, and every declared field is shown.
    assert set(step.example) == set(step.schema["properties"])
    assert set(parsed.model_dump()) == set(step.schema["properties"])


@pytest.mark.parametrize("name", steps.names())
def test_offline_answer_of_every_step_is_valid_for_its_schema(name: str) -> None:
    step = steps.get(name)
    raw = offline_complete(name, [], _hint(**step.hint(**OFFLINE_FACTS[name])))
    jsonschema.validate(json.loads(raw), step.schema)


def test_offline_model_refuses_an_unknown_step() -> None:
    with pytest.raises(UnknownStep):
        offline_complete("no_such_step", [], _hint())


def test_gateway_refuses_an_unknown_step(settings: Any) -> None:
    settings.OPENAI_API_KEY = ""
    with pytest.raises(UnknownStep):
        llm_complete(step="no_such_step", messages=[], output=steps.get("respond").output)


class SummaryOut(Out):
    summary: str
    topics: list[str] = []


def _summary_offline(hint: dict[str, Any]) -> dict[str, Any]:
    return {"summary": f"{len(hint['texts'])} messages", "topics": ["shipping"]}


@pytest.fixture
def summary_step() -> Any:
    step = steps.register(
        Step(
            name="summarize_test",
            output=SummaryOut,
            prompt=lambda *, texts: "Summarize: " + " | ".join(texts),
            hint=lambda *, texts: {"texts": texts},
            offline=_summary_offline,
            description="Summarizes messages (a step defined in a test module).",
            example={"summary": "2 messages", "topics": ["shipping"]},
        )
    )
    yield step
    steps.unregister("summarize_test")


def test_a_step_defined_in_a_test_module_is_used_by_the_gateway_and_the_offline_model(
    summary_step: Any, settings: Any
) -> None:
    settings.OPENAI_API_KEY = ""
    messages = [{"role": "system", "content": summary_step.prompt(texts=["a", "b"])}]

    result = llm_complete(
        step="summarize_test",
        messages=messages,
        output=SummaryOut,
        offline_hint=summary_step.hint(texts=["a", "b"]),
    )

    assert result.parsed == SummaryOut(summary="2 messages", topics=["shipping"])
    assert summary_step.schema == {
        "type": "object",
        "properties": {
            "summary": {"type": "string"},
            "topics": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["summary", "topics"],
    }
    assert '"topics" (array of strings)' in format_instruction("summarize_test")


def test_a_step_module_added_to_a_package_is_discovered(tmp_path: Path) -> None:
    package = tmp_path / "extra_steps_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "_helpers.py").write_text("VALUE = 1\n")  # underscore modules are helpers
    (package / "tag.py").write_text(
        "from apps.reasoning.steps import Out, Step\n"
        "class TagOut(Out):\n    tag: str\n"
        "STEP = Step(name='tag_test', output=TagOut, prompt=lambda **f: 'Tag it.',\n"
        "    hint=lambda **f: {}, offline=lambda hint: {'tag': 'demo'},\n"
        "    description='Tags a conversation.', example={'tag': 'returns'})\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        found = steps.discover("extra_steps_pkg")
        assert [s.name for s in found] == ["tag_test"]
        assert steps.get("tag_test").schema["required"] == ["tag"]
        assert json.loads(offline_complete("tag_test", [], _hint())) == {"tag": "demo"}
    finally:
        steps.unregister("tag_test")
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.startswith("extra_steps_pkg")]:
            del sys.modules[name]


def test_a_module_without_a_complete_step_fails_at_import(tmp_path: Path) -> None:
    package = tmp_path / "broken_steps_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "half.py").write_text("PROMPT = 'no STEP here'\n")
    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(StepDefinitionError, match="defines no STEP"):
            steps.discover("broken_steps_pkg")
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.startswith("broken_steps_pkg")]:
            del sys.modules[name]


def summary_parts(**changes: Any) -> dict[str, Any]:
    """The parts of a minimal step that summarizes; `changes` replace any of them."""
    parts: dict[str, Any] = {
        "name": "incomplete",
        "output": SummaryOut,
        "prompt": lambda **f: "",
        "hint": lambda **f: {},
        "offline": _summary_offline,
        "description": "x",
        "example": {"summary": "x", "topics": []},
    }
    return parts | changes


@pytest.mark.parametrize(
    "missing", ["prompt", "hint", "offline", "description", "example", "output", "name"]
)
def test_a_step_missing_a_part_is_refused(missing: str) -> None:
    with pytest.raises(StepDefinitionError):
        Step(**summary_parts(**{missing: None}))


def test_a_nested_output_model_is_inlined_with_every_field_required() -> None:
    class Inner(BaseModel):
        a: int
        b: str | None = None

    class Nested(Out):
        inner: Inner
        many: list[Inner] = []

    schema = steps.response_schema(Nested)
    inner = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": ["string", "null"]}},
        "required": ["a", "b"],
    }
    assert schema == {
        "type": "object",
        "properties": {"inner": inner, "many": {"type": "array", "items": inner}},
        "required": ["inner", "many"],
    }
    assert "$defs" not in json.dumps(schema) and "$ref" not in json.dumps(schema)


def test_a_recursive_output_model_is_refused() -> None:
    class Node(BaseModel):
        children: list[Node] = []

    class Tree(Out):
        root: Node

    with pytest.raises(StepDefinitionError, match="recursive"):
        steps.response_schema(Tree)


def test_two_steps_with_one_name_are_refused(summary_step: Any) -> None:
    with pytest.raises(StepDefinitionError, match="two steps"):
        steps.register(Step(**summary_parts(name="summarize_test", description="duplicate")))


def test_invalid_offline_answer_is_an_llm_error_not_a_generic_reply(settings: Any) -> None:
    settings.OPENAI_API_KEY = ""
    step = steps.register(
        Step(
            **summary_parts(
                name="bad_offline_test",
                offline=lambda hint: {"not": "a summary"},
                description="An offline answer that does not fit the schema.",
            )
        )
    )
    try:
        with pytest.raises(LLMError) as caught:
            llm_complete(step=step.name, messages=[], output=SummaryOut)
        assert caught.value.kind == "invalid_output"
    finally:
        steps.unregister(step.name)


def test_a_step_without_an_example_reply_is_refused() -> None:
    with pytest.raises(StepDefinitionError, match="an example reply is required"):
        Step(**{k: v for k, v in summary_parts(name="no_example").items() if k != "example"})
