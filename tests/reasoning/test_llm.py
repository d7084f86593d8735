"""The LLM gateway, exercised through the real `openai` SDK against a local fake server."""

from __future__ import annotations

import json
import logging
import math
import pickle
from collections.abc import Iterator
from typing import Any

import pytest
from pytest_django.fixtures import Settings

from apps.reasoning.llm import (
    OFFLINE_MODEL,
    LLMError,
    estimate_tokens,
    format_instruction,
    llm_complete,
    llm_is_offline,
    parse_reply,
)
from apps.reasoning.llm.formats import decodable
from apps.reasoning.steps import SCHEMAS as STEP_SCHEMAS
from apps.reasoning.steps.assess import AssessOut
from apps.reasoning.steps.compose import ComposeOut
from apps.reasoning.steps.critique import CritiqueOut
from apps.reasoning.steps.respond import RespondOut
from devtools.fake_llm import (
    Delay,
    Fail,
    FakeLLMServer,
    NoUsage,
    WithUsage,
    count_prompt_tokens,
    count_tokens,
)

MESSAGES: list[dict[str, str]] = [
    {"role": "system", "content": "You are the support assistant for Acme."},
    {"role": "user", "content": "Please cancel order 123."},
]

ASSESS_REPLY: dict[str, Any] = {
    "response": "I can cancel order 123 for you.",
    "confidence": 7,
    "tool_call": "cancel_order",
    "tool_params": {"order_id": "123"},
    "missing_params": [],
    "is_destructive": True,
    "needs_confirmation": True,
    "needs_more_context": [],
}

SEED_PLAIN_TEXT = """I'd be happy to cancel that order for you!

<assessment>
{"confidence": 7, "tool_call": "cancel_order", "tool_params": {"order_id": "123"},
 "missing_params": [], "is_destructive": true, "needs_confirmation": true}
</assessment>"""

REPLIES_BY_STEP: dict[str, tuple[dict[str, Any], type[Any]]] = {
    "respond": ({"response": "Hi!", "tool_call": None, "tool_params": {}}, RespondOut),
    "assess": (ASSESS_REPLY, AssessOut),
    "critique": ({"decision": "PROCEED", "reasoning": "ok", "message": ""}, CritiqueOut),
    "compose": ({"response": "Order 123 is cancelled."}, ComposeOut),
}


@pytest.fixture
def llm(settings: Settings, db: None) -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        settings.OPENAI_BASE_URL = server.base_url
        yield server


def expected_prompt_estimate(messages: list[dict[str, str]]) -> int:
    return sum(math.ceil(len(m["content"]) / 4) + 4 for m in messages)


# -- request shape ------------------------------------------------------------------------------


@pytest.mark.parametrize("step", sorted(REPLIES_BY_STEP))
def test_request_asks_for_the_step_json_schema_and_names_the_step(
    llm: FakeLLMServer, step: str
) -> None:
    reply, output = REPLIES_BY_STEP[step]
    llm.script(step, reply)

    result = llm_complete(step=step, messages=MESSAGES, output=output)

    [request] = llm.requests
    assert request.step == step
    assert request.headers["x-guidedesk-step"] == step
    assert request.response_format == {
        "type": "json_schema",
        "json_schema": {"name": step, "schema": decodable(STEP_SCHEMAS[step]), "strict": False},
    }
    assert request.messages == MESSAGES
    assert request.model == "gpt-4o-mini"
    assert request.body["temperature"] == 0.2
    assert result.parsed == output.model_validate(reply)


def test_parsed_result_and_usage_are_what_the_server_reported(llm: FakeLLMServer) -> None:
    llm.script("assess", ASSESS_REPLY)

    result = llm_complete(step="assess", messages=MESSAGES, output=AssessOut)

    assert result.parsed == AssessOut(**ASSESS_REPLY)
    assert result.raw == json.dumps(ASSESS_REPLY)
    assert result.step == "assess"
    assert result.model == "gpt-4o-mini"
    assert result.prompt_tokens == count_prompt_tokens(MESSAGES)
    assert result.completion_tokens == count_tokens(result.raw)
    assert result.tokens_estimated is False
    assert result.offline is False
    assert result.latency_ms >= 0


def test_reported_usage_is_taken_verbatim(llm: FakeLLMServer) -> None:
    llm.script("respond", WithUsage({"response": "Hi"}, prompt_tokens=1234, completion_tokens=56))

    result = llm_complete(step="respond", messages=MESSAGES, output=RespondOut)

    assert (result.prompt_tokens, result.completion_tokens) == (1234, 56)
    assert result.tokens_estimated is False


def test_missing_usage_is_estimated_and_flagged(llm: FakeLLMServer) -> None:
    raw = json.dumps({"response": "Your order is on its way.", "tool_call": None})
    llm.script("respond", NoUsage(raw))

    result = llm_complete(step="respond", messages=MESSAGES, output=RespondOut)

    assert result.tokens_estimated is True
    assert result.prompt_tokens == expected_prompt_estimate(MESSAGES)
    assert result.completion_tokens == math.ceil(len(raw) / 4)
    assert result.parsed.response == "Your order is on its way."


def test_all_zero_usage_counts_as_no_usage(llm: FakeLLMServer) -> None:
    llm.script("respond", WithUsage({"response": "Hi"}, prompt_tokens=0, completion_tokens=0))

    result = llm_complete(step="respond", messages=MESSAGES, output=RespondOut)

    assert result.tokens_estimated is True
    assert result.prompt_tokens == expected_prompt_estimate(MESSAGES)
    assert result.completion_tokens > 0


def test_estimate_tokens_is_a_quarter_of_the_characters_rounded_up() -> None:
    assert [estimate_tokens(t) for t in ("", "abcd", "abcde", "x" * 400)] == [0, 1, 2, 100]


# -- tolerant parsing through the SDK -----------------------------------------------------------


def test_code_fenced_json_is_accepted(llm: FakeLLMServer) -> None:
    llm.script("assess", "```json\n" + json.dumps(ASSESS_REPLY, indent=2) + "\n```")

    result = llm_complete(step="assess", messages=MESSAGES, output=AssessOut)

    assert result.parsed == AssessOut(**ASSESS_REPLY)


def test_json_embedded_in_prose_is_accepted(llm: FakeLLMServer) -> None:
    text = (
        "Sure, here is my decision: "
        + json.dumps({"decision": "ASK_USER", "reasoning": "no order id", "message": "Which?"})
        + " Let me know {if} you need more."
    )
    llm.script("critique", text)

    result = llm_complete(step="critique", messages=MESSAGES, output=CritiqueOut)

    assert result.parsed == CritiqueOut(
        decision="ASK_USER", reasoning="no order id", message="Which?"
    )


def test_assessment_block_in_plain_text_gives_visible_response(llm: FakeLLMServer) -> None:
    llm.script("assess", SEED_PLAIN_TEXT)

    result = llm_complete(step="assess", messages=MESSAGES, output=AssessOut)

    parsed = result.parsed
    assert parsed.response == "I'd be happy to cancel that order for you!"
    assert "<assessment>" not in parsed.response
    assert parsed.confidence == 7
    assert parsed.tool_call == "cancel_order"
    assert parsed.tool_params == {"order_id": "123"}
    assert parsed.is_destructive is True
    assert parsed.needs_confirmation is True
    assert result.raw == SEED_PLAIN_TEXT


def test_extra_keys_are_ignored(llm: FakeLLMServer) -> None:
    llm.script(
        "critique",
        {"decision": "proceed", "reasoning": "ok", "message": "", "score": 9, "notes": {"a": 1}},
    )

    result = llm_complete(step="critique", messages=MESSAGES, output=CritiqueOut)

    assert result.parsed == CritiqueOut(decision="PROCEED", reasoning="ok", message="")


@pytest.mark.parametrize(
    ("confidence", "expected"), [("7", 7), ("8.6", 9), (None, 1), ("very", 1), (0.6, 1)]
)
def test_confidence_is_coerced(llm: FakeLLMServer, confidence: object, expected: int) -> None:
    llm.script("assess", {**ASSESS_REPLY, "confidence": confidence})

    result = llm_complete(step="assess", messages=MESSAGES, output=AssessOut)

    assert result.parsed.confidence == expected


def test_a_zero_confidence_counts_as_the_lowest(llm: FakeLLMServer) -> None:
    llm.script("assess", {**ASSESS_REPLY, "confidence": 0})

    result = llm_complete(step="assess", messages=MESSAGES, output=AssessOut)

    assert result.parsed.confidence == 1


@pytest.mark.parametrize("confidence", [15, 11, -3])
def test_out_of_range_confidence_breaks_the_contract(
    llm: FakeLLMServer, confidence: object
) -> None:
    llm.script("assess", {**ASSESS_REPLY, "confidence": confidence})

    with pytest.raises(LLMError) as caught:
        llm_complete(step="assess", messages=MESSAGES, output=AssessOut)

    assert caught.value.kind == "invalid_output"
    assert "confidence: Value error, must be between 1 and 10" in caught.value.message


def test_string_null_tool_means_no_tool(llm: FakeLLMServer) -> None:
    llm.script("respond", {"response": "Hello", "tool_call": "null", "tool_params": None})

    result = llm_complete(step="respond", messages=MESSAGES, output=RespondOut)

    assert result.parsed.tool_call is None
    assert result.parsed.tool_params == {}


# -- invalid output -----------------------------------------------------------------------------


def test_malformed_json_is_invalid_output_carrying_raw_and_tokens(llm: FakeLLMServer) -> None:
    raw = '{"response": "Hi", "tool_call": null, "tool_params": {"order_id": "1"} oops'
    llm.script("respond", raw)

    with pytest.raises(LLMError) as caught:
        llm_complete(step="respond", messages=MESSAGES, output=RespondOut)

    error = caught.value
    assert error.kind == "invalid_output"
    assert error.step == "respond"
    assert error.raw == raw
    assert error.prompt_tokens == count_prompt_tokens(MESSAGES)
    assert error.completion_tokens == count_tokens(raw)
    assert error.tokens_estimated is False
    assert error.model == "gpt-4o-mini"


def test_missing_required_decision_is_invalid_output(llm: FakeLLMServer) -> None:
    llm.script("critique", {"reasoning": "looks fine", "message": ""})

    with pytest.raises(LLMError) as caught:
        llm_complete(step="critique", messages=MESSAGES, output=CritiqueOut)

    assert caught.value.kind == "invalid_output"
    assert "decision" in caught.value.message
    assert caught.value.completion_tokens > 0


def test_unknown_decision_is_invalid_output(llm: FakeLLMServer) -> None:
    llm.script("critique", {"decision": "MAYBE", "reasoning": "", "message": ""})

    with pytest.raises(LLMError) as caught:
        llm_complete(step="critique", messages=MESSAGES, output=CritiqueOut)

    assert caught.value.kind == "invalid_output"


def test_empty_reply_is_invalid_output(llm: FakeLLMServer) -> None:
    llm.script("compose", "   ")

    with pytest.raises(LLMError) as caught:
        llm_complete(step="compose", messages=MESSAGES, output=ComposeOut)

    assert caught.value.kind == "invalid_output"


def test_invalid_output_is_logged_as_a_warning(
    llm: FakeLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    llm.script("critique", "not json at all")

    with caplog.at_level(logging.WARNING, logger="apps.reasoning.llm"), pytest.raises(LLMError):
        llm_complete(step="critique", messages=MESSAGES, output=CritiqueOut)

    [record] = [r for r in caplog.records if r.name == "apps.reasoning.llm"]
    assert record.levelno == logging.WARNING
    assert "critique" in record.getMessage()
    assert "invalid_output" in record.getMessage()


# -- transport and HTTP errors ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (429, "rate_limit"),
        (500, "server"),
        (503, "server"),
        (401, "auth"),
        (403, "auth"),
        (400, "bad_request"),
        (404, "bad_request"),
    ],
)
def test_http_errors_map_to_kinds(llm: FakeLLMServer, status: int, kind: str) -> None:
    llm.script("respond", Fail(status=status, retry_after=1 if status == 429 else None))

    with pytest.raises(LLMError) as caught:
        llm_complete(step="respond", messages=MESSAGES, output=RespondOut)

    assert caught.value.kind == kind
    assert caught.value.status_code == status
    assert caught.value.step == "respond"
    assert caught.value.prompt_tokens == 0
    assert len(llm.requests) == 1  # the SDK's own retries are off


def test_slow_answer_is_a_timeout(llm: FakeLLMServer, settings: Settings) -> None:
    settings.LLM_TIMEOUT = 0.5
    llm.script("respond", Delay(3, {"response": "too late"}))

    with pytest.raises(LLMError) as caught:
        llm_complete(step="respond", messages=MESSAGES, output=RespondOut)

    assert caught.value.kind == "timeout"
    assert caught.value.latency_ms > 0  # recorded on the trace even though nothing came back


def test_unreachable_endpoint_is_a_connection_error(settings: Settings) -> None:
    with FakeLLMServer() as server:
        closed_url = server.base_url  # a port that nothing listens on once the server stops
    settings.OPENAI_BASE_URL = closed_url

    with pytest.raises(LLMError) as caught:
        llm_complete(step="respond", messages=MESSAGES, output=RespondOut)

    assert caught.value.kind == "connection"


def test_the_sdk_never_retries_by_itself(llm: FakeLLMServer) -> None:
    """One retry rule (docs/operations.md): the turn retries a failed step once, within its
    deadline; the SDK's own retries are off, so they cannot multiply it."""
    llm.script("respond", Fail(status=500, retry_after=0.05), {"response": "second time lucky"})

    with pytest.raises(LLMError) as caught:
        llm_complete(step="respond", messages=MESSAGES, output=RespondOut)

    assert caught.value.kind == "server"
    assert len(llm.calls("respond")) == 1


def test_client_follows_settings_changes(settings: Settings) -> None:
    with FakeLLMServer() as first, FakeLLMServer() as second:
        first.script("respond", {"response": "from first"})
        second.script("respond", {"response": "from second"})

        settings.OPENAI_BASE_URL = first.base_url
        one = llm_complete(step="respond", messages=MESSAGES, output=RespondOut)
        settings.OPENAI_BASE_URL = second.base_url
        two = llm_complete(step="respond", messages=MESSAGES, output=RespondOut)

    assert (one.parsed.response, two.parsed.response) == ("from first", "from second")
    assert (len(first.requests), len(second.requests)) == (1, 1)


def test_llm_error_survives_pickling() -> None:
    error = LLMError(
        kind="invalid_output",
        step="assess",
        message="bad",
        latency_ms=12,
        raw="{",
        prompt_tokens=10,
        completion_tokens=1,
        model="m",
    )
    error.add_note("while composing the reply")

    copy = pickle.loads(pickle.dumps(error))  # noqa: S301 — our own bytes

    assert (copy.kind, copy.step, copy.raw, copy.prompt_tokens, copy.model) == (
        "invalid_output",
        "assess",
        "{",
        10,
        "m",
    )
    assert str(copy) == str(error)
    assert copy.__notes__ == ["while composing the reply"]


# -- response-format modes ----------------------------------------------------------------------


def test_json_object_mode_sends_json_object_and_a_field_instruction(
    llm: FakeLLMServer, settings: Settings
) -> None:
    settings.LLM_RESPONSE_FORMAT = "json_object"
    llm.script("assess", ASSESS_REPLY)
    messages = [dict(m) for m in MESSAGES]

    result = llm_complete(step="assess", messages=messages, output=AssessOut)

    [request] = llm.requests
    assert request.response_format == {"type": "json_object"}
    assert request.headers["x-guidedesk-step"] == "assess"
    system = request.messages[0]
    assert system["role"] == "system"
    assert system["content"].startswith(MESSAGES[0]["content"])
    assert system["content"].endswith(format_instruction("assess"))
    for field in STEP_SCHEMAS["assess"]["properties"]:
        assert f'"{field}"' in format_instruction("assess")
    assert request.messages[1:] == MESSAGES[1:]
    assert messages == MESSAGES  # the caller's list is not modified
    assert result.parsed == AssessOut(**ASSESS_REPLY)
    assert result.prompt_tokens == count_prompt_tokens(request.messages)


def test_text_mode_sends_no_response_format_and_parses_plain_text(
    llm: FakeLLMServer, settings: Settings
) -> None:
    settings.LLM_RESPONSE_FORMAT = "text"
    llm.script("assess", NoUsage(SEED_PLAIN_TEXT))

    result = llm_complete(step="assess", messages=MESSAGES, output=AssessOut)

    [request] = llm.requests
    assert "response_format" not in request.body
    assert request.headers["x-guidedesk-step"] == "assess"
    assert request.messages[0]["content"].endswith(format_instruction("assess"))
    assert result.parsed.response == "I'd be happy to cancel that order for you!"
    assert result.parsed.tool_call == "cancel_order"
    # The estimate covers what was actually sent, instruction line included.
    assert result.prompt_tokens == expected_prompt_estimate(request.messages)


def test_instruction_is_a_system_message_when_the_prompt_has_none(
    llm: FakeLLMServer, settings: Settings
) -> None:
    settings.LLM_RESPONSE_FORMAT = "json_object"
    llm.script("critique", {"decision": "ESCALATE", "reasoning": "", "message": "human"})

    llm_complete(step="critique", messages=MESSAGES[1:], output=CritiqueOut)

    [request] = llm.requests
    assert request.messages == [
        {"role": "system", "content": format_instruction("critique")},
        *MESSAGES[1:],
    ]
    assert "one of PROCEED, ASK_USER, ESCALATE" in format_instruction("critique")


# -- offline demo model -------------------------------------------------------------------------


def test_offline_mode_makes_no_http_call(llm: FakeLLMServer, settings: Settings) -> None:
    settings.OPENAI_API_KEY = ""

    result = llm_complete(
        step="respond", messages=MESSAGES, output=RespondOut, offline_hint={"tool": None}
    )

    assert llm_is_offline() is True
    assert llm.requests == []
    assert result.offline is True
    assert result.model == OFFLINE_MODEL
    assert isinstance(result.parsed, RespondOut)
    assert result.parsed.response
    assert result.tokens_estimated is True
    assert result.prompt_tokens == expected_prompt_estimate(MESSAGES)
    assert result.completion_tokens == estimate_tokens(result.raw)


def test_online_when_a_key_is_set(settings: Settings) -> None:
    settings.OPENAI_API_KEY = "sk-something"

    assert llm_is_offline() is False


# -- parse_reply edge cases (pure function) -----------------------------------------------------


def test_assessment_json_with_its_own_response_wins_over_visible_text() -> None:
    text = 'Visible text.\n<assessment>{"response": "From JSON", "confidence": 9}</assessment>'

    parsed = parse_reply("assess", text, AssessOut)

    assert parsed.response == "From JSON"
    assert parsed.confidence == 9


def test_seed_template_comments_and_trailing_commas_are_forgiven() -> None:
    text = """Done!
<assessment>
{
  "confidence": 8,           // 1-10, how confident are you in this response?
  "tool_call": null,         // or null if no tool
  "tool_params": {"url": "https://acme.test/a"},
  "is_destructive": false,
}
</assessment>"""

    parsed = parse_reply("assess", text, AssessOut)

    assert parsed.response == "Done!"
    assert parsed.confidence == 8
    assert parsed.tool_params == {"url": "https://acme.test/a"}  # "//" inside a string kept


def test_truncated_reply_does_not_parse_as_a_nested_object() -> None:
    text = '{"decision": "PROCEED", "details": {"decision": "ESCALATE"}'

    with pytest.raises(LLMError) as caught:
        parse_reply("critique", text, CritiqueOut)

    assert caught.value.kind == "invalid_output"


def test_prose_placeholder_braces_before_the_json_are_skipped() -> None:
    text = 'I used the {order_id} template. {"response": "Cancelled."}'

    assert parse_reply("compose", text, ComposeOut).response == "Cancelled."


def test_prose_without_json_is_invalid_output() -> None:
    with pytest.raises(LLMError) as caught:
        parse_reply("respond", "Sure, I can help with that.", RespondOut)

    assert caught.value.kind == "invalid_output"
    assert caught.value.raw == "Sure, I can help with that."
