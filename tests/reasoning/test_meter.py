"""The meter outside a turn (a batch job: no conversation, no trace) and the mode that ran
(a deliberative plan runs, and is recorded and billed as, deliberative)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from apps.billing.models import UsageCounter, UsagePurpose, UsageRecord
from apps.billing.selectors import usage_report
from apps.billing.services import billed_amount
from apps.billing.services.budgets import UsageLimitReached
from apps.clients.deliberation import deliberation_settings_set
from apps.conversations.models import Message
from apps.reasoning.meter import Meter, TokenCapExceeded
from apps.reasoning.models import ReasoningTrace
from apps.reasoning.steps import respond
from apps.reasoning.steps.respond import RespondOut
from tests.factories import ClientFactory, ModelPriceFactory, PlanFactory
from tests.support.shop import Chat, assess, make_shop

pytestmark = pytest.mark.django_db

PROMPT = [{"role": "system", "content": "Summarize this week's conversations."}]
REPLY: dict[str, Any] = {
    "response": "Customers asked about shipping.",
    "tool_call": None,
    "tool_params": {},
}


def batch_client(**plan: Any) -> Any:
    ModelPriceFactory()
    return ClientFactory(plan=PlanFactory(**plan))


def test_a_batch_job_call_is_billed_without_a_conversation_or_trace(llm: Any) -> None:
    client = batch_client(multipliers={"adaptive": "1.5"}, monthly_token_budget=100_000)
    llm.script("respond", REPLY)
    meter = Meter(client=client, mode="adaptive", purpose=UsagePurpose.INSIGHTS, token_cap=None)

    result = meter.call(step="respond", messages=PROMPT, output=RespondOut)

    assert result.parsed.response == "Customers asked about shipping."
    record = UsageRecord.objects.unscoped("test checks the database directly").get()
    assert record.client == client
    assert record.conversation is None and record.trace is None
    assert record.purpose == "insights"
    assert (record.mode, record.step, record.model) == ("adaptive", "respond", "gpt-4o-mini")
    assert record.prompt_tokens == result.prompt_tokens > 0
    assert record.completion_tokens == result.completion_tokens > 0
    assert record.cost_usd > 0
    assert record.multiplier == Decimal("1.5")
    assert record.billed_usd == billed_amount(cost=record.cost_usd, multiplier=Decimal("1.5"))
    counter = UsageCounter.objects.get(client=client)
    assert counter.tokens_used == record.prompt_tokens + record.completion_tokens
    assert counter.turns_used == 0  # not a customer turn
    assert meter.tokens_used == counter.tokens_used and meter.calls == 1


def test_the_monthly_budget_stops_a_batch_job_before_the_call(llm: Any) -> None:
    client = batch_client(monthly_token_budget=50)
    llm.script("respond", REPLY)
    meter = Meter(client=client, mode="standard", purpose=UsagePurpose.INSIGHTS, token_cap=None)
    meter.call(step="respond", messages=PROMPT * 8, output=RespondOut)  # over 50 tokens
    assert len(llm.requests) == 1

    with pytest.raises(UsageLimitReached) as caught:
        meter.call(step="respond", messages=PROMPT, output=RespondOut)

    assert caught.value.metric == "tokens"
    assert len(llm.requests) == 1  # the refused call was never made
    assert UsageRecord.objects.unscoped("test checks the database directly").count() == 1


def test_the_token_cap_of_a_run_stops_the_call_before_it_is_made(llm: Any) -> None:
    client = batch_client()
    meter = Meter(client=client, mode="standard", purpose=UsagePurpose.PLAYGROUND, token_cap=50)

    with pytest.raises(TokenCapExceeded):
        meter.call(step="respond", messages=PROMPT, output=RespondOut)

    assert (
        llm.requests == []
        and not UsageRecord.objects.unscoped("test checks the database directly").exists()
    )


def test_a_turn_meter_needs_its_trace() -> None:
    with pytest.raises(ValueError, match="needs its trace"):
        Meter(client=batch_client(), mode="standard")


def test_offline_batch_call_is_metered_too(settings: Any) -> None:
    settings.OPENAI_API_KEY = ""
    client = batch_client()
    meter = Meter(client=client, mode="standard", purpose=UsagePurpose.BENCHMARK)
    hint = {"user_text": "hello", "history": [], "tools": [], **respond.hint(business_info={})}

    meter.call(step="respond", messages=PROMPT, output=RespondOut, hint=hint)

    record = UsageRecord.objects.unscoped("test checks the database directly").get()
    assert (record.purpose, record.model, record.tokens_estimated) == (
        "benchmark",
        "offline-demo",
        True,
    )


# -- the mode that ran ---------------------------------------------------------------------------


def test_a_deliberative_plan_is_recorded_and_billed_as_deliberative(
    llm: Any, webhook: Any, django_capture_on_commit_callbacks: Any
) -> None:
    shop = make_shop("deliberative", webhook.url())
    plan = shop.plan
    plan.multipliers = {"adaptive": "1.5", "deliberative": "2.5"}
    deliberation_settings_set(plan, min_steps=1, refinement_iterations=0)
    plan.save()
    chat = Chat.new(shop, django_capture_on_commit_callbacks)
    llm.script(
        "reason_step",
        {
            "content": "c",
            "status": "final",
            "scores": dict.fromkeys(
                ["grounded", "policy_compliant", "helpful_complete", "caring_tone"], 1.0
            ),
            "rationale": "r",
        },
    )
    llm.script("synthesize", assess(response="We ship worldwide."))

    replies = chat.say("Do you ship abroad?")

    assert [r.text for r in replies] == ["We ship worldwide."]
    assert [r.step for r in llm.requests] == ["reason_step", "synthesize"]
    trace = ReasoningTrace.objects.unscoped("test checks the database directly").get()
    assert trace.mode == "deliberative"
    records = list(UsageRecord.objects.unscoped("test checks the database directly").order_by("pk"))
    assert [r.step for r in records] == ["reason_step", "synthesize"]
    for record in records:
        assert record.mode == "deliberative"
        assert record.multiplier == Decimal("2.5")
        assert record.billed_usd == billed_amount(cost=record.cost_usd, multiplier=Decimal("2.5"))
    reply = Message.objects.unscoped("test checks the database directly").get(pk=replies[0].pk)
    assert reply.data["mode"] == "deliberative"
    today = timezone.localdate()
    report = usage_report(client=shop, start=today, end=today, group_by="mode")
    assert [group.key for group in report.groups] == ["deliberative"]
    assert report.groups[0].turns == 1
