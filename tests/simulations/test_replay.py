"""Replays: a saved conversation's customer messages replayed verbatim with its original history,
each turn compared with what happened; tools answer with the results the conversation recorded —
no webhook is called and the conversation is never written."""

from __future__ import annotations

import pytest

from apps.conversations.models import Message
from apps.simulations.models import CaseRun, CaseStatus, RunStatus
from apps.simulations.selectors import replay_conversations
from tests.factories import ModelPriceFactory
from tests.simulations.conftest import UNSCOPED, live_rows, run_now
from tests.support.fake_webhook import Reply
from tests.support.shop import assess, critique, lookup_assess

pytestmark = pytest.mark.django_db

STATUS_CALL = lookup_assess()


def test_replay_of_a_saved_conversation(chat, shop, llm, webhook):
    # The live conversation: one order-status turn through the real webhook, then a thank-you.
    llm.script("assess", STATUS_CALL)
    llm.default("critique", critique("PROCEED"))
    webhook.script(Reply.ok({"status": "shipped", "carrier": "UPS"}))
    llm.script("compose", {"response": "Order TH-12345 has shipped with UPS."})
    chat.say("Where is my order TH-12345?")
    llm.script("assess", assess(response="You're welcome!", confidence=9))
    chat.say("Thanks!")
    assert len(webhook.requests) == 1
    assert replay_conversations(client=shop, with_tool=True) == [chat.conversation]
    messages_before = list(Message.objects.unscoped(UNSCOPED).values_list("pk", "text"))
    before = live_rows()

    # The replay against a candidate: the same call gets the recorded result.
    llm.script("assess", STATUS_CALL)
    llm.script("compose", {"response": "It shipped with UPS."})
    llm.script("assess", assess(response="Happy to help!", confidence=9))
    ModelPriceFactory(model="gpt-next")  # a model without a price is refused
    run = run_now(
        shop,
        kind="replay",
        selection={"with_tool": True},
        compare=False,
        overrides={"model": "gpt-next"},
    )

    assert run.status == RunStatus.DONE, run.error
    case_run = CaseRun.objects.unscoped(UNSCOPED).get(run=run)
    assert case_run.case_name == f"replay-{chat.conversation.public_id}"
    assert case_run.conversation_id == chat.conversation.pk
    assert case_run.status == CaseStatus.PASSED and case_run.passed is True
    first, second = case_run.transcript
    assert first["customer"] == "Where is my order TH-12345?"
    assert first["tools_ran"][0]["result"] == {"status": "shipped", "carrier": "UPS"}
    assert first["tools_ran"][0]["stubbed"] is True
    assert first["reply"] == "It shipped with UPS."
    assert first["original"]["reply"] == "Order TH-12345 has shipped with UPS."
    assert first["original"]["tools_ran"][0]["name"] == "get_order_status"
    assert first["original"]["escalated"] is False
    assert second["original"]["reply"] == "You're welcome!"
    assert second["reply"] == "Happy to help!"
    # The second turn read the ORIGINAL history (the original reply, not the candidate's).
    second_assess = llm.calls("assess")[-1]
    assert "Order TH-12345 has shipped with UPS." in second_assess.prompt_text
    assert "It shipped with UPS." not in second_assess.prompt_text.replace(
        "Order TH-12345 has shipped with UPS.", ""
    )
    assert [c.model for c in llm.calls("assess")][-2:] == ["gpt-next", "gpt-next"]
    # No webhook call, nothing written to the conversation.
    assert len(webhook.requests) == 1
    assert live_rows() == before
    assert list(Message.objects.unscoped(UNSCOPED).values_list("pk", "text")) == messages_before


def test_a_replayed_hand_off_fails_the_conversation(chat, shop, llm, webhook):
    llm.script("assess", assess(response="We're open 9-5.", confidence=9))
    chat.say("When are you open?")
    chat.say("Can I talk to a real person please")  # a live hand-off (no LLM call)
    llm.script("assess", assess(response="We're open 9-5.", confidence=9))
    run = run_now(shop, kind="replay", selection={"escalated_only": True}, compare=False)
    case_run = CaseRun.objects.unscoped(UNSCOPED).get(run=run)
    first, second = case_run.transcript
    assert first["escalated"] is False and first["original"]["escalated"] is False
    assert second["escalated"] is True and second["original"]["escalated"] is True
    assert second["original"]["escalation_reason"] == "customer_request"
    assert case_run.passed is False and case_run.status == CaseStatus.FAILED
