"""A tool call held for a teammate's approval, made without running a turn: for the API, console
and browser tests of deciding it."""

from __future__ import annotations

from typing import Any

from apps.approvals.models import ApprovalRequest
from apps.approvals.services import approval_request_create
from apps.clients.models import Client
from apps.conversations.models import Role
from apps.conversations.services import conversation_create, message_append
from apps.tools.models import ClientTool, ToolKind
from tests.factories import ClientToolFactory

REFUND_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string", "pattern": "^TH-\\d{5}$"},
        "amount": {"type": "number", "minimum": 0},
    },
    "required": ["order_id", "amount"],
    "additionalProperties": False,
}


def refund_tool(client: Client, webhook_url: str = "https://shop.example/hook") -> ClientTool:
    tool = ClientTool.objects.for_client(client).filter(name="refund_order").first()
    return tool or ClientToolFactory(
        client=client,
        name="refund_order",
        kind=ToolKind.DESTRUCTIVE,
        description="Refund an order.",
        parameters=REFUND_SCHEMA,
        webhook_url=webhook_url,
        signing_secret="shop-signing-secret",
        approval_rule={"param": "amount", "above": 100},
    )


def pending_approval(
    client: Client,
    *,
    webhook_url: str = "https://shop.example/hook",
    amount: float = 150,
    key: str | None = None,
) -> ApprovalRequest:
    tool = refund_tool(client, webhook_url)
    conversation, _ = conversation_create(client=client, visitor_id="visitor-approval")
    asked = message_append(
        client=client,
        conversation=conversation,
        role=Role.USER,
        text=f"Please refund {amount} on TH-12345",
    )
    approval, _ = approval_request_create(
        client=client,
        conversation=conversation,
        tool=tool,
        params={"order_id": "TH-12345", "amount": amount},
        idempotency_key=key or f"test-{client.slug}-{conversation.pk}",
        requested_in=asked,
        trace=None,
    )
    return approval
