"""A teammate's approval for high-impact actions, end to end: the real openai SDK against the
scripted model server and a real webhook server. A refund above the client's threshold waits
after the customer's confirmation and every guard; approving runs it exactly once with the same
idempotency key; denying tells the customer why; a request nobody decides becomes a hand-off."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import close_old_connections, connection
from django.utils import timezone

from apps.approvals.models import ApprovalRequest, ApprovalStatus
from apps.approvals.services import approval_approve, approval_deny, approval_run, approvals_expire
from apps.conversations.models import ConversationStatus, Kind, Message
from apps.conversations.services import conversation_create
from apps.core.exceptions import ApplicationError
from apps.escalations.models import Escalation, EscalationReason
from apps.reasoning.models import ReasoningStep
from apps.tools.models import (
    ClientTool,
    PendingAction,
    PendingActionStatus,
    ToolExecution,
    ToolKind,
)
from tests.factories import ClientToolFactory, UserFactory
from tests.support.fake_webhook import Reply
from tests.support.shop import ORDER_SCHEMA, Chat, make_shop

pytestmark = pytest.mark.django_db

ALL = "test checks the database directly"
REFUND_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "order_id": ORDER_SCHEMA["properties"]["order_id"],
        "amount": {"type": "number", "minimum": 0},
    },
    "required": ["order_id", "amount"],
    "additionalProperties": False,
}


def add_refund_tool(client: Any, webhook_url: str, *, kind: str = ToolKind.DESTRUCTIVE) -> Any:
    return ClientToolFactory(
        client=client,
        name="refund_order",
        kind=kind,
        description="Refund an order.",
        parameters=REFUND_SCHEMA,
        webhook_url=webhook_url,
        signing_secret="shop-signing-secret",
        approval_rule={"param": "amount", "above": 100},
    )


@pytest.fixture
def shop(db, webhook):
    client = make_shop("standard", webhook.url(), slug="approvals-shop")
    add_refund_tool(client, webhook.url())
    return client


def respond(text: str, tool: str | None = None, **params: Any) -> dict[str, Any]:
    return {"response": text, "tool_call": tool, "tool_params": params}


def confirmed_refund(chat: Chat, llm: Any, amount: float) -> list[Message]:
    """The customer asks for a refund and confirms it; returns the replies to the yes."""
    params = {"order_id": "TH-12345", "amount": amount}
    llm.script("respond", respond("I can refund that.", "refund_order", **params))
    [question] = chat.say(f"Please refund {amount} on order TH-12345")
    assert question.kind == Kind.CONFIRMATION_REQUEST
    llm.script("respond", respond("Refunding now.", "refund_order", **params))
    return chat.say("Yes")


def test_a_refund_above_the_threshold_waits_after_the_confirmation(chat, llm, webhook):
    [reply] = confirmed_refund(chat, llm, 150)

    assert webhook.requests == []  # confirmed and every guard passed, yet nothing ran
    assert "member of our team" in reply.text and "Refund order" in reply.text
    approval = ApprovalRequest.objects.unscoped(ALL).get()
    assert approval.status == ApprovalStatus.PENDING
    assert approval.tool.name == "refund_order"
    assert approval.params == {"order_id": "TH-12345", "amount": 150}
    pending = PendingAction.objects.unscoped(ALL).get()
    assert pending.status == PendingActionStatus.CONFIRMED
    assert approval.pending_action == pending
    assert approval.idempotency_key == pending.idempotency_key
    assert approval.conversation == chat.conversation
    assert reply.data["approval"] == str(approval.public_id)
    assert approval.expires_at > timezone.now() + timedelta(minutes=29)
    step = ReasoningStep.objects.unscoped(ALL).get(name="approval_requested")
    assert step.trace_id == approval.trace_id
    assert step.output["idempotency_key"] == pending.idempotency_key
    assert chat.conversation.status == ConversationStatus.OPEN


def test_a_refund_below_the_threshold_runs_at_once(chat, llm, webhook):
    webhook.script(Reply.ok({"refund": "done"}))
    llm.script("compose", {"response": "Refunded 50 on TH-12345."})
    [reply] = confirmed_refund(chat, llm, 50)

    assert reply.text == "Refunded 50 on TH-12345."
    assert len(webhook.requests) == 1
    assert not ApprovalRequest.objects.unscoped(ALL).exists()


def test_an_action_tool_marked_always_waits_without_a_confirmation(
    db, webhook, llm, django_capture_on_commit_callbacks
):
    client = make_shop("standard", webhook.url(), slug="always-shop")
    ClientTool.objects.unscoped(ALL).filter(name="update_shipping_address").update(
        approval_rule={"always": True}
    )
    conversation = conversation_create(client=client)[0]
    chat = Chat(client, conversation, django_capture_on_commit_callbacks)
    params = {"order_id": "TH-12345", "address": "12 Long Street, Springfield"}
    llm.script("respond", respond("Updating it.", "update_shipping_address", **params))
    [reply] = chat.say("Ship TH-12345 to 12 Long Street, Springfield")
    assert "member of our team" in reply.text
    assert webhook.requests == []
    approval = ApprovalRequest.objects.unscoped(ALL).get()
    assert approval.pending_action is None
    assert approval.idempotency_key.startswith(f"turn-{approval.trace_id}-")


class _capture_now:
    """Runs on-commit callbacks at once (the test is not in a transaction of its own here)."""

    def __init__(self, execute: bool = True) -> None:
        pass

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def refund_held_for_a_race(webhook: Any, llm: Any, slug: str) -> tuple[Chat, ApprovalRequest]:
    """A refund of 150 held for approval on a new standard shop `slug`, its on-commit callbacks
    run at once so that two threads can then race on it. Skips on SQLite, where they cannot."""
    if connection.vendor == "sqlite":
        pytest.skip("SQLite locks the whole database: two writers cannot race (run on PostgreSQL)")
    client = make_shop("standard", webhook.url(), slug=slug)
    add_refund_tool(client, webhook.url())
    chat = Chat.new(client, _capture_now)
    confirmed_refund(chat, llm, 150)
    return chat, ApprovalRequest.objects.unscoped(ALL).get()


def test_approve_runs_the_tool_once_with_the_same_key_and_tells_the_customer(
    chat, llm, webhook, django_capture_on_commit_callbacks
):
    confirmed_refund(chat, llm, 150)
    approval = ApprovalRequest.objects.unscoped(ALL).get()
    staff = UserFactory()
    webhook.script(Reply.ok({"refund_id": "R-9", "amount": 150}))

    with django_capture_on_commit_callbacks(execute=True):
        approval_approve(client=chat.client, approval=approval, actor=staff)

    [request] = webhook.requests
    assert request.json["params"] == {"order_id": "TH-12345", "amount": 150}
    assert request.headers["idempotency-key"] == approval.idempotency_key
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.APPROVED and approval.decided_by == staff
    assert approval.execution is not None and approval.execution.status == "succeeded"
    assert PendingAction.objects.unscoped(ALL).get().status == PendingActionStatus.EXECUTED
    told = approval.outcome_message
    assert told is not None and told.visibility == "visible" and told.role == "assistant"
    # a sentence naming the action, not a log of the result's keys
    assert told.text.startswith("Done: I've completed “Refund order” for you.")
    assert "R-9" in told.text

    # a second run of the task (a redelivery) neither calls the tool nor tells the customer again
    approval_run(client_id=chat.client.pk, approval_id=approval.pk)
    assert len(webhook.requests) == 1
    assert Message.objects.unscoped(ALL).filter(data__outcome="succeeded").count() == 1
    # approving again is refused
    with pytest.raises(ApplicationError) as refused:
        approval_approve(client=chat.client, approval=approval, actor=staff)
    assert refused.value.status == 409
    names = list(
        ReasoningStep.objects.unscoped(ALL)
        .filter(trace_id=approval.trace_id)
        .order_by("index")
        .values_list("name", flat=True)
    )
    assert names[-3:] == ["approval_requested", "approval_approved", "approval_run"]


def test_deny_tells_the_customer_why_and_nothing_runs(chat, llm, webhook):
    confirmed_refund(chat, llm, 150)
    approval = ApprovalRequest.objects.unscoped(ALL).get()
    with pytest.raises(ApplicationError):
        approval_deny(client=chat.client, approval=approval, actor=UserFactory(), reason="  ")

    approval_deny(
        client=chat.client,
        approval=approval,
        actor=UserFactory(),
        reason="This order was already refunded in store.",
    )

    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.DENIED
    told = approval.outcome_message
    assert told is not None and "already refunded in store" in told.text
    assert webhook.requests == []
    assert PendingAction.objects.unscoped(ALL).get().status == PendingActionStatus.EXPIRED
    assert not ToolExecution.objects.unscoped(ALL).exists()


def test_a_request_nobody_decides_becomes_a_hand_off(chat, llm, webhook):
    confirmed_refund(chat, llm, 150)
    approval = ApprovalRequest.objects.unscoped(ALL).get()

    assert approvals_expire() == 0  # not yet
    later = timezone.now() + timedelta(minutes=31)
    assert approvals_expire(now=later) == 1
    assert approvals_expire(now=later) == 0  # idempotent

    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.EXPIRED
    escalation = Escalation.objects.unscoped(ALL).get()
    assert escalation.reason == EscalationReason.APPROVAL_TIMEOUT
    assert escalation.trace_id == approval.trace_id
    chat.conversation.refresh_from_db()
    assert chat.conversation.status == ConversationStatus.ESCALATED
    handoff = Message.objects.unscoped(ALL).filter(kind=Kind.HANDOFF).get()
    assert "still waiting for a check" in handoff.text
    assert webhook.requests == []
    # an expired request can no longer be approved
    with pytest.raises(ApplicationError):
        approval_approve(client=chat.client, approval=approval, actor=UserFactory())
    assert ReasoningStep.objects.unscoped(ALL).filter(name="approval_expired").count() == 1


def test_the_customer_is_told_in_their_language(chat, llm, webhook):
    confirmed_refund(chat, llm, 150)
    # the conversation is now held in Spanish (as a turn would set it from the customer's words)
    chat.conversation.language = "es"
    chat.conversation.save(update_fields=["language"])
    approval = ApprovalRequest.objects.unscoped(ALL).get()
    approval_deny(client=chat.client, approval=approval, actor=UserFactory(), reason="Ya pagado.")
    approval.refresh_from_db()
    assert approval.outcome_message is not None
    assert approval.outcome_message.text.startswith("Un miembro de nuestro equipo")


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_approvals_run_the_tool_once(webhook, llm):
    chat, approval = refund_held_for_a_race(webhook, llm, "race-shop")
    client = chat.client
    webhook.script(Reply.ok({"refund_id": "R-1"}, delay=0.3))
    staff = [UserFactory(), UserFactory()]
    outcomes: list[str] = []
    barrier = threading.Barrier(2)

    def approve(user: Any) -> None:
        try:
            barrier.wait()
            approval_approve(client=client, approval=approval, actor=user)
            outcomes.append("approved")
        except ApplicationError:
            outcomes.append("refused")
        finally:
            close_old_connections()

    threads = [threading.Thread(target=approve, args=(u,)) for u in staff]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)

    assert sorted(outcomes) == ["approved", "refused"]
    assert len(webhook.requests) == 1
    assert ToolExecution.objects.unscoped(ALL).count() == 1
    assert Message.objects.unscoped(ALL).filter(data__outcome="succeeded").count() == 1
