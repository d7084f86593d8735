"""The e-mail code where a customer meets it: an unverified visitor asks for a customer-scoped
tool (a cancel), and instead of "please sign in" the assistant sends a code to the address on
file for the order they named — the shop's lookup tool decides the address, the cancel never
runs. The typed code verifies the conversation, and the same request then goes ahead to the
confirmation question. Real turns: the openai SDK against the local model server, both tools
behind the local webhook server."""

from __future__ import annotations

import pytest
from django.core import mail

from apps.identity.models import EmailCodeSetting
from apps.tools.models import ClientTool, ToolExecution, ToolKind
from tests.factories import ClientToolFactory
from tests.identity.test_email_code import sent_code
from tests.support.shop import SECRET, assess

pytestmark = pytest.mark.django_db

CANCEL_SCHEMA = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}, "reason": {"type": "string"}},
    "required": ["order_id"],
}


@pytest.fixture
def cancel(shop, hook) -> ClientTool:
    return ClientToolFactory(
        client=shop,
        name="cancel_order",
        kind=ToolKind.DESTRUCTIVE,
        description="Cancel an order that has not shipped.",
        parameters=CANCEL_SCHEMA,
        webhook_url=hook.url(),
        signing_secret=SECRET,
        customer_scoped=True,
    )


def cancel_call(order_id: str) -> dict:
    return assess(
        response="I'll cancel it.",
        confidence=9,
        tool_call="cancel_order",
        tool_params={"order_id": order_id, "reason": "changed my mind"},
        is_destructive=True,
        needs_confirmation=True,
    )


def test_an_unverified_cancel_sends_a_code_to_the_address_on_file_and_never_runs(
    chat, shop, conversation, cancel, hook, llm
):
    llm.script("assess", cancel_call("TH-12345"))
    [reply] = chat.say("Please cancel order TH-12345, I'm mallory@evil.example")
    # Only the lookup ran, with the details it takes; the cancel never did.
    assert [r.json["tool"] for r in hook.requests] == ["order_status"]
    assert hook.requests[0].json["params"] == {"order_id": "TH-12345"}
    assert [m.to for m in mail.outbox] == [["jane@example.com"]]
    assert "j***@example.com" in reply.text and "jane@example.com" not in reply.text
    assert not ToolExecution.objects.for_client(shop).filter(tool=cancel).exists()
    conversation.refresh_from_db()
    assert not conversation.customer_verified

    # The code, typed: verified as the customer the back office named, no model call.
    calls = len(llm.requests)
    chat.say(sent_code("jane@example.com"))
    assert len(llm.requests) == calls
    conversation.refresh_from_db()
    assert conversation.customer_verified and conversation.customer_id == "C-42"

    # Now the same request reaches the confirmation question (nothing runs before a yes).
    llm.script("assess", cancel_call("TH-12345"))
    llm.script("critique", {"decision": "PROCEED", "reasoning": "ok", "message": ""})
    [question] = chat.say("Cancel order TH-12345 please")
    assert "TH-12345" in question.text and question.data.get("pending_action")
    assert not ToolExecution.objects.for_client(shop).filter(tool=cancel).exists()


def test_without_an_email_code_setting_the_visitor_is_asked_to_sign_in(
    chat, shop, conversation, cancel, hook, llm
):
    EmailCodeSetting.objects.for_client(shop).delete()
    llm.script("assess", cancel_call("TH-12345"))
    [reply] = chat.say("Please cancel order TH-12345")
    assert hook.requests == [] and mail.outbox == []
    assert "sign" in reply.text.lower()
