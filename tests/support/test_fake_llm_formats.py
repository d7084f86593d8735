"""The fake LLM server refuses response formats the way llama-cpp-python does, and reports
truncated replies (no Django needed)."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from devtools.fake_llm import FakeLLMServer, Truncated

MESSAGES: list[Any] = [{"role": "user", "content": "hello"}]
SCHEMA = {"type": "object", "properties": {"response": {"type": "string"}}}
JSON_SCHEMA = {"type": "json_schema", "json_schema": {"name": "respond", "schema": SCHEMA}}


def create(client: openai.OpenAI, **kwargs: Any) -> Any:
    return client.chat.completions.create(model="m", messages=MESSAGES, **kwargs)


def test_a_refused_form_is_a_500_naming_response_format_and_keeps_the_script(
    llm: FakeLLMServer, client: openai.OpenAI
) -> None:
    llm.refuse("json_schema")
    llm.script("respond", {"response": "hi"})

    with pytest.raises(openai.InternalServerError) as caught:
        create(client, response_format=JSON_SCHEMA, extra_headers={"X-GuideDesk-Step": "respond"})
    assert "response_format" in caught.value.message
    assert "Input should be 'text' or 'json_object'" in caught.value.message
    assert llm.pending("respond") == 1  # nothing consumed

    reply = create(
        client,
        response_format={"type": "json_object", "schema": SCHEMA},
        extra_headers={"X-GuideDesk-Step": "respond"},
    )
    assert reply.choices[0].message.content == '{"response": "hi"}'
    assert [(r.form, r.refused) for r in llm.requests] == [
        ("json_schema", True),
        ("json_object+schema", False),
    ]


def test_a_400_refusal_with_its_own_message(llm: FakeLLMServer, client: openai.OpenAI) -> None:
    llm.refuse("json_object", status=400, message="response_format json_object unsupported")
    with pytest.raises(openai.BadRequestError, match="json_object unsupported"):
        create(client, response_format={"type": "json_object"})
    llm.accept_all_formats()
    llm.default("unknown", {"ok": True})
    create(client, response_format={"type": "json_object"})
    assert [r.refused for r in llm.requests] == [True, False]
    assert llm.requests[-1].form == "json_object"


def test_no_response_format_is_the_text_form(llm: FakeLLMServer, client: openai.OpenAI) -> None:
    llm.default("unknown", "plain")
    create(client)
    assert llm.requests[0].form == "text"


def test_truncated_reports_length_and_max_tokens(llm: FakeLLMServer, client: openai.OpenAI) -> None:
    llm.script("unknown", Truncated('{"response": "a long'), Truncated("x", completion_tokens=3))

    first = create(client, max_tokens=64)
    second = create(client)

    assert first.choices[0].finish_reason == "length"
    assert first.usage.completion_tokens == 64
    assert second.choices[0].finish_reason == "length"
    assert second.usage.completion_tokens == 3
