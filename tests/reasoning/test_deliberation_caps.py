"""A deliberative turn under every per-turn token cap ends in an answer — written from the steps
so far, or (no room even for the first step) the adaptive path's — never the "unavailable"
fallback or a usage hand-off (unless the cap cannot hold a single call): the loop keeps room for
the synthesis, sized by the prompt the synthesis will really have. Through the real `openai` SDK
against the scripted server, with the default settings (feedback only when the mean does not
rise, the `stalled` stop, refinement)."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest

from apps.billing.models import UsageRecord
from apps.clients.models import Client, Plan
from apps.conversations.models import Kind
from apps.conversations.services import conversation_create
from apps.escalations.models import Escalation
from apps.reasoning.models import ReasoningTrace
from apps.reasoning.services import USAGE_LIMIT_TEXT
from tests.factories import set_deliberation
from tests.reasoning.test_deliberative import KEYS, rc
from tests.support.shop import Chat, assess, make_shop

pytestmark = pytest.mark.django_db

CAPS = range(500, 20_001, 500)
QUESTION = "My jacket arrived torn and I want my money back, not a replacement."
FROM_STEPS = "From the steps: a torn jacket is refunded in full once we have a photo."
IMPROVED = "Sorry about the torn jacket: send us a photo and we refund it in full."
ADAPTIVE = "A torn jacket is refunded in full: reply with a photo of the tear."
# The business's instructions, as long as a real shop's: the shared prefix of every call.
INSTRUCTIONS = " ".join(
    f"Rule {n}: be precise about refunds, returns, exchanges and shipping, and quote the policy."
    for n in range(1, 41)
)


def reasoning(n: int) -> dict[str, Any]:
    """A step as long as a model's: the mean does not rise, so each step gets feedback."""
    return {
        "content": f"Step {n}: the customer reports a torn jacket and asks for a refund. "
        + "The returns policy allows 30 days; a damaged item is refunded in full. " * 6,
        "status": "continue",
        "scores": dict.fromkeys(KEYS, 0.4),
        "rationale": "Grounded in the returns policy; the tone can be warmer. " * 3,
        "hypotheses": [],
    }


@pytest.fixture
def shop(db: Any, webhook: Any) -> Client:
    client = make_shop("deliberative", webhook.url(), slug="caps-shop")
    client.business_info = {**client.business_info, "ai_instructions": INSTRUCTIONS}
    client.save()
    return client


def script(llm: Any) -> None:
    llm.default("reason_step", lambda request: reasoning(len(llm.calls("reason_step"))))
    llm.default("feedback", {"feedback": "Quote the returns window and ask for a photo. " * 4})
    llm.default("synthesize", assess(response=FROM_STEPS, confidence=9))
    llm.default("refine_critique", rc(70, FROM_STEPS))
    llm.default("improve", {"response": IMPROVED})
    llm.default("assess", assess(response=ADAPTIVE, confidence=9))


def turn_under(shop: Client, cap: int, capture: Any) -> tuple[list[Any], ReasoningTrace]:
    Plan.objects.filter(pk=shop.plan_id).update(per_turn_token_cap=cap)
    shop.plan.refresh_from_db()
    conversation = conversation_create(client=shop)[0]
    replies = Chat(shop, conversation, capture).say(QUESTION)
    trace = ReasoningTrace.objects.unscoped("test checks the database directly").get(
        conversation=conversation
    )
    return replies, trace


@pytest.mark.parametrize("cap", CAPS)
def test_every_cap_ends_in_an_answer_from_the_steps_or_the_adaptive_path(
    cap, shop, llm, settings, django_capture_on_commit_callbacks
):
    script(llm)

    replies, trace = turn_under(shop, cap, django_capture_on_commit_callbacks)

    calls = [r.step for r in llm.requests]
    texts = [r.text for r in replies]
    if not calls:
        # Not even one call fits the cap (its prompt plus LLM_MAX_COMPLETION_TOKENS): no answer
        # can be written at all. The loop made no step and the adaptive path was tried; the
        # meter refused its first call, and the turn hands over as an adaptive turn does.
        refused = trace.steps.get(name="assess")
        reach = re.search(r"could reach (\d+)", refused.error)
        assert reach is not None and int(reach[1]) > cap
        assert trace.steps.filter(name="deliberation_skipped").exists()
        assert cap < 2 * settings.LLM_MAX_COMPLETION_TOKENS
        return
    assert str(USAGE_LIMIT_TEXT) not in texts
    assert not trace.escalated and not Escalation.objects.unscoped("test checks").exists()
    end = trace.steps.get(name="deliberation_end").output
    if texts == [ADAPTIVE]:
        # No room for even one step and the answer after it: the adaptive path answers.
        assert "reason_step" not in calls and calls[0] == "assess", calls
        assert (end["termination"], end["steps"]) == ("budget", 0)
        assert trace.steps.filter(name="deliberation_skipped").exists()
    else:
        # The answer written from the steps so far (refined when there was room for it).
        assert texts in ([FROM_STEPS], [IMPROVED]), texts
        assert calls[0] == "reason_step" and "synthesize" in calls, calls
        assert end["steps"] >= 1
    assert replies[0].kind == Kind.TEXT
    assert trace.prompt_tokens + trace.completion_tokens <= cap


def test_a_context_round_the_cap_refuses_leaves_the_synthesis_written(
    shop, llm, django_capture_on_commit_callbacks
):
    """The synthesis asks to search the knowledge base; writing it again with what it finds would
    pass the cap: the synthesis already written is the answer, not a usage hand-off."""
    script(llm)
    llm.script(
        "synthesize",
        assess(response=FROM_STEPS, confidence=9, needs_more_context=["kb:torn jacket refund"]),
    )
    set_deliberation(shop.plan_id, refinement_iterations=0)

    replies, trace = turn_under(shop, 7000, django_capture_on_commit_callbacks)

    assert [r.text for r in replies] == [FROM_STEPS]
    assert not trace.escalated
    synthesized = list(trace.steps.filter(name="synthesize").order_by("index"))
    assert len(synthesized) == 2 and "token cap 7000" in synthesized[1].error
    budget = trace.steps.filter(name="budget").order_by("index").last()
    assert budget.output["before_synthesis_round"] == 1
    assert trace.prompt_tokens + trace.completion_tokens <= 7000


def test_no_room_for_a_step_answers_adaptive_and_bills_as_adaptive(
    shop, llm, django_capture_on_commit_callbacks
):
    script(llm)
    plan = shop.plan
    plan.multipliers = {**plan.multipliers, "adaptive": "1.5", "deliberative": "2.5"}
    plan.save()

    replies, trace = turn_under(shop, 3000, django_capture_on_commit_callbacks)

    assert [r.text for r in replies] == [ADAPTIVE]
    assert [r.step for r in llm.requests] == ["assess"]
    budget = trace.steps.get(name="budget").output
    assert budget["before_step"] == 1 and budget["token_cap"] == 3000
    assert budget["tokens_used"] + budget["call_tokens"] + budget["answer_tokens"] > 3000
    [record] = UsageRecord.objects.unscoped("test checks the database directly").all()
    assert (record.mode, record.multiplier) == ("deliberative", Decimal("1.500"))


def test_deliberate_when_needed_keeps_its_adaptive_outcome_when_no_step_fits(
    db, webhook, llm, django_capture_on_commit_callbacks
):
    client = make_shop("as_needed", webhook.url(), slug="caps-when-needed")
    client.business_info = {**client.business_info, "ai_instructions": INSTRUCTIONS}
    client.save()
    Plan.objects.filter(pk=client.plan_id).update(
        multipliers={"adaptive": "1.5", "as_needed": "1.5", "deliberative": "2.5"}
    )
    client.plan.refresh_from_db()
    script(llm)
    llm.script("assess", assess(response=ADAPTIVE, confidence=9, complaint=True))

    replies, trace = turn_under(client, 3000, django_capture_on_commit_callbacks)

    assert [r.text for r in replies] == [ADAPTIVE]
    assert [r.step for r in llm.requests] == ["assess"]  # no second assess
    assert trace.steps.filter(name="deliberation_trigger").exists()
    assert trace.steps.get(name="deliberation_end").output["steps"] == 0
    [record] = UsageRecord.objects.unscoped("test checks the database directly").all()
    assert (record.mode, record.multiplier) == ("as_needed", Decimal("1.500"))
