"""A provider that refuses a response_format: the gateway falls back to the next form in the
same call and remembers what worked, per base URL and model (in the process and the cache).
Through the real `openai` SDK against the fake server, which refuses like llama-cpp-python."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import cache

from apps.reasoning.llm import (
    LLMError,
    forget_response_formats,
    llm_complete,
    remembered_response_format,
    response_format_refusals,
)
from apps.reasoning.llm.formats import _format_cache_key, _provider_key
from apps.reasoning.steps import SCHEMAS
from apps.reasoning.steps.assess import AssessOut
from apps.reasoning.steps.respond import RespondOut
from devtools.fake_llm import Fail, FakeLLMServer

MESSAGES: list[dict[str, str]] = [
    {"role": "system", "content": "You are the support assistant for Acme."},
    {"role": "user", "content": "What is your return policy?"},
]
ANSWER: dict[str, Any] = {"response": "30 days.", "tool_call": None, "tool_params": {}}

# What providers answer to a json_schema response_format they do not support (400 variants).
OPENAI_400 = (
    "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model."
)
VLLM_400 = (
    "1 validation error for ChatCompletionRequest\nresponse_format.json_schema: Field required"
)
OLLAMA_400 = 'invalid format: expected "json" or a JSON schema (json_schema)'


@pytest.fixture
def auto(llm: FakeLLMServer, settings: Any) -> FakeLLMServer:
    settings.LLM_RESPONSE_FORMAT = "auto"
    return llm


def test_a_server_that_500s_on_json_schema_costs_one_refused_call_then_is_remembered(
    auto: FakeLLMServer,
) -> None:
    auto.refuse("json_schema")  # llama-cpp-python: HTTP 500 naming response_format
    auto.script("respond", ANSWER, ANSWER, ANSWER)

    first = llm_complete(step="respond", messages=MESSAGES, output=RespondOut)

    refused, used = auto.requests
    assert refused.refused and refused.form == "json_schema"
    assert not used.refused and used.form == "json_object+schema"
    assert used.response_format == {"type": "json_object", "schema": SCHEMAS["respond"]}
    # The schema is described in the system line too (the model reads it; the server decodes).
    assert "Reply with a single JSON object" in used.messages[0]["content"]
    assert first.parsed.response == "30 days."
    assert first.details == {
        "response_format": {
            "asked": "json_schema",
            "used": "json_object+schema",
            "refused": ["json_schema"],
        }
    }
    assert response_format_refusals() == 1
    assert remembered_response_format() == "json_object+schema"

    # The second call in this process goes straight to the form that worked.
    second = llm_complete(step="respond", messages=MESSAGES, output=RespondOut)
    assert [r.form for r in auto.requests[2:]] == ["json_object+schema"]
    assert second.details is None
    assert response_format_refusals() == 1

    # Another process (this one's memory gone) finds it in Django's cache.
    forget_response_formats()
    llm_complete(step="respond", messages=MESSAGES, output=RespondOut)
    assert [r.form for r in auto.requests[3:]] == ["json_object+schema"]
    assert not any(r.refused for r in auto.requests[2:])
    assert response_format_refusals() == 0


@pytest.mark.parametrize("message", [OPENAI_400, VLLM_400, OLLAMA_400])
def test_a_400_naming_the_response_format_falls_back_too(auto: FakeLLMServer, message: str) -> None:
    auto.refuse("json_schema", status=400, message=message)
    auto.script("respond", ANSWER)

    result = llm_complete(step="respond", messages=MESSAGES, output=RespondOut)

    assert [(r.form, r.refused) for r in auto.requests] == [
        ("json_schema", True),
        ("json_object+schema", False),
    ]
    assert result.parsed.response == "30 days."


def test_the_chain_goes_down_to_text(auto: FakeLLMServer) -> None:
    auto.refuse(
        "json_schema",
        "json_object+schema",
        "json_object",
        status=422,
        message="response_format is not supported",
    )
    auto.script("respond", '{"response": "30 days.", "tool_call": null}')

    result = llm_complete(step="respond", messages=MESSAGES, output=RespondOut)

    assert [r.form for r in auto.requests] == [
        "json_schema",
        "json_object+schema",
        "json_object",
        "text",
    ]
    assert "response_format" not in auto.requests[-1].body
    assert result.details is not None
    assert result.details["response_format"]["refused"] == [
        "json_schema",
        "json_object+schema",
        "json_object",
    ]
    assert remembered_response_format() == "text"


def test_an_explicit_setting_is_where_the_chain_starts(auto: FakeLLMServer, settings: Any) -> None:
    settings.LLM_RESPONSE_FORMAT = "json_object"
    auto.script("respond", ANSWER)

    llm_complete(step="respond", messages=MESSAGES, output=RespondOut)

    [request] = auto.requests
    assert request.response_format == {"type": "json_object"}


def test_an_unknown_setting_is_refused(auto: FakeLLMServer, settings: Any) -> None:
    settings.LLM_RESPONSE_FORMAT = "xml"
    with pytest.raises(ValueError, match="LLM_RESPONSE_FORMAT"):
        llm_complete(step="respond", messages=MESSAGES, output=RespondOut)


def test_memory_is_per_base_url_and_model(auto: FakeLLMServer, settings: Any) -> None:
    auto.refuse("json_schema")
    auto.script("respond", ANSWER, ANSWER)
    llm_complete(step="respond", messages=MESSAGES, output=RespondOut)
    assert remembered_response_format() == "json_object+schema"

    settings.LLM_MODEL = "another-model"
    assert remembered_response_format() is None
    auto.accept_all_formats()  # the other model takes json_schema: no detection needed
    llm_complete(step="respond", messages=MESSAGES, output=RespondOut)
    assert auto.requests[-1].form == "json_schema"


@pytest.mark.parametrize(
    ("status", "message", "kind"),
    [
        (500, "the GPU fell over", "server"),
        (400, "messages: too many", "bad_request"),
        (429, "response_format rate limited", "rate_limit"),
    ],
)
def test_other_errors_are_not_a_capability(
    auto: FakeLLMServer, status: int, message: str, kind: str
) -> None:
    auto.script("respond", Fail(status=status, message=message))

    with pytest.raises(LLMError) as caught:
        llm_complete(step="respond", messages=MESSAGES, output=RespondOut)

    assert caught.value.kind == kind
    assert len(auto.requests) == 1
    assert remembered_response_format() is None


def test_a_failure_after_the_fallback_carries_it_to_the_trace(auto: FakeLLMServer) -> None:
    auto.refuse("json_schema")
    auto.script("assess", Fail(status=503, message="overloaded"))

    with pytest.raises(LLMError) as caught:
        llm_complete(step="assess", messages=MESSAGES, output=AssessOut)

    assert caught.value.kind == "server"
    assert caught.value.details["response_format"]["used"] == "json_object+schema"
    # The refusal is a fact about the provider, remembered at once: the next call (after a slow
    # server timed the fallback out, say) does not ask for the refused form again.
    assert remembered_response_format() == "json_object+schema"
    auto.script("assess", Fail(status=503, message="overloaded"))
    with pytest.raises(LLMError):
        llm_complete(step="assess", messages=MESSAGES, output=AssessOut)
    assert [r.form for r in auto.requests] == [
        "json_schema",
        "json_object+schema",
        "json_object+schema",
    ]
    assert response_format_refusals() == 1


def test_the_cache_key_is_shared_and_survives_a_cache_outage(
    auto: FakeLLMServer, monkeypatch: Any
) -> None:
    auto.refuse("json_schema")
    auto.script("respond", ANSWER)
    llm_complete(step="respond", messages=MESSAGES, output=RespondOut)
    key = _format_cache_key(_provider_key())
    assert cache.get(key) == "json_object+schema"

    forget_response_formats()

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("cache down")

    monkeypatch.setattr(cache, "get", broken)
    assert remembered_response_format() is None  # detection would simply run again
