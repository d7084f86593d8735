""" "Deliberate when needed" end to end through the real `openai` SDK against the scripted server:
adaptive first; the deliberative loop only on adaptive's own signals (low confidence, the
model's complaint flag, a critique's ESCALATE, a questioned evaluation); the reason on the
trace and in the debug view; only the turns that deliberated billed at the deliberative
multiplier."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pytest
from django.urls import reverse

from apps.billing.models import UsageRecord
from apps.billing.selectors import DELIBERATION_TRIGGERS
from apps.clients.deliberation import deliberation_settings_set
from apps.clients.modes import get as get_mode
from apps.conversations.models import ConversationStatus
from apps.reasoning.models import ReasoningTrace
from apps.reasoning.modes import mode_that_runs
from apps.reasoning.modes.as_needed import TRIGGERS
from apps.reasoning.rendering import step_html
from tests.factories import UserFactory
from tests.reasoning.test_deliberative import rc, script_loop
from tests.support.shop import Chat, assess, cancel_assess, critique, make_shop

pytestmark = pytest.mark.django_db

ANSWER = "Returns are accepted within 30 days of delivery, with the receipt."


@pytest.fixture
def as_needed_shop(db, webhook):
    client = make_shop("as_needed", webhook.url(), slug="when-needed-shop")
    plan = client.plan
    plan.multipliers = {"adaptive": "1.5", "as_needed": "1.5", "deliberative": "2.5"}
    deliberation_settings_set(plan, refinement_iterations=1, min_steps=2, max_steps=2)
    plan.save()
    return client


@pytest.fixture
def chat(as_needed_shop, django_capture_on_commit_callbacks) -> Chat:
    return Chat.new(as_needed_shop, django_capture_on_commit_callbacks)


def the_trace() -> ReasoningTrace:
    return ReasoningTrace.objects.unscoped("test checks the database directly").get()


def records() -> list[UsageRecord]:
    return list(UsageRecord.objects.unscoped("test checks the database directly").order_by("pk"))


def script_deliberation(llm: Any, response: str = "After thinking it over: " + ANSWER) -> None:
    script_loop(llm, [0.8, 0.9])
    llm.script("synthesize", assess(response=response, confidence=9))
    llm.script("refine_critique", rc(95))


def test_the_mode_is_registered_and_runs_as_itself() -> None:
    assert mode_that_runs("as_needed") == "as_needed"
    mode = get_mode("as_needed")
    assert mode.label.startswith("Deliberate when needed")
    assert len(mode.name) <= 20


def test_the_triggers_the_mode_records_are_the_ones_billing_counts() -> None:
    assert tuple(TRIGGERS) == DELIBERATION_TRIGGERS


def test_a_confident_answer_stays_adaptive_and_bills_at_the_plan_multiplier(chat, llm):
    llm.script("assess", assess(response=ANSWER, confidence=9))

    [reply] = chat.say("How long do I have to return boots?")

    assert reply.text == ANSWER
    assert [r.step for r in llm.requests] == ["assess"]
    trace = the_trace()
    assert trace.mode == "as_needed"
    assert trace.deliberation_trigger == ""
    assert not trace.steps.filter(name="deliberation_trigger").exists()
    [record] = records()
    assert record.mode == "as_needed"
    assert record.multiplier == Decimal("1.500")
    # usage money is rounded half up to 8 places (`billing.services.usage.money`)
    assert record.billed_usd == (record.cost_usd * Decimal("1.5")).quantize(
        Decimal("1e-8"), rounding=ROUND_HALF_UP
    )


def test_low_confidence_deliberates_and_the_whole_turn_bills_as_deliberative(chat, llm):
    llm.script("assess", assess(response="Maybe 30 days?", confidence=5))
    script_deliberation(llm)

    [reply] = chat.say("Can I return boots I wore outside after 40 days?")

    assert reply.text == "After thinking it over: " + ANSWER
    steps = [r.step for r in llm.requests]
    assert steps[0] == "assess"
    assert "reason_step" in steps and "synthesize" in steps
    assert "critique" not in steps  # deliberated at once: no critique spent on the weak draft
    trace = the_trace()
    assert trace.deliberation_trigger == "low_confidence"
    step = trace.steps.get(name="deliberation_trigger")
    assert step.output["trigger"] == "low_confidence"
    assert (step.output["confidence"], step.output["threshold"]) == (5, 7)
    assert trace.steps.filter(name="deliberation_end").exists()
    rows = records()
    assert len(rows) == len(llm.requests)
    assert {r.mode for r in rows} == {"as_needed"}
    # Every call — the adaptive assess included — bills at the deliberative multiplier.
    assert {r.multiplier for r in rows} == {Decimal("2.500")}
    trace.refresh_from_db()
    assert trace.billed_usd == sum((r.billed_usd for r in rows), Decimal(0))
    exact = sum((r.cost_usd for r in rows), Decimal(0)) * Decimal("2.5")
    assert abs(trace.billed_usd - exact) <= Decimal("0.00000001") * len(rows)  # per-call rounding
    assert "Low confidence" in str(step_html(step))


def test_the_threshold_is_the_plans(chat, llm, as_needed_shop):
    plan = as_needed_shop.plan
    plan.deliberate_below_confidence = 5
    plan.save()
    llm.script("assess", assess(response=ANSWER, confidence=6))
    llm.script("critique", critique("PROCEED"))  # adaptive's own trigger (below 7) still holds

    [reply] = chat.say("How long do I have to return boots?")

    assert reply.text == ANSWER
    assert [r.step for r in llm.requests] == ["assess", "critique"]
    assert the_trace().deliberation_trigger == ""


def test_a_complaint_the_model_flags_deliberates_in_any_language(chat, llm):
    llm.script("assess", assess(response="Lo siento mucho.", confidence=9, complaint=True))
    script_deliberation(llm, response="Lo siento mucho: le devolvemos el importe.")

    [reply] = chat.say("¡Me cobraron dos veces y nadie me responde!")

    assert reply.text == "Lo siento mucho: le devolvemos el importe."
    trace = the_trace()
    assert trace.deliberation_trigger == "complaint"
    assert trace.steps.get(name="deliberation_trigger").output["complaint"] is True
    # The flag is asked for in the schema the model receives (no keyword rule of ours).
    schema = str(llm.requests[0].body.get("response_format"))
    assert "complaint" in schema


def test_a_critique_escalate_deliberates_instead_of_handing_over(chat, llm):
    llm.script(
        "assess",
        assess(
            response="I'll change the address.",
            confidence=8,
            tool_call="update_shipping_address",
            tool_params={"order_id": "TH-12345", "address": "1 Main St"},
        ),
    )
    llm.script("critique", critique("ESCALATE", reasoning="the order may have shipped"))
    script_deliberation(llm, response="Let me check first: could you confirm the order number?")

    [reply] = chat.say("Send my order TH-12345 to 1 Main St instead")

    assert reply.text == "Let me check first: could you confirm the order number?"
    trace = the_trace()
    assert trace.deliberation_trigger == "critique_escalate"
    assert trace.steps.get(name="deliberation_trigger").output["detail"]
    assert not trace.escalated
    chat.conversation.refresh_from_db()
    assert chat.conversation.status != ConversationStatus.ESCALATED


def test_an_answer_to_a_confirmation_never_deliberates(chat, llm):
    llm.script("assess", cancel_assess(response="", confidence=9))
    llm.script("critique", critique("PROCEED"))
    chat.say("Cancel order TH-12345")
    llm.reset()
    llm.script("assess", assess(response="", confidence=3))
    llm.script("critique", critique("PROCEED"))
    llm.script("compose", {"response": "Order TH-12345 is cancelled."})

    chat.say("yes")

    steps = [r.step for r in llm.requests]
    assert "reason_step" not in steps
    traces = ReasoningTrace.objects.unscoped("test").order_by("pk")
    assert [t.deliberation_trigger for t in traces] == ["", ""]


LONG = ANSWER + " Worn boots can be exchanged for store credit within the same 30 days."


def evaluate(valid: bool) -> dict[str, Any]:
    return {
        "valid": valid,
        "improved_response": None,
        "improved_confidence": 0,
        "evaluation": "checked against the policy",
    }


@pytest.fixture
def evaluating(as_needed_shop):
    plan = as_needed_shop.plan
    plan.evaluation_enabled = True
    plan.save()
    return as_needed_shop


def test_an_evaluation_that_questions_the_draft_deliberates(chat, llm, evaluating):
    llm.script("assess", assess(response=LONG, confidence=9))
    llm.script("evaluate", evaluate(False), evaluate(True))
    script_deliberation(llm, response="After checking the policy: " + LONG)

    [reply] = chat.say("Can I return boots I wore on a hike?")

    assert reply.text == "After checking the policy: " + LONG
    steps = [r.step for r in llm.requests]
    assert steps[:2] == ["assess", "evaluate"]
    assert steps[-1] == "evaluate"  # the deliberative answer is evaluated afresh
    trace = the_trace()
    assert trace.deliberation_trigger == "evaluation_questioned"
    assert trace.evaluation_outcome == "validated"


def test_a_validated_draft_is_evaluated_once_and_not_deliberated(chat, llm, evaluating):
    llm.script("assess", assess(response=LONG, confidence=9))
    llm.script("evaluate", evaluate(True))

    [reply] = chat.say("Can I return boots I wore on a hike?")

    assert reply.text == LONG
    assert [r.step for r in llm.requests] == ["assess", "evaluate"]
    trace = the_trace()
    assert (trace.deliberation_trigger, trace.evaluation_outcome) == ("", "validated")
    assert reply.data["evaluation"]["outcome"] == "validated"
    assert reply.data["confidence"] == 10  # 90 % + 10 %


def test_the_debug_view_says_why_the_turn_deliberated(client, chat, llm):
    llm.script("assess", assess(response="Maybe 30 days?", confidence=4))
    script_deliberation(llm)
    chat.say("Can I return boots I wore outside after 40 days?")
    client.force_login(UserFactory(is_superuser=True))

    page = client.get(
        reverse("admin:conversations_conversation_change", args=[chat.conversation.pk])
    ).content.decode()

    assert "Deliberated because:" in page
    assert "Low confidence" in page
    assert "Deliberating: adaptive" in page  # the trace step's card


def test_a_short_answer_is_not_evaluated_and_the_skip_is_recorded_once(chat, llm, evaluating):
    llm.script("assess", assess(response="Yes, 30 days.", confidence=9))

    [reply] = chat.say("Do you take returns?")

    assert reply.text == "Yes, 30 days."
    assert [r.step for r in llm.requests] == ["assess"]
    trace = the_trace()
    assert trace.steps.filter(name="evaluate_skipped").count() == 1
    assert trace.deliberation_trigger == ""
