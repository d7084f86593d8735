"""The model's context window: every step's prompt + max_tokens fits inside it. History and
notes shrink first (oldest history first); the business basics and the current customer
message never do; a step that still cannot fit fails before any HTTP call, and says so."""

from __future__ import annotations

from typing import Any

import pytest

from apps.billing.models import ModelPrice
from apps.escalations.models import Escalation
from apps.reasoning.llm import (
    MIN_COMPLETION_TOKENS,
    LLMError,
    context_window,
    estimate_tokens,
    llm_complete,
)
from apps.reasoning.models import ReasoningTrace
from apps.reasoning.steps import respond
from apps.reasoning.steps.respond import RespondOut
from devtools.fake_llm import FakeLLMServer
from tests.factories import ModelPriceFactory
from tests.support.shop import assess

pytestmark = pytest.mark.django_db

BASICS = "Business: Trail Shop\n" + "Returns within 30 days. " * 40  # ≈ 240 tokens
ANSWER: dict[str, Any] = {"response": "30 days.", "tool_call": None, "tool_params": {}}


def history(turns: int) -> list[dict[str, str]]:
    """`turns` earlier exchanges (≈ 50 tokens each message), then the current message."""
    messages: list[dict[str, str]] = []
    for n in range(turns):
        messages.append({"role": "user", "content": f"old question {n} " + "x" * 190})
        messages.append({"role": "assistant", "content": f"old answer {n} " + "y" * 190})
    messages.append({"role": "user", "content": "What is your return policy?"})
    return messages


def prompt(turns: int, notes: str = "") -> list[dict[str, str]]:
    return respond.prompt(context=BASICS, pending="", history=history(turns), notes=notes)


def estimate(messages: list[dict[str, Any]]) -> int:
    return sum(estimate_tokens(m["content"]) + 4 for m in messages)


def test_unknown_window_sends_everything(llm: FakeLLMServer, settings: Any) -> None:
    settings.LLM_CONTEXT_TOKENS = 0
    llm.script("respond", ANSWER)
    messages = prompt(10)

    result = llm_complete(step="respond", messages=messages, output=RespondOut)

    assert llm.requests[0].messages == messages
    assert llm.requests[0].body["max_tokens"] == 800
    assert result.details is None


def test_history_shrinks_oldest_first_and_basics_stay(llm: FakeLLMServer, settings: Any) -> None:
    settings.LLM_CONTEXT_TOKENS = 1600
    llm.script("respond", ANSWER)
    messages = prompt(10, notes="Customers often ask about returns.")
    assert estimate(messages) + 800 > 1600  # would not fit as it is

    result = llm_complete(step="respond", messages=messages, output=RespondOut)

    sent = llm.requests[0].messages
    assert sent[0] == messages[0]  # the system message: rules and business basics
    assert sent[-1] == messages[-1]  # the current customer message
    assert estimate(sent) + 800 <= 1600
    assert llm.requests[0].body["max_tokens"] == 800
    # What was left out is the oldest history: the newest exchanges and the notes remain.
    kept = [m["content"] for m in sent]
    assert "old answer 9 " + "y" * 190 in kept
    assert "old question 0 " + "x" * 190 not in kept
    assert any("Customers often ask about returns." in text for text in kept)
    assert result.details is not None
    context = result.details["context"]
    assert context["window"] == 1600 and context["dropped_messages"] == len(messages) - len(sent)
    assert context["prompt_tokens_estimated"] == estimate(sent)


def test_notes_go_after_all_the_old_history(llm: FakeLLMServer, settings: Any) -> None:
    settings.LLM_CONTEXT_TOKENS = 800 + estimate(prompt(0)) + 10
    llm.script("respond", ANSWER)
    messages = prompt(3, notes="A long note. " * 100)

    llm_complete(step="respond", messages=messages, output=RespondOut)

    sent = llm.requests[0].messages
    assert sent == [messages[0], messages[-1]]


def test_max_tokens_is_capped_to_what_is_left(llm: FakeLLMServer, settings: Any) -> None:
    basics_only = estimate(prompt(0))
    settings.LLM_CONTEXT_TOKENS = basics_only + 300
    llm.script("respond", ANSWER)

    result = llm_complete(step="respond", messages=prompt(2), output=RespondOut)

    assert llm.requests[0].messages == prompt(0)
    assert llm.requests[0].body["max_tokens"] == 300
    assert result.details is not None and result.details["context"]["max_tokens"] == 300


def test_a_step_that_cannot_fit_fails_without_a_call(llm: FakeLLMServer, settings: Any) -> None:
    settings.LLM_CONTEXT_TOKENS = estimate(prompt(0)) + MIN_COMPLETION_TOKENS - 1

    with pytest.raises(LLMError) as caught:
        llm_complete(step="respond", messages=prompt(4), output=RespondOut)

    assert caught.value.kind == "context_window"
    assert "context window is" in caught.value.message
    assert "(estimated)" in caught.value.message
    assert caught.value.details["context"]["dropped_messages"] == 8
    assert llm.requests == []


def test_the_instruction_of_a_json_object_form_is_counted(
    llm: FakeLLMServer, settings: Any
) -> None:
    settings.LLM_RESPONSE_FORMAT = "json_object"
    settings.LLM_CONTEXT_TOKENS = 800 + estimate(prompt(0)) + 5
    llm.script("respond", ANSWER)

    llm_complete(step="respond", messages=prompt(0), output=RespondOut)

    request = llm.requests[0]
    # The format instruction did not fit beside a full reply: max_tokens shrank instead.
    assert estimate(request.messages) + request.body["max_tokens"] <= settings.LLM_CONTEXT_TOKENS
    assert request.body["max_tokens"] < 800


def test_the_model_price_window_wins_over_the_setting(settings: Any) -> None:
    settings.LLM_CONTEXT_TOKENS = 8192
    settings.LLM_MODEL = "smollm2-135m"
    assert context_window() == 8192
    price = ModelPriceFactory(model="smollm2-135m", context_tokens=4096)
    assert context_window() == 4096
    price.context_tokens = None
    price.save()
    assert context_window() == 8192
    settings.LLM_CONTEXT_TOKENS = 0
    assert context_window() is None
    ModelPrice.objects.filter(pk=price.pk).delete()


def test_a_turn_shrinks_its_history_and_answers(chat, llm: FakeLLMServer, settings: Any) -> None:
    for n in range(3):
        llm.script("assess", assess(response=f"answer {n}", confidence=9))
        chat.say(f"question {n}: " + "z" * 400)
    first = llm.calls("assess")[-1]
    # Room for the system message, the new question and one older message at most.
    settings.LLM_CONTEXT_TOKENS = estimate(first.messages[:1]) + 800 + 130
    llm.script("assess", assess(response="30 days.", confidence=9))

    [reply] = chat.say("What is your return policy?")

    assert reply.text == "30 days."
    sent = llm.calls("assess")[-1]
    assert sent.messages[0]["content"] == first.messages[0]["content"]  # the basics
    assert sent.messages[-1]["content"] == "What is your return policy?"
    assert estimate(sent.messages) + sent.body["max_tokens"] <= settings.LLM_CONTEXT_TOKENS
    trace = ReasoningTrace.objects.unscoped("test checks the database directly").latest("pk")
    step = trace.steps.get(name="assess")
    assert step.output["context"]["dropped_messages"] >= 1
    assert len(sent.messages) < len(first.messages)


def test_a_turn_that_cannot_fit_hands_off_and_the_trace_says_why(
    chat, llm: FakeLLMServer, settings: Any
) -> None:
    settings.LLM_CONTEXT_TOKENS = 200  # the system prompt alone is bigger

    replies = chat.say("What is your return policy?")

    assert [r.kind for r in replies] == ["handoff"]
    assert llm.requests == []  # no HTTP call, and no retry of something that cannot fit
    trace = ReasoningTrace.objects.unscoped("test checks the database directly").get()
    [step] = trace.steps.filter(name="assess")
    assert step.error.startswith("context_window: the prompt needs about ")
    assert step.output["context"]["window"] == 200
    escalation = Escalation.objects.unscoped("test checks the database directly").get()
    assert escalation.reason == "llm_failure" and "context_window" in escalation.detail
