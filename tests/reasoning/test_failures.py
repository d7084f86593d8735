"""LLM and webhook failures end in a retry, a fallback or an escalation — never an exception
reaching the caller and never a lost customer message."""

from __future__ import annotations

import pytest
from django.core import mail

from apps.conversations.models import Message
from apps.escalations.models import Escalation
from apps.reasoning.models import ReasoningTrace
from apps.tools.models import ToolExecution
from devtools.fake_llm import Delay, Fail
from tests.support.fake_webhook import Reply
from tests.support.shop import assess, critique

pytestmark = pytest.mark.django_db
ORDER = {"order_id": "TH-12345"}


def assert_escalated(chat, reason: str) -> Escalation:
    chat.conversation.refresh_from_db()
    assert chat.conversation.status == "escalated"
    escalation = Escalation.objects.get(conversation=chat.conversation)
    assert escalation.reason == reason
    handoff = chat.all(kind="handoff")
    assert len(handoff) == 1 and handoff[0].visibility == "visible"
    return escalation


@pytest.mark.parametrize(
    "failure",
    [
        "this is not json at all",
        Fail(429, retry_after=0),
        Fail(500),
        Delay(2, then=assess(response="too late")),
    ],
    ids=["malformed", "429", "500", "timeout"],
)
def test_llm_failure_twice_escalates_and_keeps_the_message(chat, llm, settings, failure):
    settings.LLM_TIMEOUT = 0.5
    llm.script("assess", failure, failure)
    replies = chat.say("Where is my parcel?")
    assert (
        Message.objects.unscoped("test checks the database directly")
        .filter(role="user", text="Where is my parcel?")
        .count()
        == 1
    )
    assert [r.kind for r in replies] == ["handoff"]
    assert_escalated(chat, "llm_failure")
    assert len(llm.calls("assess")) == 2  # retried once
    trace = ReasoningTrace.objects.unscoped("test checks the database directly").get()
    assert trace.escalated and trace.status == "done"
    assert [s.error != "" for s in trace.steps.filter(name="assess")] == [True, True]


def test_llm_failure_once_is_retried_transparently(chat, llm):
    llm.script("assess", "```json\n{broken", assess(response="Hello!"))
    [reply] = chat.say("hi")
    assert reply.text == "Hello!"
    assert not Escalation.objects.unscoped("test checks the database directly").exists()


def test_failed_critique_is_retried_once_then_escalates(chat, llm, webhook):
    llm.script("assess", assess(tool_call="cancel_order", tool_params=ORDER))
    llm.script("critique", Fail(500), "{not json")
    chat.say("cancel TH-12345")
    escalation = assert_escalated(chat, "llm_failure")
    assert "critique" in escalation.detail
    assert len(llm.calls("critique")) == 2
    assert webhook.requests == []


def test_critique_recovers_on_retry(chat, llm):
    llm.script("assess", assess(tool_call="cancel_order", tool_params=ORDER))
    llm.script("critique", Fail(503), critique("PROCEED"))
    [reply] = chat.say("cancel TH-12345")
    assert reply.kind == "confirmation_request"


def test_critique_escalate_hands_over(chat, llm, webhook):
    llm.script("assess", assess(tool_call="cancel_order", tool_params=ORDER))
    llm.script("critique", critique("ESCALATE", "Customer disputes a charge"))
    chat.say("cancel TH-12345, and I'm disputing the charge with my bank")
    escalation = assert_escalated(chat, "policy")
    assert escalation.detail == "Customer disputes a charge"
    [email] = mail.outbox
    assert email.to == [chat.client.support_email]
    assert str(chat.conversation.public_id) in email.body


def test_webhook_500_then_success_uses_one_idempotency_key(chat, llm, webhook):
    llm.script("assess", assess(tool_call="get_order_status", tool_params=ORDER, confidence=9))
    webhook.script(Reply(status=500, json={"error": "busy"}), Reply.ok({"status": "shipped"}))
    llm.script("compose", {"response": "It shipped."})
    [reply] = chat.say("status of TH-12345")
    assert reply.text == "It shipped."
    first, second = webhook.requests
    assert first.headers["idempotency-key"] == second.headers["idempotency-key"]
    execution = ToolExecution.objects.unscoped("test checks the database directly").get()
    assert execution.attempts == 2 and execution.status == "succeeded"


def test_webhook_down_escalates_as_tool_failure(chat, llm, webhook):
    llm.script("assess", assess(tool_call="get_order_status", tool_params=ORDER, confidence=9))
    webhook.default(Reply(status=503, json={"error": "down"}))
    chat.say("status of TH-12345")
    assert_escalated(chat, "tool_failure")
    assert (
        ToolExecution.objects.unscoped("test checks the database directly").get().status == "failed"
    )
    assert not llm.calls("compose")


def test_business_refusal_is_explained_not_escalated(chat, llm, webhook):
    llm.script("assess", assess(tool_call="get_order_status", tool_params=ORDER, confidence=9))
    webhook.script(Reply.fail("Order TH-12345 not found"))
    llm.script("compose", {"response": "I couldn't find order TH-12345."})
    [reply] = chat.say("status of TH-12345")
    assert reply.text == "I couldn't find order TH-12345."
    assert "not found" in llm.calls("compose")[0].prompt_text
    assert not Escalation.objects.unscoped("test checks the database directly").exists()


def test_compose_failure_still_reports_the_result(chat, llm, webhook):
    llm.script("assess", assess(tool_call="get_order_status", tool_params=ORDER, confidence=9))
    webhook.script(Reply.ok({"status": "shipped"}))
    llm.script("compose", Fail(500), Fail(500))
    [reply] = chat.say("status of TH-12345")
    assert (
        reply.text
        == "Done: I've completed “Get order status” for you. The details: status: shipped."
    )
    assert not Escalation.objects.unscoped("test checks the database directly").exists()


def test_per_turn_token_cap_stops_llm_calls(chat, llm, settings):
    """The cap is a ceiling: a call is not made if its prompt plus the largest possible reply
    could take the turn past it."""
    settings.LLM_MAX_COMPLETION_TOKENS = 100
    chat.client.plan.per_turn_token_cap = 700
    chat.client.plan.save()
    llm.script("assess", assess(confidence=5, needs_more_context=["faqs"]))
    chat.say("What are your FAQs?")
    assert len(llm.requests) == 1  # the second assess (with the FAQs) could exceed the cap
    assert llm.requests[0].body["max_tokens"] == 100
    trace = ReasoningTrace.objects.unscoped("test checks the database directly").get()
    assert trace.prompt_tokens + trace.completion_tokens <= 700
    assert_escalated(chat, "usage_limit")


def test_a_tiny_cap_makes_no_call_at_all(chat, llm):
    chat.client.plan.per_turn_token_cap = 10
    chat.client.plan.save()
    chat.say("What are your FAQs?")
    assert llm.requests == []
    assert_escalated(chat, "usage_limit")


def test_cap_reached_after_a_tool_ran_still_reports_the_result(chat, llm, webhook, settings):
    settings.LLM_MAX_COMPLETION_TOKENS = 100
    chat.client.plan.per_turn_token_cap = 700
    chat.client.plan.save()
    llm.script("assess", assess(tool_call="get_order_status", tool_params=ORDER, confidence=9))
    webhook.script(Reply.ok({"status": "shipped"}))
    [reply] = chat.say("status of TH-12345")
    assert len(webhook.requests) == 1
    assert "status: shipped" in reply.text  # compose would pass the cap: the result still shows
    assert not Escalation.objects.unscoped("test checks the database directly").exists()


def test_monthly_budget_reached_makes_no_llm_call(chat, llm):
    chat.client.plan.monthly_token_budget = 1
    chat.client.plan.save()
    llm.script("assess", assess(response="Hi"))
    chat.say("hello")  # uses tokens, under budget before the call
    replies = chat.say("hello again")
    assert len(llm.requests) == 1
    assert replies[-1].kind == "handoff"
    assert_escalated(chat, "usage_limit")
