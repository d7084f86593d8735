"""`manage.py reason`: one turn outside any conversation, through the real `openai` SDK against
the scripted server (and on the offline demo model). Nothing reaches a customer, no tool runs,
usage is recorded as `playground`."""

from __future__ import annotations

import io
import json
from decimal import Decimal
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from apps.billing.models import UsagePurpose, UsageRecord
from apps.conversations.models import Conversation, Message, Role
from apps.conversations.services import message_append
from apps.core.tenancy import tenant_scope
from apps.playground.models import PlaygroundRun, RunSource, RunStatus
from apps.reasoning.models import ReasoningTrace, TraceKind
from apps.tools.models import PendingAction, ToolExecution
from tests.factories import ModelPriceFactory
from tests.support.shop import assess, cancel_assess, critique, lookup_assess

pytestmark = pytest.mark.django_db


def reason(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("reason", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def nothing_reached_a_customer() -> None:
    assert Conversation.objects.unscoped("test checks the database directly").count() == 0
    assert Message.objects.unscoped("test checks the database directly").count() == 0
    assert (
        ReasoningTrace.objects.unscoped("test checks the database directly")
        .filter(kind=TraceKind.TURN)
        .count()
        == 0
    )  # no turn
    assert PendingAction.objects.unscoped("test checks the database directly").count() == 0
    assert ToolExecution.objects.unscoped("test checks the database directly").count() == 0


def test_an_adaptive_run_prints_each_step_and_records_playground_usage(shop, llm, webhook):
    ModelPriceFactory(model="gpt-4o-mini")
    llm.script("assess", lookup_assess(confidence=9))
    out, _ = reason("--client", "shop", "--mode", "adaptive", "Where is order TH-12345?")

    assert "Question: Where is order TH-12345?" in out
    assert "[0] assess" in out and "Confidence 9/10 · Tool get_order_status" in out
    assert "[1] guard" in out
    assert "not run: tools never run in the playground" in out
    assert "Answer: Let me check." in out
    assert "Status done · 1 LLM calls" in out
    # the real SDK made exactly one call, and the tool's webhook was never called
    assert len(llm.calls("assess")) == 1
    assert webhook.calls() == []
    nothing_reached_a_customer()

    run = PlaygroundRun.objects.unscoped("test checks the database directly").get()
    assert (run.status, run.source, run.mode, run.trace.llm_calls) == (
        "done",
        RunSource.CLI,
        "adaptive",
        1,
    )
    usage = UsageRecord.objects.unscoped("test checks the database directly").get()
    assert usage.purpose == UsagePurpose.PLAYGROUND
    assert (usage.step, usage.mode, usage.conversation_id, usage.trace_id) == (
        "assess",
        "adaptive",
        None,
        None,
    )
    assert (
        usage.prompt_tokens + usage.completion_tokens
        == run.trace.prompt_tokens + run.trace.completion_tokens
    )
    assert run.trace.cost_usd == usage.cost_usd > 0
    assert run.trace.billed_usd == usage.billed_usd
    assert [s.name for s in run.trace.steps.order_by("index")] == [
        "assess",
        "guard",
        "tool_not_run",
    ]


def test_a_destructive_tool_is_put_through_the_guards_but_never_proposed_or_run(shop, llm):
    """A lying model (PROCEED, no confirmation needed) still gets only the guards' verdict."""
    llm.script(
        "assess",
        cancel_assess(
            response="Cancelled!", confidence=10, is_destructive=False, needs_confirmation=False
        ),
    )
    llm.script("critique", critique("PROCEED"))
    out, _ = reason("--client", "shop", "Cancel TH-12345 now")

    assert "Guards confirm · Tool cancel_order" in out
    assert "Just to confirm" in out  # what the customer would have been asked
    nothing_reached_a_customer()
    step = (
        PlaygroundRun.objects.unscoped("test checks the database directly")
        .get()
        .trace.steps.get(name="tool_not_run")
    )
    assert step.output["verdict"] == "confirm" and step.output["tool_not_run"] is True


def test_json_prints_the_trace(shop, llm):
    llm.script("respond", {"response": "We open at 9.", "tool_call": None, "tool_params": {}})
    out, err = reason("--client", "shop", "--mode", "standard", "--json", "When do you open?")

    trace = json.loads(out)  # stdout is only the JSON; the live steps went to stderr
    assert "[0] respond" in err
    assert trace["status"] == "done" and trace["mode"] == "standard"
    assert trace["final"]["replies"][0]["text"] == "We open at 9."
    assert [s["name"] for s in trace["steps"]] == ["respond"]
    assert trace["steps"][0]["output"]["response"] == "We open at 9."
    assert trace["llm_calls"] == 1 and trace["tokens"] > 0


def test_the_offline_demo_model_answers_without_a_key(shop, settings):
    settings.OPENAI_API_KEY = ""
    out, _ = reason("--client", "shop", "--mode", "adaptive", "What are your opening hours?")
    assert "offline demo model" in out
    run = PlaygroundRun.objects.unscoped("test checks the database directly").get()
    assert run.status == RunStatus.DONE and run.offline and run.trace.model == "offline-demo"
    assert run.final["replies"][0]["text"]
    assert (
        UsageRecord.objects.unscoped("test checks the database directly")
        .filter(purpose=UsagePurpose.PLAYGROUND)
        .count()
        == run.trace.llm_calls
    )


def test_a_conversation_gives_the_history_and_is_left_untouched(shop, llm, conversation):
    message_append(
        client=shop, conversation=conversation, role=Role.USER, text="My order is TH-55555"
    )
    before = Message.objects.unscoped("test checks the database directly").count()
    llm.script("respond", {"response": "Noted.", "tool_call": None, "tool_params": {}})
    reason(
        "--client",
        "shop",
        "--mode",
        "standard",
        "--conversation",
        str(conversation.public_id),
        "Has it shipped?",
    )
    prompt = llm.calls("respond")[0].prompt_text
    assert "My order is TH-55555" in prompt and "Has it shipped?" in prompt
    assert Message.objects.unscoped("test checks the database directly").count() == before
    assert (
        PlaygroundRun.objects.unscoped("test checks the database directly").get().conversation
        == conversation
    )


def test_the_per_turn_token_cap_ends_the_run_before_the_call(shop, llm):
    shop.plan.per_turn_token_cap = 50
    shop.plan.save()
    with pytest.raises(CommandError, match="token cap"):
        reason("--client", "shop", "--mode", "standard", "Hello")
    assert llm.calls() == []
    run = PlaygroundRun.objects.unscoped("test checks the database directly").get()
    assert run.status == RunStatus.FAILED and run.trace.llm_calls == 0


def test_a_used_up_monthly_budget_refuses_every_call(shop, llm):
    from apps.billing.services.budgets import usage_budget_add

    shop.plan.monthly_token_budget = 1000
    shop.plan.save()
    usage_budget_add(client=shop, tokens=1000)
    with pytest.raises(CommandError, match="monthly budget"):
        reason("--client", "shop", "--mode", "adaptive", "Hello")
    assert llm.calls() == []


def test_a_stop_request_ends_the_run_at_the_next_call(shop, llm):
    """The second assess (after a context fetch) is not made once stop is requested."""
    llm.script("assess", assess(confidence=4, needs_more_context=["faqs"]), assess(response="x"))
    from apps.playground import services

    run = services.playground_run_create(client=shop, question="Hi", mode="adaptive", enqueue=False)

    def stop_after_first(step):
        PlaygroundRun.objects.unscoped("test checks the database directly").filter(
            pk=run.pk
        ).update(stop_requested=True)

    with tenant_scope(run.client_id):
        services.playground_run_execute(run_id=run.pk, listeners=[stop_after_first])
    run.refresh_from_db()
    assert run.status == RunStatus.STOPPED
    assert len(llm.calls("assess")) == 1
    assert run.trace.steps.order_by("-index").first().name == "stopped"
    # run again (a redelivered task): nothing happens
    with tenant_scope(run.client_id):
        assert services.playground_run_execute(run_id=run.pk) is None
    assert len(llm.calls()) == 1


def test_a_run_whose_turn_cannot_be_set_up_ends_failed_not_running(shop, llm, monkeypatch):
    """Building the turn (the tools, the history) fails before the model runs: the run ends
    `failed` with the error for staff, never stays `running`."""
    from apps.playground import services

    run = services.playground_run_create(client=shop, question="Hi", mode="adaptive", enqueue=False)

    def broken(*args: Any) -> None:
        raise RuntimeError("tools unreadable")

    monkeypatch.setattr(services, "_turn", broken)
    with tenant_scope(run.client_id):
        services.playground_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert "tools unreadable" in run.error
    assert llm.calls() == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--client", "nope", "Hi"], "No client with slug 'nope'"),
        (["--client", "shop", "--mode", "turbo", "Hi"], "Mode 'turbo' cannot run"),
        (["--client", "shop", "   "], "must not be empty"),
        (["--client", "shop", "--iterations", "99", "Hi"], "iterations must be between 0 and 10"),
        (["--client", "shop", "--conversation", "not-a-uuid", "Hi"], "has no conversation"),
    ],
)
def test_bad_input_is_a_clear_error(shop, args, message):
    with pytest.raises(CommandError, match=message):
        reason(*args)
    assert PlaygroundRun.objects.unscoped("test checks the database directly").count() == 0


def test_cost_is_billed_at_the_plan_multiplier_of_the_mode_run(shop, llm):
    ModelPriceFactory(model="gpt-4o-mini")
    shop.plan.multipliers = {**shop.plan.multipliers, "standard": "3"}
    shop.plan.save()
    llm.script("respond", {"response": "Hi", "tool_call": None, "tool_params": {}})
    reason("--client", "shop", "--mode", "standard", "Hello")
    run = PlaygroundRun.objects.unscoped("test checks the database directly").get()
    assert run.trace.billed_usd == (run.trace.cost_usd * 3).quantize(Decimal("1e-8"))


def test_step_by_step_prints_every_step_in_full(shop, llm):
    long = "We ship to 30 countries. " * 20
    reply: dict[str, Any] = {"response": long.strip(), "tool_call": None, "tool_params": {}}
    llm.script("respond", reply, reply)
    short, _ = reason("--client", "shop", "--mode", "standard", "Do you ship abroad?")
    full, _ = reason("--client", "shop", "--mode", "standard", "--step-by-step", "Abroad?")
    assert f"Draft: {long.strip()}" not in short and "…" in short
    assert f"Draft: {long.strip()}" in full


def test_a_disabled_tool_is_refused_by_the_guards_and_not_run(shop, llm, webhook):
    llm.script(
        "respond",
        {
            "response": "Your balance is $50.",
            "tool_call": "gift_card_balance",
            "tool_params": {"order_id": "TH-12345"},
        },
    )
    out, _ = reason("--client", "shop", "--mode", "standard", "Gift card balance?")
    step = (
        PlaygroundRun.objects.unscoped("test checks the database directly")
        .get()
        .trace.steps.get(name="tool_not_run")
    )
    assert (step.output["verdict"], step.output["tool"]) == ("refuse", "gift_card_balance")
    assert "Your balance is $50." not in step.output["would_reply"]
    assert "Guards refuse" in out
    assert webhook.calls() == []
    nothing_reached_a_customer()
