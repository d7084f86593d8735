"""What a turn does when the model's plan cannot be followed: a tool the client does not have
(or has switched off), and a critique that says PROCEED on a draft at or below the confidence
floor. The guards still hold (nothing runs); the customer gets an answer, a clarifying question
or a person — never a bare "I can't do that here"."""

from __future__ import annotations

from typing import Any

import pytest

from apps.conversations.models import Kind
from apps.escalations.models import Escalation, EscalationReason
from apps.reasoning.guards import unavailable_tool_draft_problem
from apps.reasoning.models import ReasoningStep
from apps.tools.models import ClientTool, ToolExecution
from tests.factories import set_deliberation
from tests.reasoning.helpers import script_tool_run
from tests.support.shop import Chat, assess, critique, lookup_assess, make_shop

pytestmark = pytest.mark.django_db

RETURN_POLICY = "You can return unused items within 30 days of delivery for a full refund."
ORDER = {"order_id": "TH-12345"}


def only_step(name: str) -> dict[str, Any]:
    [step] = ReasoningStep.objects.unscoped("test checks the database directly").filter(name=name)
    return step.output


def no_tool_ran(webhook: Any) -> bool:
    return (
        webhook.requests == []
        and not ToolExecution.objects.unscoped("test checks the database directly").exists()
    )


def escalation() -> Escalation:
    return Escalation.objects.unscoped("test checks the database directly").get()


@pytest.fixture
def deep_chat(db, webhook, django_capture_on_commit_callbacks) -> Chat:
    client = make_shop("deliberative", webhook.url(), slug="deep-shop")
    set_deliberation(client.plan_id, min_steps=1, refinement_iterations=0)
    client.refresh_from_db()
    return Chat.new(client, django_capture_on_commit_callbacks)


# --- a tool the client does not have ------------------------------------------------------------


def test_an_invented_tool_for_a_policy_question_answers_with_the_draft(std_chat, llm, webhook):
    llm.script(
        "respond",
        {"response": RETURN_POLICY, "tool_call": "get_return_policy", "tool_params": {}},
    )

    [reply] = std_chat.say("What is your return policy?")

    assert reply.kind == Kind.TEXT and reply.text == RETURN_POLICY
    assert "can't do that" not in reply.text
    assert no_tool_ran(webhook)
    assert only_step("guard")["action"] == "refuse"  # the guard still refused the call
    assert only_step("unavailable_tool") == {
        "tool": "get_return_policy",
        "reason": "unknown_tool",
        "reply": "draft",
        "problem": "",
    }
    assert not Escalation.objects.unscoped("test checks the database directly").exists()


def test_an_invented_tool_in_adaptive_mode_answers_with_the_draft(chat, llm, webhook):
    llm.script(
        "assess",
        assess(response="", needs_more_context=["policies.returns"], confidence=4),
        assess(response=RETURN_POLICY, tool_call="lookup_policy", tool_params={}, confidence=8),
    )
    llm.script("critique", critique("PROCEED"))  # the critique missed it; the guard did not

    [reply] = chat.say("What is your return policy?")

    assert reply.text == RETURN_POLICY
    assert no_tool_ran(webhook)
    assert only_step("unavailable_tool")["reply"] == "draft"


@pytest.mark.parametrize(
    ("draft", "problem"),
    [
        ("", "the draft holds no answer"),
        ("Let me check our return policy for you.", "the draft only announces an action"),
        ("Your account has been deleted.", "the draft names an action no tool performed"),
        ("I cancelled every order you have.", "the draft names an action no tool performed"),
    ],
)
def test_an_invented_tool_without_a_usable_draft_hands_off(std_chat, llm, webhook, draft, problem):
    llm.script(
        "respond", {"response": draft, "tool_call": "delete_account", "tool_params": {"id": 1}}
    )

    replies = std_chat.say("Delete my account and cancel all my orders")

    assert [r.kind for r in replies] == [Kind.HANDOFF]
    assert "can't do that here" not in replies[0].text
    assert no_tool_ran(webhook)
    record = only_step("unavailable_tool")
    assert record["reply"] == "handoff" and record["problem"].startswith(problem)
    assert escalation().reason == EscalationReason.POLICY


def test_a_figure_the_sources_do_not_hold_is_not_sent(std_chat, llm, webhook):
    llm.script(
        "respond",
        {
            "response": "Your store credit is 75 dollars; it never expires.",
            "tool_call": "lookup_account",
            "tool_params": {},
        },
    )

    [reply] = std_chat.say("How much store credit do I have?")

    assert reply.kind == Kind.HANDOFF and no_tool_ran(webhook)
    assert only_step("unavailable_tool")["problem"] == "figures not in the source text: 75"


def test_a_disabled_tool_with_an_invented_answer_hands_off(chat, llm, webhook):
    llm.script(
        "assess",
        assess(
            response="Your gift card balance is 50 dollars.",
            tool_call="gift_card_balance",
            tool_params=ORDER,
            confidence=10,
        ),
    )

    [reply] = chat.say("Gift card balance please")

    assert reply.kind == Kind.HANDOFF
    assert no_tool_ran(webhook)
    assert only_step("unavailable_tool")["reason"] == "tool_disabled"


@pytest.mark.parametrize(
    ("draft", "tool", "ok"),
    [
        (RETURN_POLICY, "get_return_policy", True),
        ("Our shop is open Monday to Friday, nine to five.", "opening_hours", True),
        ("You'll get it back within 30 days.", "get_return_policy", False),
        ("We can update the address on request.", "whatever", False),
        ("Okay.", "whatever", False),
        ("I'll look into it right away for you.", "whatever", False),
    ],
)
def test_the_draft_rule(shop, draft, tool, ok):
    tools = list(ClientTool.objects.for_client(shop))
    problem = unavailable_tool_draft_problem(draft, tool_name=tool, tools=tools)
    assert (problem == "") is ok, problem


def test_a_playground_dry_run_shows_the_draft_for_an_invented_tool(shop, llm, webhook):
    from apps.reasoning.guards import GuardVerdict
    from apps.reasoning.turn import _dry_run_outcome

    class Rec:
        def __init__(self) -> None:
            self.steps: list[tuple[str, Any]] = []

        def step(self, name: str, output: Any = None, **_: Any) -> None:
            self.steps.append((name, output))

    class FakeTurn:
        tools = list(ClientTool.objects.for_client(shop))
        enabled_tools = [t for t in tools if t.enabled]
        sources = {"full context": "Returns: 30-day returns."}
        rec = Rec()

    verdict = GuardVerdict("refuse", "unknown_tool", params={})
    outcome = _dry_run_outcome(
        FakeTurn(), verdict, name="get_return_policy", draft=RETURN_POLICY, hold_message=""
    )
    assert outcome.replies[0].text == RETURN_POLICY
    outcome = _dry_run_outcome(FakeTurn(), verdict, name="x", draft="", hold_message="")
    assert "support team" in outcome.replies[0].text
    made_up = "Your gift card balance is 50 dollars, as of today."
    outcome = _dry_run_outcome(FakeTurn(), verdict, name="lookup_x", draft=made_up, hold_message="")
    assert "figures not in the source text: 50" in outcome.replies[0].text
    assert webhook.requests == []


# --- the critique floor -------------------------------------------------------------------------


def test_proceed_at_the_floor_without_params_asks_a_clarifying_question(chat, llm, webhook):
    llm.script(
        "assess",
        assess(
            response="Cancelling.",
            tool_call="cancel_order",
            tool_params={},
            missing_params=["order_id"],
            confidence=2,
        ),
    )
    llm.script("critique", critique("PROCEED", reasoning="Escalate"))

    [reply] = chat.say("cancel it")

    assert reply.kind == Kind.CLARIFICATION
    assert "order id" in reply.text
    assert no_tool_ran(webhook)
    record = only_step("critique_floor")
    assert record["action"] == "clarify" and record["confidence"] == 2 and record["floor"] == 2
    assert record["missing_params"] == ["order_id"]
    assert not Escalation.objects.unscoped("test checks the database directly").exists()


def test_proceed_at_the_floor_without_a_tool_but_missing_details_asks(chat, llm, webhook):
    llm.script(
        "assess",
        assess(response="I can help with that.", missing_params=["order_id"], confidence=1),
    )
    llm.script("critique", critique("PROCEED"))

    [reply] = chat.say("hmm, that thing with my order")

    assert reply.kind == Kind.CLARIFICATION
    assert "tell me a little more" in reply.text
    assert only_step("critique_floor")["action"] == "clarify"


def test_proceed_at_the_floor_on_a_complete_draft_hands_off(chat, llm, webhook):
    llm.script("assess", lookup_assess(response="Your order shipped.", confidence=1))
    llm.script("critique", critique("PROCEED"))

    [reply] = chat.say("where is TH-12345")

    assert reply.kind == Kind.HANDOFF
    assert no_tool_ran(webhook)
    assert only_step("critique_floor")["action"] == "handoff"
    assert escalation().reason == EscalationReason.LOW_CONFIDENCE


def test_above_the_floor_proceed_is_followed(chat, llm, webhook, settings):
    settings.REASONING_CRITIQUE_FLOOR = 2
    plan = lookup_assess(response="Checking.", confidence=3)
    script_tool_run(llm, webhook, plan, {"status": "shipped"}, "TH-12345 has shipped.")

    [reply] = chat.say("where is TH-12345")

    assert reply.text == "TH-12345 has shipped."
    assert len(webhook.requests) == 1
    assert not ReasoningStep.objects.unscoped("test checks the database directly").filter(
        name="critique_floor"
    )


def test_the_floor_is_configurable(chat, llm, webhook, settings):
    settings.REASONING_CRITIQUE_FLOOR = 4
    llm.script("assess", lookup_assess(response="Checking.", confidence=4))
    llm.script("critique", critique("PROCEED"))

    [reply] = chat.say("where is TH-12345")

    assert reply.kind == Kind.HANDOFF and no_tool_ran(webhook)
    assert only_step("critique_floor")["floor"] == 4


def test_a_confirmed_action_is_not_held_back_by_the_floor(chat, llm, webhook):
    llm.script(
        "assess", assess(response="", tool_call="cancel_order", tool_params=ORDER, confidence=9)
    )
    llm.script("critique", critique("PROCEED"))
    [question] = chat.say("Cancel order TH-12345")
    assert question.kind == Kind.CONFIRMATION_REQUEST

    plan = assess(response="", tool_call="cancel_order", tool_params=ORDER, confidence=1)
    script_tool_run(llm, webhook, plan, {"status": "cancelled"}, "Order TH-12345 is cancelled.")
    [done] = chat.say("yes")

    assert done.text == "Order TH-12345 is cancelled."
    assert len(webhook.requests) == 1


def test_deliberative_synthesis_goes_through_the_same_floor(deep_chat, llm, webhook):
    llm.script(
        "reason_step",
        {
            "content": "reasoning 1",
            "status": "final",
            "scores": {},
            "rationale": "r",
            "hypotheses": [],
        },
    )
    llm.script(
        "synthesize",
        lookup_assess(response="Done.", confidence=2),
    )
    llm.script("critique", critique("PROCEED"))

    [reply] = deep_chat.say("where is TH-12345")

    assert reply.kind == Kind.HANDOFF and no_tool_ran(webhook)
    assert only_step("critique_floor")["action"] == "handoff"
