"""The seed's three-turn "Cancel my order" example, end to end through the real openai SDK and a
real webhook: ask for the order id -> ask for confirmation -> execute once -> reply with result."""

from __future__ import annotations

import json
from decimal import ROUND_HALF_UP

import pytest
from django.db.models import Sum

from apps.billing.models import UsageRecord
from apps.conversations.models import Kind
from apps.reasoning.models import ReasoningTrace
from apps.tools.models import PendingAction, PendingActionStatus, ToolExecution
from devtools.fake_llm import count_prompt_tokens, count_tokens
from tests.support.fake_webhook import Reply
from tests.support.shop import SECRET, assess, cancel_assess, critique

pytestmark = pytest.mark.django_db


def test_three_turn_cancel(chat, llm, webhook):
    # Turn 1 — no order id: the critique asks, nothing runs.
    llm.script(
        "assess",
        cancel_assess(
            None,
            response="I'd be happy to help cancel your order. Could you give me your order number?",
            confidence=8,
        ),
    )
    llm.script(
        "critique",
        critique(
            "ASK_USER",
            "Could you please provide your order number?",
            "Missing required parameter: order_id",
        ),
    )
    [reply] = chat.say("Cancel my order")
    assert "order number" in reply.text
    assert webhook.requests == []

    # Turn 2 — order id given: destructive, so the customer must confirm these exact params.
    llm.script("assess", cancel_assess())
    llm.script(
        "critique",
        critique(
            "ASK_USER",
            "Do you want to cancel order TH-12345?",
            "Destructive action requires confirmation",
        ),
    )
    [reply] = chat.say("Order TH-12345")
    assert reply.kind == Kind.CONFIRMATION_REQUEST
    assert "TH-12345" in reply.text and "yes" in reply.text.lower()
    pending = PendingAction.objects.unscoped("test checks the database directly").get()
    assert pending.status == PendingActionStatus.PENDING
    assert pending.params == {"order_id": "TH-12345"}
    assert webhook.requests == []

    # Turn 3 — explicit yes: execute once, then compose the reply from the result.
    llm.script("assess", cancel_assess(confirmed=True))
    llm.script("critique", critique("PROCEED", reasoning="User explicitly confirmed"))
    webhook.script(Reply.ok({"order_id": "TH-12345", "status": "cancelled"}))
    llm.script("compose", {"response": "Done! Order TH-12345 has been cancelled."})
    [reply] = chat.say("Yes, cancel it")
    assert reply.text == "Done! Order TH-12345 has been cancelled."

    [request] = webhook.requests
    assert request.json == {
        "tool": "cancel_order",
        "params": {"order_id": "TH-12345"},
        "conversation_id": str(chat.conversation.public_id),
        "idempotency_key": pending.idempotency_key,
    }
    assert request.headers["idempotency-key"] == pending.idempotency_key
    assert webhook.verify_signature(request, SECRET)
    execution = ToolExecution.objects.unscoped("test checks the database directly").get()
    assert execution.status == "succeeded" and execution.attempts == 1
    pending.refresh_from_db()
    assert pending.status == PendingActionStatus.EXECUTED
    # the compose call saw the real result
    assert "cancelled" in llm.calls("compose")[0].prompt_text

    # Every step is on record: internal messages in order, one trace per turn.
    kinds = [m.kind for m in chat.all()]
    assert kinds == [
        "text",
        "assessment",
        "critique",
        "guard",
        "text",
        "text",
        "assessment",
        "critique",
        "guard",
        "confirmation_request",
        "text",
        "assessment",
        "critique",
        "guard",
        "tool_call",
        "tool_result",
        "text",
    ]
    traces = list(
        ReasoningTrace.objects.unscoped("test checks the database directly").order_by("pk")
    )
    assert [t.critique_triggered for t in traces] == [True, True, True]
    assert [t.llm_calls for t in traces] == [2, 2, 3]
    assert all(t.status == "done" and t.mode == "adaptive" for t in traces)


def test_usage_tokens_equal_what_the_server_reported(chat, llm, webhook):
    llm.script("assess", assess(response="We're open 9 to 5.", confidence=9))
    chat.say("When are you open?")
    [call] = llm.calls("assess")
    record = UsageRecord.objects.unscoped("test checks the database directly").get()
    assert record.prompt_tokens == count_prompt_tokens(call.messages)
    assert record.completion_tokens == count_tokens(
        json.dumps(assess(response="We're open 9 to 5.", confidence=9), ensure_ascii=False)
    )
    assert not record.tokens_estimated
    assert record.step == "assess" and record.mode == "adaptive" and record.model
    # cost from ModelPrice (0.15 / 0.60 per million) and billed = cost x adaptive multiplier
    trace = ReasoningTrace.objects.unscoped("test checks the database directly").get()
    assert trace.prompt_tokens == record.prompt_tokens
    assert record.cost_usd > 0
    # billing rounds half up (apps/billing/services/usage.py), not Decimal's default half-even
    assert record.billed_usd == (
        record.cost_usd * chat.client.plan.multiplier_for("adaptive")
    ).quantize(record.billed_usd, rounding=ROUND_HALF_UP)
    assert UsageRecord.objects.unscoped("test checks the database directly").aggregate(
        t=Sum("prompt_tokens")
    )["t"] == sum(count_prompt_tokens(c.messages) for c in llm.requests)
