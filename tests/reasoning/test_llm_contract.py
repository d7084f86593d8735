"""Strict output checks: a reply that breaks its step's contract (or is cut off) is a failed
attempt, retried once with the reason quoted back to the model, then the step's failure path.
And the schema sent with the chat steps names only the client's enabled tools."""

from __future__ import annotations

from typing import Any

import pytest

from apps.escalations.models import Escalation
from apps.reasoning.llm import LLMError, llm_complete
from apps.reasoning.models import ReasoningTrace
from apps.reasoning.steps import SCHEMAS
from apps.reasoning.steps.assess import AssessOut
from apps.reasoning.steps.compose import ComposeOut
from apps.reasoning.steps.feedback import FeedbackOut
from apps.reasoning.steps.improve import ImproveOut
from apps.reasoning.steps.reason_step import ReasonStepOut
from apps.reasoning.steps.respond import RespondOut
from devtools.fake_llm import FakeLLMServer, Truncated
from tests.support.shop import assess, script_order_lookup

pytestmark = pytest.mark.django_db

MESSAGES: list[dict[str, str]] = [
    {"role": "system", "content": "You are the support assistant for Acme."},
    {"role": "user", "content": "What is your return policy?"},
]


def traces() -> Any:
    return ReasoningTrace.objects.unscoped("test checks the database directly")


# -- the contracts, one by one, at the gateway ---------------------------------------------------


@pytest.mark.parametrize(
    ("step", "output", "reply", "problem"),
    [
        ("respond", RespondOut, {"response": "", "tool_call": None}, "response is empty"),
        ("assess", AssessOut, {"response": "  ", "confidence": 8}, "response is empty"),
        ("synthesize", AssessOut, {"response": ""}, "response is empty"),
        ("compose", ComposeOut, {"response": " "}, "response"),
        ("improve", ImproveOut, {}, "response: Value error, must not be empty"),
        ("feedback", FeedbackOut, {"feedback": ""}, "feedback: Value error, must not be empty"),
        ("reason_step", ReasonStepOut, {"content": "", "status": "continue"}, "content"),
        (
            "respond",
            RespondOut,
            {"response": "Sure.", "tool_call": {"name": "cancel_order"}},
            "tool_call: Value error, must be a tool name (a string) or null, not dict",
        ),
        ("assess", AssessOut, {"response": "Hi", "confidence": 42}, "confidence"),
        ("critique", None, {"reasoning": "fine"}, "decision"),
    ],
)
def test_a_reply_breaking_the_contract_is_invalid_output(
    llm: FakeLLMServer, step: str, output: Any, reply: dict[str, Any], problem: str
) -> None:
    from apps.reasoning.steps import get

    llm.script(step, reply)
    with pytest.raises(LLMError) as caught:
        llm_complete(step=step, messages=MESSAGES, output=output or get(step).output)
    assert caught.value.kind == "invalid_output"
    assert problem in caught.value.message


def test_tool_call_object_is_never_turned_into_a_string(llm: FakeLLMServer) -> None:
    llm.script("assess", {"response": "", "tool_call": {"name": "cancel_order"}})
    with pytest.raises(LLMError) as caught:
        llm_complete(step="assess", messages=MESSAGES, output=AssessOut)
    assert "{'name'" not in caught.value.message


def test_missing_confidence_counts_as_the_lowest(llm: FakeLLMServer) -> None:
    llm.script("assess", {"response": "30 days."})
    result = llm_complete(step="assess", messages=MESSAGES, output=AssessOut)
    assert result.parsed.confidence == 1


def test_an_empty_answer_asking_for_more_context_is_an_answer(llm: FakeLLMServer) -> None:
    llm.script("assess", {"response": "", "needs_more_context": ["policies.returns"]})
    result = llm_complete(step="assess", messages=MESSAGES, output=AssessOut)
    assert result.parsed.needs_more_context == ["policies.returns"]


def test_a_truncated_reply_is_reported_with_its_token_count(llm: FakeLLMServer) -> None:
    llm.script("respond", Truncated('{"response": "Our policy is that you can return'))
    with pytest.raises(LLMError) as caught:
        llm_complete(step="respond", messages=MESSAGES, output=RespondOut)
    error = caught.value
    assert error.kind == "truncated"
    assert "800 completion tokens" in error.message and "800-token limit" in error.message
    assert error.completion_tokens == 800  # spent, and metered
    assert error.raw.startswith('{"response"')


def test_a_truncated_reply_that_happens_to_parse_is_still_truncated(llm: FakeLLMServer) -> None:
    llm.script("respond", Truncated({"response": "Hi"}, completion_tokens=7))
    with pytest.raises(LLMError) as caught:
        llm_complete(step="respond", messages=MESSAGES, output=RespondOut)
    assert caught.value.kind == "truncated" and "7 completion tokens" in caught.value.message


# -- the turn: retried once with the reason quoted, then the failure path ------------------------


def test_an_empty_assess_is_retried_with_the_error_quoted(chat, llm: FakeLLMServer) -> None:
    llm.script(
        "assess",
        {"response": "", "confidence": 5},
        assess(response="Returns are accepted within 30 days.", confidence=9),
    )

    [reply] = chat.say("What is your return policy?")

    assert reply.text == "Returns are accepted within 30 days."
    first, second = llm.calls("assess")
    assert "Your reply was not valid" not in first.prompt_text
    quoted = second.messages[-1]
    assert quoted["role"] == "user"
    assert quoted["content"].startswith("Your reply was not valid: ")
    assert "response is empty and there is no tool_call" in quoted["content"]
    assert second.messages[:-1] == first.messages
    steps = list(traces().get().steps.filter(name="assess").order_by("index"))
    assert steps[0].error.startswith("invalid_output: ")
    assert steps[1].error == "" and steps[1].output["correction"] == quoted["content"]
    assert not Escalation.objects.unscoped("test checks the database directly").exists()


def test_an_object_tool_call_is_retried_with_the_error_quoted(
    standard_shop, llm: FakeLLMServer, django_capture_on_commit_callbacks
) -> None:
    from tests.support.shop import Chat

    chat = Chat.new(standard_shop, django_capture_on_commit_callbacks)
    llm.script(
        "respond",
        {"response": "Sure.", "tool_call": {"name": "get_order_status"}, "tool_params": {}},
        {"response": "Which order is it?", "tool_call": None, "tool_params": {}},
    )

    [reply] = chat.say("Where is my order?")

    assert reply.text == "Which order is it?"
    retry = llm.calls("respond")[1]
    assert "tool_call: Value error, must be a tool name" in retry.messages[-1]["content"]


def test_invalid_twice_takes_the_failure_path(chat, llm: FakeLLMServer) -> None:
    llm.script("assess", {"response": ""}, {"response": "", "confidence": 3})

    replies = chat.say("What is your return policy?")

    assert [r.kind for r in replies] == ["handoff"]
    escalation = Escalation.objects.unscoped("test checks the database directly").get()
    assert escalation.reason == "llm_failure"
    assert "invalid_output" in escalation.detail


def test_a_truncated_reply_is_retried_with_the_cut_quoted(chat, llm: FakeLLMServer) -> None:
    llm.script(
        "assess",
        Truncated('{"response": "Well, let me tell you a long story'),
        assess(response="30 days.", confidence=9),
    )

    [reply] = chat.say("What is your return policy?")

    assert reply.text == "30 days."
    quoted = llm.calls("assess")[1].messages[-1]["content"]
    assert quoted.startswith("Your reply was cut off: the reply reached the 800-token limit")
    step = traces().get().steps.filter(name="assess").order_by("index").first()
    assert step is not None and step.error.startswith("truncated: ")
    assert step.completion_tokens == 800


# -- the tool-name enum ----------------------------------------------------------------------------


def test_the_chat_steps_schema_lists_only_enabled_tools(chat, llm: FakeLLMServer) -> None:
    llm.script("assess", assess(response="30 days.", confidence=9))

    chat.say("What is your return policy?")

    [request] = llm.calls("assess")
    assert request.json_schema is not None
    tool_call = request.json_schema["properties"]["tool_call"]
    # No `type` beside the enum: llama.cpp's grammar would drop the enum for a list type.
    assert "type" not in tool_call
    # The shop's enabled tools; the disabled gift_card_balance is not offered.
    assert tool_call["enum"] == [
        "cancel_order",
        "get_order_status",
        "update_shipping_address",
        None,
    ]
    # The registered schema stays as it was.
    assert "enum" not in SCHEMAS["assess"]["properties"]["tool_call"]


def test_the_enum_reaches_the_system_line_when_json_schema_is_refused(
    chat, llm: FakeLLMServer, settings: Any
) -> None:
    settings.LLM_RESPONSE_FORMAT = "auto"
    llm.refuse("json_schema")
    llm.script("assess", assess(response="30 days.", confidence=9))

    chat.say("What is your return policy?")

    refused, used = llm.calls("assess")
    assert refused.refused
    assert used.response_format is not None
    assert used.response_format["schema"]["properties"]["tool_call"]["enum"][-1] is None
    assert (
        '"tool_call" (one of cancel_order, get_order_status, update_shipping_address, null'
        in used.messages[0]["content"]
    )


def test_no_enabled_tools_means_tool_call_can_only_be_null(llm: FakeLLMServer) -> None:
    llm.script("respond", {"response": "Hi", "tool_call": None})
    llm_complete(step="respond", messages=MESSAGES, output=RespondOut, tool_names=[])
    schema = llm.requests[0].json_schema
    assert schema is not None
    assert schema["properties"]["tool_call"] == {
        "enum": [None],
        "description": "Name of the tool to call, or null.",
    }


def test_compose_gets_no_tool_enum(chat, llm: FakeLLMServer, webhook) -> None:
    script_order_lookup(llm, webhook, "TH-55555")

    [reply] = chat.say("Where is order TH-55555?")

    assert reply.text == "Order TH-55555 has shipped."
    compose = llm.calls("compose")[0].json_schema
    assert compose == SCHEMAS["compose"]
