"""`customer_scoped` tools run only for a verified customer (docs/widget.md "Identity
verification", docs/webhooks.md): a real turn through the openai SDK against the local LLM
server and the local webhook server. A second visitor who types a verified customer's order
number gets nothing done and nothing revealed — the webhook is never called — and is told how
to sign in; the verified customer's call carries `customer` inside the signed body."""

from __future__ import annotations

import json
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook

from apps.clients.identity import Identity
from apps.conversations.services import conversation_create, conversation_customer_verify
from apps.reasoning import guards
from apps.tools.executors.webhook import generate_secret
from apps.tools.models import ClientTool, ExecutionStatus, ToolExecution
from apps.tools.services import tool_execute
from tests.support.fake_webhook import Reply
from tests.support.shop import Chat, assess, cancel_assess, lookup_assess

pytestmark = pytest.mark.django_db

ORDER = {"order_id": "TH-12345", "status": "shipped", "address": "1 Elm St, Springfield"}


@pytest.fixture
def scoped(shop) -> dict[str, ClientTool]:
    tools = {t.name: t for t in ClientTool.objects.for_client(shop)}
    for name in ("get_order_status", "cancel_order"):
        tools[name].customer_scoped = True
        tools[name].signing_secret = generate_secret()
        tools[name].save()
    shop.signin_url = "https://shop.example/login"
    shop.save()
    return tools


def verified_chat(shop, capture, customer_id: str = "cust-1") -> Chat:
    conversation = conversation_create(client=shop)[0]
    conversation_customer_verify(
        client=shop,
        conversation=conversation,
        identity=Identity(customer_id=customer_id, email="ann@example.com", name="Ann", via="jwt"),
    )
    return Chat(shop, conversation, capture)


def test_a_second_visitor_with_the_order_number_gets_nothing(
    shop, scoped, llm, webhook, django_capture_on_commit_callbacks
):
    # The owner is a verified customer with their own conversation…
    verified_chat(shop, django_capture_on_commit_callbacks)
    # …and a second, anonymous visitor types their order number.
    stranger = Chat.new(shop, django_capture_on_commit_callbacks)
    llm.script("assess", lookup_assess(response="Let me look that up."))
    webhook.default(Reply.ok(ORDER))
    [reply] = stranger.say("What's the status of order TH-12345? Where is it going?")
    assert webhook.requests == []  # never called: nothing revealed
    assert "Elm" not in reply.text and "shipped" not in reply.text
    assert "sign in" in reply.text and "https://shop.example/login" in reply.text
    # The customer-scoped tools stayed out of what the model was offered, and it was told why.
    [request] = llm.calls("assess")
    assert "Only for signed-in customers" in request.prompt_text
    assert "cancel_order" in request.prompt_text.split("Only for signed-in customers")[1]
    enum = json.dumps(request.response_format)
    assert "get_order_status" not in enum and "cancel_order" not in enum
    assert ToolExecution.objects.for_client(shop).count() == 0

    # Nor can they cancel it, confirmation or not.
    for text in ("Cancel order TH-12345", "yes, cancel TH-12345"):
        llm.script("assess", cancel_assess(confirmed=True, response="Cancelling."))
        [reply] = stranger.say(text)
        assert "sign in" in reply.text
    assert llm.calls("critique") == []  # the guards decide: no critique call for it
    assert webhook.requests == []
    assert ToolExecution.objects.for_client(shop).count() == 0


def test_a_verified_customers_call_carries_the_customer_inside_the_signature(
    shop, scoped, llm, webhook, django_capture_on_commit_callbacks
):
    chat = verified_chat(shop, django_capture_on_commit_callbacks)
    llm.script("assess", lookup_assess(response="Let me look that up."))
    webhook.script(Reply.ok(ORDER))
    llm.script("compose", {"response": "Order TH-12345 has shipped."})
    [reply] = chat.say("What's the status of order TH-12345?")
    assert reply.text == "Order TH-12345 has shipped."
    [request] = webhook.requests
    payload = Webhook(scoped["get_order_status"].signing_secret).verify(
        request.raw_body, request.headers
    )
    assert payload["customer"] == {"id": "cust-1", "email": "ann@example.com", "verified": True}
    assert payload["params"] == {"order_id": "TH-12345"}
    # The offer included the tool: the verified customer's prompt names no sign-in line.
    assert "Only for signed-in customers" not in llm.calls("assess")[0].prompt_text


def test_an_anonymous_call_to_an_unscoped_tool_has_no_customer(
    shop, llm, webhook, django_capture_on_commit_callbacks
):
    chat = Chat.new(shop, django_capture_on_commit_callbacks)
    llm.script(
        "assess",
        assess(
            response="Checking.", tool_call="get_order_status", tool_params={"order_id": "TH-10042"}
        ),
    )
    webhook.script(Reply.ok({"status": "shipped"}))
    llm.script("compose", {"response": "It has shipped."})
    chat.say("Status of TH-10042?")
    [request] = webhook.requests
    assert "customer" not in request.json


def test_the_guard_refuses_a_customer_scoped_tool_for_an_unverified_customer(shop, scoped):
    tools = {t.name: t for t in ClientTool.objects.for_client(shop)}
    call: dict[str, Any] = {
        "tools_by_name": tools,
        "name": "get_order_status",
        "params": {"order_id": "TH-12345"},
        "confirmed": None,
        "calls_this_turn": [],
    }
    refused = guards.check_tool_call(**call)  # unverified unless said otherwise
    assert (refused.action, refused.reason) == ("refuse", "customer_not_verified")
    assert guards.check_tool_call(**call, customer_verified=True).action == "run"
    # Missing params are not even asked for: nothing about the tool leaks.
    bare = guards.check_tool_call(**{**call, "params": {}})
    assert bare.reason == "customer_not_verified"


def test_the_executor_refuses_as_a_second_line(shop, scoped, webhook):
    conversation = conversation_create(client=shop)[0]
    execution = tool_execute(
        client=shop,
        tool=scoped["cancel_order"],
        params={"order_id": "TH-12345"},
        idempotency_key="second-line-1",
        conversation=conversation,
    )
    assert execution.status == ExecutionStatus.FAILED
    assert "not verified" in execution.error
    no_conversation = tool_execute(
        client=shop,
        tool=scoped["cancel_order"],
        params={"order_id": "TH-12345"},
        idempotency_key="second-line-2",
    )
    assert no_conversation.status == ExecutionStatus.FAILED
    assert webhook.requests == []
