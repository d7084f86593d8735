"""An approval card in words: the action with its amount and order, the other parameters under
their labels, the customer, the conversation's last messages and the customer's running total —
no raw JSON, no internal ids; in the staff member's language; a tool definition's display name
and labels when it has them."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone, translation

from apps.accounts.models import Role as StaffRole
from apps.approvals.cards import param_label, tool_label
from apps.approvals.models import ApprovalRequest
from apps.approvals.services import approval_request_create
from apps.approvals.sums import approval_basis
from apps.clients.models import Client
from apps.conversations.models import Role
from apps.conversations.services import conversation_create, message_append
from apps.tools.models import ExecutionStatus, ToolExecution
from tests.support.approvals import refund_tool
from tests.support.messages import internal_message

pytestmark = pytest.mark.django_db


def held_refund(client: Client, *, amount: float = 425.76, earlier: float = 0) -> ApprovalRequest:
    """A refund held for approval in a verified customer's conversation, with the basis the
    gate stores; `earlier`: a refund that already ran for the same customer elsewhere."""
    tool = refund_tool(client)
    tool.parameters["properties"]["reason"] = {"type": "string"}
    tool.save(update_fields=["parameters"])
    verified = {
        "customer_id": "cust-881",
        "customer_name": "Ana Lima",
        "customer_email": "ana@example.com",
        "customer_verified_at": timezone.now(),
    }
    if earlier:
        before, _ = conversation_create(client=client, visitor_id="v-before")
        for field, value in verified.items():
            setattr(before, field, value)
        before.save()
        ToolExecution.objects.create(
            client=client,
            conversation=before,
            tool=tool,
            params={"order_id": "TH-10001", "amount": earlier},
            idempotency_key=f"earlier-{client.slug}",
            status=ExecutionStatus.SUCCEEDED,
        )
    conversation, _ = conversation_create(
        client=client, visitor_id=f"v-{ApprovalRequest.objects.for_client(client).count()}"
    )
    for field, value in verified.items():
        setattr(conversation, field, value)
    conversation.save()
    for role, text in (
        (Role.USER, "Hello, my boots arrived torn"),
        (Role.ASSISTANT, "Sorry to hear that. Which order?"),
        (Role.USER, "Order TH-12346, please refund all of it"),
    ):
        asked = message_append(client=client, conversation=conversation, role=role, text=text)
    internal_message(conversation, "assessment", "internal assessment")
    params = {"order_id": "TH-12346", "amount": amount, "reason": "torn"}
    basis = approval_basis(client=client, conversation=conversation, tool=tool, params=params)
    approval, _ = approval_request_create(
        client=client,
        conversation=conversation,
        tool=tool,
        params=params,
        idempotency_key=f"card-{client.slug}-{conversation.pk}",
        requested_in=asked,
        trace=None,
        basis=basis,
    )
    return approval


def q(approval: ApprovalRequest) -> str:
    return f"?client={approval.client.slug}"


def card(html: str, approval: ApprovalRequest) -> str:
    start = html.index(f'data-approval="{approval.public_id}"')
    return html[start : html.index("\n</li>", start)]  # the card's own closing tag


def shown(html: str) -> str:
    """What a person reads of `html`: the text, without the markup."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


@pytest.mark.parametrize("page", ["list", "conversation"])
def test_the_card_says_the_action_customer_messages_and_running_total_in_words(
    agent, client_a, page
):
    approval = held_refund(client_a, earlier=150)
    url = (
        reverse("console-approvals")
        if page == "list"
        else reverse("console-conversation", args=[approval.conversation.public_id])
    )
    html = agent.get(url + q(approval)).content.decode()
    text = card(html, approval)
    assert "Refund order: 425.76 on order TH-12346" in text
    assert "Reason</dt>" in text and "torn" in text
    assert "Ana Lima · ana@example.com (verified)" in text
    # the last messages the customer saw, not the internal ones
    assert "Order TH-12346, please refund all of it" in text
    assert "Sorry to hear that. Which order?" in text
    assert "internal assessment" not in text
    # this refund plus the one that ran for the same customer: 575.76
    assert "Customer's running total" in text and "575.76" in text
    # no JSON, no internal ids in what is shown
    read = shown(text)
    assert '"amount"' not in read and "{" not in read and "order_id" not in read
    assert approval.idempotency_key not in read and "refund_order" not in read
    assert str(approval.conversation.public_id)[:8] not in read
    assert "Customer's running total 575.76" in read


def test_the_card_reads_in_the_staff_members_language(agent, client_a):
    approval = held_refund(client_a, amount=1425.5)
    html = agent.get(
        reverse("console-approvals") + q(approval), HTTP_ACCEPT_LANGUAGE="es"
    ).content.decode()
    text = card(html, approval)
    # Spanish separators (a no-break space between thousands), the sentence in Spanish
    assert "Refund order: 1\u00a0425,50 en el pedido TH-12346" in text
    assert "(verificado)" in text


def test_a_tool_definitions_display_name_and_labels_are_used_when_it_has_them(client_a):
    translation.activate("en")
    tool = refund_tool(client_a)
    assert tool_label(tool) == "Refund order"
    assert param_label(tool, "order_id") == "Order id"
    tool.display_name = {"en": "Refund", "es": "Reembolso"}
    tool.labels = {"en": {"order_id": "order"}, "es": {"order_id": "pedido"}}
    assert tool_label(tool) == "Refund"
    assert param_label(tool, "order_id") == "Order"
    with translation.override("es"):
        assert tool_label(tool) == "Reembolso"
        assert param_label(tool, "order_id") == "Pedido"
    tool.labels = {"es": {"amount": "importe"}}
    assert param_label(tool, "amount", "es") == "Importe"
    assert param_label(tool, "amount", "de") == "Amount"


def test_a_clients_card_list_never_shows_another_clients_messages(browser_for, client_a, client_b):
    approval_a = held_refund(client_a)
    held_refund(client_b, amount=99.5)
    b_owner = browser_for(StaffRole.OWNER, client=client_b)
    html = b_owner.get(reverse("console-approvals") + f"?client={client_b.slug}").content.decode()
    assert "99.50" in html and "425.76" not in html
    assert str(approval_a.public_id) not in html
    page = b_owner.get(
        reverse("console-conversation", args=[approval_a.conversation.public_id])
        + f"?client={client_b.slug}"
    )
    assert page.status_code == 404


def test_the_list_loads_every_cards_messages_at_once(agent, client_a):
    url = reverse("console-approvals") + f"?client={client_a.slug}"
    held_refund(client_a, amount=120)
    agent.get(url)  # warm the session and caches
    with CaptureQueriesContext(connection) as one:
        agent.get(url)
    held_refund(client_a, amount=130)
    held_refund(client_a, amount=140)
    with CaptureQueriesContext(connection) as three:
        html = agent.get(url).content.decode()
    assert html.count("Order TH-12346, please refund all of it") == 3
    assert len(three.captured_queries) == len(one.captured_queries)
