"""Adaptive mode: the seed's critique trigger and skip rules (in code), on-demand context, and
the minimal context."""

from __future__ import annotations

import pytest

from apps.reasoning.models import ReasoningTrace
from apps.reasoning.modes.adaptive import critique_needed
from apps.reasoning.steps._shared import CONFIRMATION_RULE
from apps.reasoning.steps.assess import AssessOut
from apps.tools.models import ClientTool, ToolKind
from devtools.fake_llm import count_prompt_tokens
from tests.reasoning.helpers import script_tool_run
from tests.support.fake_webhook import Reply
from tests.support.shop import assess, cancel_assess, critique, script_order_lookup

pytestmark = pytest.mark.django_db


def _tool(kind: str) -> ClientTool:
    return ClientTool(name=f"t_{kind}", kind=kind)


@pytest.mark.parametrize(
    ("fields", "kind", "expected"),
    [
        ({"tool_call": "t_action"}, ToolKind.ACTION, ["action_tool"]),
        ({"tool_call": "t_destructive"}, ToolKind.DESTRUCTIVE, ["destructive_tool"]),
        ({"confidence": 6}, None, ["low_confidence"]),
        (
            {"tool_call": "t_read", "missing_params": ["order_id"]},
            ToolKind.READ,
            ["missing_params"],
        ),
        ({"needs_confirmation": True}, None, ["needs_confirmation"]),
        ({"tool_call": "nope"}, None, ["unknown_tool"]),
        # skip rules
        ({}, None, []),
        ({"tool_call": "t_read", "confidence": 7}, ToolKind.READ, []),
        ({"tool_call": "t_read", "confidence": 10}, ToolKind.READ, []),
    ],
)
def test_trigger_and_skip_rules(fields, kind, expected):
    # A reply with neither text nor a tool call breaks the contract: never assessed.
    assessment = AssessOut.model_validate(assess(**{"response": "Sure.", **fields}))
    assert critique_needed(assessment, _tool(kind) if kind else None) == expected


def test_model_cannot_talk_a_destructive_tool_out_of_critique():
    assessment = AssessOut.model_validate(
        assess(
            tool_call="t_destructive", confidence=10, is_destructive=False, needs_confirmation=False
        )
    )
    assert critique_needed(assessment, _tool(ToolKind.DESTRUCTIVE)) == ["destructive_tool"]


def test_simple_question_is_one_call(chat, llm):
    llm.script("assess", assess(response="Hello! How can I help?", confidence=9))
    [reply] = chat.say("Hi there")
    assert reply.text == "Hello! How can I help?"
    assert [r.step for r in llm.requests] == ["assess"]
    trace = ReasoningTrace.objects.unscoped("test checks the database directly").get()
    assert not trace.critique_triggered and trace.llm_calls == 1


def test_confident_read_tool_skips_critique_and_runs(chat, llm, webhook):
    script_order_lookup(llm, webhook, "TH-55555")
    [reply] = chat.say("Where is order TH-55555?")
    assert reply.text == "Order TH-55555 has shipped."
    assert [r.step for r in llm.requests] == ["assess", "compose"]
    assert len(webhook.requests) == 1


def test_action_tool_triggers_critique_and_proceeds(chat, llm, webhook):
    params = {"order_id": "TH-55555", "address": "12 Pine Road, Boulder CO"}
    plan = assess(tool_call="update_shipping_address", tool_params=params)
    script_tool_run(llm, webhook, plan, {"updated": True}, "Updated.")
    chat.say("Please ship order TH-55555 to 12 Pine Road, Boulder CO")
    assert [r.step for r in llm.requests] == ["assess", "critique", "compose"]
    assert webhook.requests[0].json["params"] == params
    assert ReasoningTrace.objects.unscoped(
        "test checks the database directly"
    ).get().critique_reasons == ["action_tool"]


def test_low_confidence_answer_is_critiqued_and_escalated(chat, llm):
    llm.script("assess", assess(response="Maybe?", confidence=4))
    llm.script("critique", critique("ESCALATE", "Not sure about warranty terms"))
    replies = chat.say("Is water damage covered by the warranty on my stove?")
    assert replies[-1].kind == "handoff"
    chat.conversation.refresh_from_db()
    assert chat.conversation.status == "escalated"
    assert chat.conversation.escalations.get().reason == "low_confidence"


def test_critique_ask_user_holds_a_read_tool(chat, llm, webhook):
    llm.script(
        "assess",
        assess(tool_call="get_order_status", confidence=5, tool_params={"order_id": "TH-55555"}),
    )
    llm.script("critique", critique("ASK_USER", "Do you mean your most recent order TH-55555?"))
    [reply] = chat.say("status of the thing")
    assert reply.text == "Do you mean your most recent order TH-55555?"
    assert webhook.requests == []


def test_context_is_fetched_on_demand(chat, llm):
    llm.script("assess", assess(confidence=5, needs_more_context=["policies.returns"]))
    llm.script("assess", assess(response="You have 30 days to return items.", confidence=9))
    [reply] = chat.say("How long do I have to return something?")
    assert reply.text == "You have 30 days to return items."
    first, second = llm.calls("assess")
    returns_policy = chat.client.business_info["policies"]["returns"]
    assert returns_policy not in first.prompt_text
    assert returns_policy in second.prompt_text
    trace = ReasoningTrace.objects.unscoped("test checks the database directly").get()
    assert trace.context_fetched == ["policies.returns"] and trace.llm_calls == 2
    assert [m.kind for m in chat.all(visibility="internal")] == [
        "assessment",
        "context_fetch",
        "assessment",
    ]


def test_context_rounds_are_bounded(chat, llm, settings):
    settings.REASONING_MAX_CONTEXT_ROUNDS = 2
    llm.script(
        "assess",
        assess(confidence=5, needs_more_context=["faqs"]),
        assess(confidence=5, needs_more_context=["policies.shipping"]),
        assess(confidence=5, needs_more_context=["policies.terms"]),
    )
    llm.script("critique", critique("ESCALATE", "can't answer"))
    chat.say("Tell me everything")
    assert len(llm.calls("assess")) == 3


def test_tool_schema_can_be_fetched(chat, llm):
    llm.script(
        "assess",
        assess(confidence=6, needs_more_context=["tool_schema:cancel_order"]),
        assess(
            response="Which order?",
            tool_call="cancel_order",
            missing_params=["order_id"],
            confidence=8,
        ),
    )
    llm.script("critique", critique("ASK_USER", "Which order would you like to cancel?"))
    [reply] = chat.say("cancel please")
    assert '"pattern":"^TH-\\\\d{5}$"' in llm.calls("assess")[1].prompt_text
    assert reply.text == "Which order would you like to cancel?"


def test_minimal_context_is_much_smaller_than_full(
    chat, standard_shop, llm, django_capture_on_commit_callbacks
):
    from tests.support.shop import Chat

    llm.script("assess", assess(response="Hi!"))
    chat.say("Hello")
    adaptive_tokens = count_prompt_tokens(llm.calls("assess")[0].messages)
    llm.script("respond", {"response": "Hi!", "tool_call": None, "tool_params": {}})
    std = Chat.new(standard_shop, django_capture_on_commit_callbacks)
    std.say("Hello")
    standard_tokens = count_prompt_tokens(llm.calls("respond")[0].messages)
    assert adaptive_tokens < standard_tokens


def test_the_confirmation_rule_comes_with_a_confirmation_state(chat, llm, webhook):
    llm.script(
        "assess",
        cancel_assess(),
        cancel_assess(confirmed=True),
    )
    llm.script(
        "critique",
        critique("ASK_USER", "Do you want to cancel order TH-12345?"),
        critique("PROCEED", reasoning="User explicitly confirmed"),
    )
    webhook.script(Reply.ok({"order_id": "TH-12345", "status": "cancelled"}))
    llm.script("compose", {"response": "Done! Order TH-12345 has been cancelled."})
    chat.say("Please cancel order TH-12345")
    [reply] = chat.say("Yes, cancel it")
    assert reply.text == "Done! Order TH-12345 has been cancelled."

    asked, confirmed = (call.messages for call in llm.calls("assess"))
    # No confirmation state, no rule for reading one (it costs every first call ≈ 45 tokens).
    assert CONFIRMATION_RULE not in asked[0]["content"]
    assert "confirmation state" not in "".join(m["content"] for m in asked)
    # With one, the system message says how to read the block, which is data.
    assert CONFIRMATION_RULE in confirmed[0]["content"]
    [state] = [m for m in confirmed if 'label="confirmation state"' in m["content"]]
    assert state["role"] == "user" and "confirmed: cancel_order" in state["content"]
