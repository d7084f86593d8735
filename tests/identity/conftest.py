"""A shop without a login: its `order_status` read tool (on the real local webhook server)
returns the customer on file for an order, and its e-mail code setting points at it."""

from __future__ import annotations

from typing import Any

import pytest

from apps.conversations.services import conversation_create
from apps.identity.services import email_code_setting_save
from apps.tools.models import ToolKind
from tests.factories import ClientFactory, ClientToolFactory
from tests.support.fake_webhook import Reply, WebhookRequest
from tests.support.shop import SECRET, Chat

# The shop's back office: order → the customer on file.
ORDERS: dict[str, dict[str, Any]] = {
    "TH-12345": {"status": "shipped", "customer": {"id": "C-42", "email": "jane@example.com"}},
    "TH-22222": {"status": "packed", "customer": {"id": "C-77", "email": "omar@example.org"}},
    "TH-33333": {"status": "packed", "customer": {"id": "C-78", "email": "li@example.net"}},
    "TH-44444": {"status": "packed", "customer": {"id": "C-79", "email": "ana@example.com"}},
    "TH-55555": {"status": "packed", "customer": {"id": "C-80", "email": "bo@example.com"}},
    "TH-66666": {"status": "packed", "customer": {"id": "C-81", "email": "cy@example.com"}},
    "TH-99999": {"status": "packed", "customer": {"id": "C-99"}},  # no address on file
}
LOOKUP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string", "pattern": "^TH-\\d{5}$"},
        # The back office may take an address to narrow the search; the code still goes only
        # to the address it returns.
        "email": {"type": "string"},
    },
    "required": ["order_id"],
    "additionalProperties": False,
}


def back_office(request: WebhookRequest) -> Reply:
    order = ORDERS.get((request.params or {}).get("order_id", ""))
    if order is None:
        return Reply.fail("We have no order with that number.")
    return Reply.ok({"order_id": request.params["order_id"], **order})


def make_shop(slug: str, webhook_url: str, *, configure: bool = True):
    client = ClientFactory(slug=slug, name=f"Shop {slug}")
    ClientToolFactory(
        client=client,
        name="order_status",
        kind=ToolKind.READ,
        description="Look up an order.",
        parameters=LOOKUP_SCHEMA,
        webhook_url=webhook_url,
        signing_secret=SECRET,
    )
    if configure:
        email_code_setting_save(
            client=client,
            tool_name="order_status",
            email_field="customer.email",
            id_field="customer.id",
        )
    return client


@pytest.fixture
def hook(webhook):
    webhook.default(back_office)
    yield webhook
    webhook.default(None)


@pytest.fixture
def shop(db, hook):
    return make_shop("trail", hook.url())


@pytest.fixture
def other_shop(db, hook):
    return make_shop("rival", hook.url())


@pytest.fixture
def conversation(shop):
    return conversation_create(client=shop, visitor_id="visitor-1")[0]


@pytest.fixture
def chat(shop, conversation, django_capture_on_commit_callbacks) -> Chat:
    return Chat(shop, conversation, django_capture_on_commit_callbacks)
