"""An approval threshold is over sums, not single calls: three refunds of 50, or 100 + 99.99 on
one order, ask for a teammate's approval under `"above": 100` as one refund of 150 does — per
conversation, per customer and per order, within the rule's window. Real turns (the openai SDK
against the scripted model server, the tool through the local webhook server) and the gate
itself on real rows."""

from __future__ import annotations

import threading
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import close_old_connections, connection
from django.utils import timezone

from apps.approvals.models import ApprovalRequest, ApprovalStatus
from apps.approvals.services import approval_deny, approval_gate
from apps.approvals.sums import customer_key
from apps.conversations.models import Conversation, Kind, Role
from apps.conversations.services import conversation_create, message_append
from apps.tools.models import ClientTool, ExecutionStatus, ToolExecution, ToolKind
from tests.factories import ClientToolFactory, UserFactory
from tests.reasoning.test_approvals import REFUND_SCHEMA, add_refund_tool
from tests.support.shop import Chat, make_shop

pytestmark = pytest.mark.django_db

ALL = "test checks the database directly"


@pytest.fixture
def shop(db, webhook):
    client = make_shop("standard", webhook.url(), slug="sums-shop")
    add_refund_tool(client, webhook.url())  # the old rule form: {"param": "amount", "above": 100}
    return client


@pytest.fixture
def chat(shop, django_capture_on_commit_callbacks) -> Chat:
    conversation = conversation_create(client=shop, visitor_id="visitor-1")[0]
    return Chat(shop, conversation, django_capture_on_commit_callbacks)


def refunded(chat: Chat, llm: Any, amount: float, order: str = "TH-12345") -> list[Any]:
    llm.script("compose", {"response": f"Refunded {amount}."})
    params = {"order_id": order, "amount": amount}
    llm.script("respond", {"response": "OK", "tool_call": "refund_order", "tool_params": params})
    [question] = chat.say(f"Please refund {amount} on order {order}")
    assert question.kind == Kind.CONFIRMATION_REQUEST
    llm.script("respond", {"response": "Now", "tool_call": "refund_order", "tool_params": params})
    return chat.say("Yes")


def test_three_refunds_of_50_the_third_waits_for_a_teammate(chat, llm, webhook):
    assert refunded(chat, llm, 50)[0].text == "Refunded 50."
    assert refunded(chat, llm, 50)[0].text == "Refunded 50."
    assert len(webhook.requests) == 2

    [reply] = refunded(chat, llm, 50)

    assert "member of our team" in reply.text
    assert len(webhook.requests) == 2  # the third did not run
    approval = ApprovalRequest.objects.unscoped(ALL).get()
    basis = approval.basis
    assert basis["amount"] == "50"
    # every scope holds the same three calls: one conversation, one visitor, one order
    assert set(basis["tripped"]) == {"conversation", "customer", "order"}
    conversation_sum = basis["scopes"]["conversation"]
    assert Decimal(conversation_sum["total"]) == Decimal(150)
    assert [c["amount"] for c in conversation_sum["calls"]] == ["50", "50", "50"]
    assert [c.get("this", False) for c in conversation_sum["calls"]] == [False, False, True]
    assert {c["kind"] for c in conversation_sum["calls"][:2]} == {"execution"}
    assert basis["customer_from"] == "visitor_id"


def test_100_then_99_99_on_one_order_from_another_conversation(shop, llm, webhook, chat):
    refunded(chat, llm, 100)
    other = Chat(shop, conversation_create(client=shop, visitor_id="visitor-2")[0], chat._capture)

    [reply] = refunded(other, llm, 99.99)

    assert "member of our team" in reply.text
    assert len(webhook.requests) == 1
    approval = ApprovalRequest.objects.unscoped(ALL).get()
    assert approval.basis["tripped"] == ["order"]  # another conversation and visitor
    assert approval.basis["scopes"]["order"]["total"] == "199.99"
    assert approval.basis["scopes"]["conversation"]["total"] == "99.99"


def test_other_orders_and_other_customers_are_summed_apart(shop, llm, webhook, chat):
    refunded(chat, llm, 100, order="TH-11111")
    other = Chat(shop, conversation_create(client=shop, visitor_id="visitor-2")[0], chat._capture)

    [reply] = refunded(other, llm, 99.99, order="TH-22222")

    assert reply.text == "Refunded 99.99."
    assert len(webhook.requests) == 2
    assert not ApprovalRequest.objects.unscoped(ALL).exists()


# --- the gate on real rows ------------------------------------------------------------------------


def _conversation(client: Any, *, visitor: str = "", customer: str = "") -> Conversation:
    conversation = conversation_create(client=client, visitor_id=visitor)[0]
    if customer:
        conversation.customer_id = customer
        conversation.customer_verified_at = timezone.now()
        conversation.save(update_fields=["customer_id", "customer_verified_at"])
    return conversation


_keys = iter(range(10**6))


def gate(conversation: Conversation, tool: ClientTool, **params: Any) -> ApprovalRequest | None:
    """The last gate of a call, as a turn reaches it; a call let through gets its (reserved)
    execution marked as having run."""
    client = conversation.client
    asked = message_append(
        client=client, conversation=conversation, role=Role.USER, text="refund please"
    )
    key = f"gate-{next(_keys)}"
    approval, _ = approval_gate(
        client=client,
        conversation=conversation,
        tool=tool,
        params=params,
        idempotency_key=key,
        requested_in=asked,
        trace=None,
    )
    if approval is None:
        execution = ToolExecution.objects.unscoped(ALL).get(idempotency_key=key)
        assert execution.status == ExecutionStatus.RUNNING  # counted before it runs
        execution.status = ExecutionStatus.SUCCEEDED
        execution.save(update_fields=["status"])
    return approval


@pytest.fixture
def refund(shop) -> ClientTool:
    return ClientTool.objects.for_client(shop).get(name="refund_order")


def test_one_verified_customer_is_summed_across_conversations_and_orders(shop, refund):
    first = _conversation(shop, visitor="browser-a", customer="cust-7")
    second = _conversation(shop, visitor="browser-b", customer="cust-7")
    stranger = _conversation(shop, visitor="browser-c", customer="cust-8")

    assert gate(first, refund, order_id="TH-00001", amount=60) is None
    assert gate(stranger, refund, order_id="TH-00003", amount=60) is None  # another customer
    approval = gate(second, refund, order_id="TH-00002", amount=60)

    assert approval is not None
    assert approval.basis["tripped"] == ["customer"]
    assert approval.basis["customer_from"] == "customer_id"
    assert approval.basis["scopes"]["customer"]["key"] == "customer_id=cust-7"
    assert approval.basis["scopes"]["customer"]["total"] == "120"


def test_an_anonymous_visitor_is_summed_by_visitor_id(shop, refund):
    first = _conversation(shop, visitor="browser-a")
    second = _conversation(shop, visitor="browser-a")
    assert customer_key(first) == ("visitor_id", "browser-a")
    assert gate(first, refund, order_id="TH-00001", amount=60) is None

    approval = gate(second, refund, order_id="TH-00002", amount=60)

    assert approval is not None and approval.basis["tripped"] == ["customer"]
    # nobody known at all: no customer scope (the conversation and order scopes still hold)
    assert customer_key(_conversation(shop)) is None


def test_calls_older_than_the_window_no_longer_count(shop, refund):
    conversation = _conversation(shop, visitor="browser-a")
    assert gate(conversation, refund, order_id="TH-00001", amount=60) is None
    ToolExecution.objects.unscoped(ALL).update(created_at=timezone.now() - timedelta(hours=25))

    assert gate(conversation, refund, order_id="TH-00001", amount=60) is None  # 24 h by default

    refund.approval_rule = {"param": "amount", "above": 100, "window_hours": 48}
    refund.save(update_fields=["approval_rule"])
    assert gate(conversation, refund, order_id="TH-00001", amount=60) is not None


def test_denied_withdrawn_and_failed_calls_do_not_count_pending_ones_do(shop, refund):
    conversation = _conversation(shop, visitor="browser-a")
    waiting = gate(conversation, refund, order_id="TH-00001", amount=150)
    assert waiting is not None  # alone above the threshold

    # a waiting request counts: 150 + 10 on the same order
    also = gate(conversation, refund, order_id="TH-00001", amount=10)
    assert also is not None and "order" in also.basis["tripped"]
    statuses = [c["status"] for c in also.basis["scopes"]["order"]["calls"]]
    assert statuses == ["pending", "new"]

    for approval in (waiting, also):
        approval_deny(client=shop, approval=approval, actor=UserFactory(), reason="No.")
    failed = gate(conversation, refund, order_id="TH-00001", amount=90)
    assert failed is None
    ToolExecution.objects.unscoped(ALL).update(status=ExecutionStatus.FAILED)
    # denied (150, 10) and failed (90) ones are gone: 90 alone is under 100
    assert gate(conversation, refund, order_id="TH-00001", amount=90) is None


def test_a_rule_for_one_scope_only_ignores_the_others(shop, refund):
    refund.approval_rule = {"param": "amount", "above": 100, "per": ["conversation"]}
    refund.save(update_fields=["approval_rule"])
    one = _conversation(shop, visitor="browser-a")
    two = _conversation(shop, visitor="browser-a")
    assert gate(one, refund, order_id="TH-00001", amount=60) is None
    assert gate(two, refund, order_id="TH-00001", amount=60) is None  # same order, visitor
    approval = gate(one, refund, order_id="TH-00001", amount=60)
    assert approval is not None and list(approval.basis["scopes"]) == ["conversation"]


def test_a_group_of_tools_is_summed_together(shop, refund):
    credit = ClientToolFactory(
        client=shop,
        name="store_credit",
        kind=ToolKind.ACTION,
        description="Give store credit.",
        parameters={
            "type": "object",
            "properties": {"order": {"type": "string"}, "value": {"type": "number"}},
        },
        webhook_url="https://shop.example/hook",
        approval_rule={"param": "value", "above": 100, "order_param": "order", "group": "money"},
    )
    refund.approval_rule = {"param": "amount", "above": 100, "group": "money"}
    refund.save(update_fields=["approval_rule"])
    conversation = _conversation(shop)
    assert gate(conversation, credit, order="TH-00001", value=60) is None

    approval = gate(_conversation(shop), refund, order_id="TH-00001", amount=60)

    assert approval is not None
    assert approval.basis["tripped"] == ["order"]
    assert [c["tool"] for c in approval.basis["scopes"]["order"]["calls"]] == [
        "store_credit",
        "refund_order",
    ]


@pytest.mark.django_db(transaction=True)
def test_two_racing_calls_cannot_both_slip_under_the_threshold(webhook):
    if connection.vendor == "sqlite":
        pytest.skip("SQLite locks the whole database: two writers cannot race (run on PostgreSQL)")
    client = make_shop("standard", webhook.url(), slug="sums-race")
    tool = ClientToolFactory(
        client=client,
        name="refund_order",
        kind=ToolKind.DESTRUCTIVE,
        description="Refund an order.",
        parameters=REFUND_SCHEMA,
        webhook_url=webhook.url(),
        approval_rule={"param": "amount", "above": 100},
    )
    conversations = [_conversation(client, visitor=f"v-{n}") for n in range(2)]
    asked = [
        message_append(client=client, conversation=c, role=Role.USER, text="refund")
        for c in conversations
    ]
    barrier = threading.Barrier(2)
    held: list[bool] = []

    def call(n: int) -> None:
        try:
            barrier.wait()
            approval, _ = approval_gate(
                client=client,
                conversation=conversations[n],
                tool=tool,
                params={"order_id": "TH-00001", "amount": 60},
                idempotency_key=f"race-{n}",
                requested_in=asked[n],
                trace=None,
            )
            held.append(approval is not None)
        finally:
            close_old_connections()

    threads = [threading.Thread(target=call, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)

    assert sorted(held) == [False, True]  # one runs, the other waits for a teammate
    assert ToolExecution.objects.unscoped(ALL).count() == 1
    assert ApprovalRequest.objects.unscoped(ALL).get().status == ApprovalStatus.PENDING


def test_the_approval_card_shows_the_sum_and_its_calls(shop, refund):
    from django.urls import reverse

    from apps.accounts.models import Role as StaffRole
    from tests.conftest import session_for

    assert gate(_conversation(shop, visitor="a"), refund, order_id="TH-00001", amount=100) is None
    approval = gate(_conversation(shop, visitor="b"), refund, order_id="TH-00001", amount=99.99)
    assert approval is not None
    agent = session_for(shop, StaffRole.AGENT)

    body = agent.get(reverse("api-approval-detail", args=[approval.public_id])).json()
    assert body["basis"]["tripped"] == ["order"]
    assert [c["amount"] for c in body["basis"]["scopes"]["order"]["calls"]] == ["100", "99.99"]

    page = agent.get(reverse("console-approvals") + f"?client={shop.slug}").content.decode()
    assert "Over the threshold for this order: 199.99" in page
    assert 'data-approval-scope="order" data-tripped' in page
    assert "For this conversation: 99.99" in page
    assert "How the sums add up" in page
    # the card's running total is the customer's sum (visitor "b": only this call)
    assert "approval above 100.00" in page
