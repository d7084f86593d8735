"""Reply-template variables come from verified data and tool results only, and a reply that still
holds one is never sent. The order id cases run real turns: the real openai SDK against the
local model server, tools through the local webhook server."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone

from apps.accounts.models import Role
from apps.conversations.models import Conversation, Message
from apps.conversations.models import Role as MessageRole
from apps.conversations.services import conversation_create
from apps.escalations.reply_templates import (
    clean_name,
    clean_order_id,
    reply_template_create,
    template_render,
    template_values,
    unfilled_variables,
)
from apps.tools.models import (
    ExecutionStatus,
    PendingAction,
    PendingActionStatus,
    ToolExecution,
    ToolKind,
)
from tests.api.conftest import assert_error
from tests.conftest import key_for, session_for
from tests.factories import ClientToolFactory, UserFactory
from tests.support.fake_webhook import Reply
from tests.support.shop import SECRET, assess, cancel_assess, critique

pytestmark = pytest.mark.django_db

PHISHING = "my order is 123 — click http://evil.example"
BODY = "Hi {customer_name}, your order {order_id} is on its way. — {agent_name}"


def executions(client: Any) -> list[ToolExecution]:
    return list(ToolExecution.objects.for_client(client).order_by("pk"))


def staff_lines(conversation: Conversation) -> list[str]:
    return list(
        Message.objects.for_client(conversation.client)
        .filter(conversation=conversation, role=MessageRole.STAFF)
        .values_list("text", flat=True)
    )


def verify(conversation: Conversation, *, name: str, email: str = "") -> None:
    conversation.customer_id = "cust-1"
    conversation.customer_name = name
    conversation.customer_email = email
    conversation.customer_verified_via = "signed"
    conversation.customer_verified_at = timezone.now()
    conversation.save()


# -- what a value may be -----------------------------------------------------------------------


@pytest.mark.parametrize("value", ["TH-12345", "100234", "#TH-12345", 100234, "A1B2_C3"])
def test_an_order_id_that_looks_like_one_is_kept(value):
    assert clean_order_id(value) == str(value).removeprefix("#")


@pytest.mark.parametrize(
    "value",
    [
        PHISHING,
        "123 click http://evil.example",
        "http://evil.example/123",
        "evil.example",
        "TH-12345\nClick here",
        "TH 12345",
        "TH-12345.",
        "order",  # no digit
        "{order_id}",
        "١٢٣٤٥",  # digits, but not ASCII
        "1" * 41,
        "",
        True,
        None,
        {"id": "TH-12345"},
    ],
)
def test_anything_else_is_no_order_id_and_nothing_is_cut_out_of_it(value):
    assert clean_order_id(value) == ""


@pytest.mark.parametrize("name", ["Ana", "José María", "O'Brien", "Nguyễn Văn An", "محمد", "שרה"])
def test_a_name_in_any_script_is_kept(name):
    assert clean_name(name) == name


@pytest.mark.parametrize(
    "name", ["Ana http://evil.example", "Ana\nClick here", "{order_id}", "Ana <b>", "R2D2", ""]
)
def test_a_name_carrying_anything_else_is_dropped(name):
    assert clean_name(name) == ""


def test_a_placeholder_left_in_a_reply_is_found_but_literal_braces_are_not():
    assert unfilled_variables("Hi {customer_name}, order { order_id } — {customer_name}") == [
        "customer_name",
        "order_id",
    ]
    assert unfilled_variables("Use {{order_id}} literally, and {coupon} is no variable") == []


# -- the customer's name: verified or nothing --------------------------------------------------


def test_an_unverified_name_is_not_used_and_the_reply_is_blocked_naming_it(client_a):
    conversation, _ = conversation_create(client=client_a)
    conversation.customer_name = "Ana"  # typed, never verified
    conversation.save()
    reply_template_create(client=client_a, name="Hi", shortcut="hi", body="Hi {customer_name}!")
    api = session_for(client_a, Role.AGENT)
    [row] = api.get(f"/api/v1/reply-templates/?conversation={conversation.public_id}").json()[
        "results"
    ]
    assert (row["text"], row["missing"]) == ("Hi {customer_name}!", ["customer_name"])

    refused = api.post(
        f"/api/v1/conversations/{conversation.public_id}/messages",
        {"text": row["text"]},
        format="json",
    )
    error = assert_error(refused, 400, "unfilled_variable")
    assert "{customer_name}" in error["message"]
    assert "{customer_name}" in error["fields"]["text"]
    assert staff_lines(conversation) == []
    conversation.refresh_from_db()
    assert conversation.status == "open"  # not taken over by a refused reply

    # Filled in by hand, it goes.
    sent = api.post(
        f"/api/v1/conversations/{conversation.public_id}/messages",
        {"text": "Hi Ana!"},
        format="json",
    )
    assert sent.status_code == 201, sent.content
    assert staff_lines(conversation) == ["Hi Ana!"]


def test_a_verified_customer_fills_name_and_email(client_a):
    conversation, _ = conversation_create(client=client_a)
    verify(conversation, name="Ana Lima", email="ana@example.com")
    user = UserFactory(email="sam@acme.example", first_name="Sam")
    values = template_values(client=client_a, conversation=conversation, user=user)
    assert values["customer_name"] == "Ana Lima"
    assert values["customer_email"] == "ana@example.com"
    rendered = template_render(
        body="Hi {customer_name} ({customer_email}) — {agent_name}", values=values
    )
    assert rendered.text == "Hi Ana Lima (ana@example.com) — Sam"
    assert rendered.missing == []


def test_a_verified_name_that_is_not_a_name_is_not_used(client_a):
    conversation, _ = conversation_create(client=client_a)
    verify(conversation, name="Ana — click http://evil.example")
    values = template_values(client=client_a, conversation=conversation, user=None)
    assert values["customer_name"] == ""


@pytest.mark.parametrize(
    ("language", "words"), [("en", "Fill in {order_id}"), ("es", "Completa {order_id}")]
)
def test_the_console_refuses_a_reply_with_a_placeholder_and_names_it(
    browser_for, client_a, language, words
):
    conversation, _ = conversation_create(client=client_a)
    agent = browser_for(Role.AGENT)
    agent.cookies[settings.LANGUAGE_COOKIE_NAME] = language
    url = f"/console/conversations/{conversation.public_id}/reply"
    page = agent.post(url, {"text": "Your order {order_id} has shipped."})
    assert page.status_code == 400
    assert words in page.content.decode()
    assert staff_lines(conversation) == []
    conversation.refresh_from_db()
    assert conversation.status == "open"


# -- the order id: the order the conversation acted on -----------------------------------------


def test_the_order_a_tool_ran_on_not_the_one_mentioned_later(chat, llm, webhook):
    # The assistant looks up TH-12345: the tool runs and succeeds.
    llm.script("assess", assess(tool_call="get_order_status", tool_params={"order_id": "TH-12345"}))
    webhook.script(Reply.ok({"order_id": "TH-12345", "status": "shipped"}))
    llm.script("compose", {"response": "Order TH-12345 has shipped."})
    chat.say("Where is my order TH-12345?")
    # Then the customer brings up TH-99999: the lookup is refused by the shop …
    llm.script("assess", assess(tool_call="get_order_status", tool_params={"order_id": "TH-99999"}))
    webhook.script(Reply.fail("Order TH-99999 not found"))
    llm.script("compose", {"response": "I couldn't find order TH-99999."})
    chat.say("And TH-99999?")
    # … and its cancellation is proposed but never confirmed.
    llm.script("assess", cancel_assess("TH-99999"))
    llm.script("critique", critique("ASK_USER", "Do you want to cancel order TH-99999?"))
    chat.say("Cancel TH-99999 please")

    runs = [(e.params["order_id"], e.status) for e in executions(chat.client)]
    assert runs == [("TH-12345", ExecutionStatus.SUCCEEDED), ("TH-99999", ExecutionStatus.FAILED)]
    pending = PendingAction.objects.for_client(chat.client).get()
    assert pending.status == PendingActionStatus.PENDING
    values = template_values(client=chat.client, conversation=chat.conversation, user=None)
    assert values["order_id"] == "TH-12345"

    # Once the customer confirms and the cancellation runs, that is the order acted on.
    llm.script("assess", cancel_assess("TH-99999", confirmed=True))
    llm.script("critique", critique("PROCEED", reasoning="confirmed"))
    webhook.script(Reply.ok({"order_id": "TH-99999", "status": "cancelled"}))
    llm.script("compose", {"response": "Order TH-99999 is cancelled."})
    chat.say("Yes, cancel it")
    assert executions(chat.client)[-1].status == ExecutionStatus.SUCCEEDED
    values = template_values(client=chat.client, conversation=chat.conversation, user=None)
    assert values["order_id"] == "TH-99999"


def test_the_customers_phishing_line_never_becomes_the_order_id(chat, llm, webhook):
    # A tool whose schema takes any string: the model passes the customer's whole line, the
    # shop's backend answers, and the run succeeds — its parameter is still no order id.
    ClientToolFactory(
        client=chat.client,
        name="track_parcel",
        kind=ToolKind.READ,
        webhook_url=webhook.url(),
        signing_secret=SECRET,
        parameters={
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
        description="Track a parcel.",
    )
    llm.script("assess", assess(tool_call="track_parcel", tool_params={"order_id": PHISHING}))
    webhook.script(Reply.ok({"found": False}))
    llm.script("compose", {"response": "I couldn't find that parcel."})
    chat.say(PHISHING)
    [run] = executions(chat.client)
    assert (run.params["order_id"], run.status) == (PHISHING, ExecutionStatus.SUCCEEDED)

    reply_template_create(client=chat.client, name="Order", shortcut="order", body=BODY)
    api = session_for(chat.client, Role.AGENT)
    [row] = api.get(f"/api/v1/reply-templates/?conversation={chat.conversation.public_id}").json()[
        "results"
    ]
    assert "evil" not in row["text"] and "123" not in row["text"]
    assert "{order_id}" in row["text"]
    assert row["missing"] == ["customer_name", "order_id"]


def test_a_proposed_but_unconfirmed_action_does_not_fill_the_order_id(client_a):
    conversation, _ = conversation_create(client=client_a)
    tool = ClientToolFactory(client=client_a, name="cancel_order")
    question = Message.objects.create(
        client=client_a, conversation=conversation, seq=1, role=MessageRole.USER, text="cancel"
    )
    for key, status in (("a", PendingActionStatus.PENDING), ("b", PendingActionStatus.DECLINED)):
        PendingAction.objects.create(
            client=client_a,
            conversation=conversation,
            tool=tool,
            params={"order_id": "TH-55555"},
            params_hash=key,
            status=status,
            proposed_in=question,
            expires_at=timezone.now(),
            idempotency_key=f"p-{key}",
        )
    assert template_values(client=client_a, conversation=conversation, user=None)["order_id"] == ""
    PendingAction.objects.for_client(client_a).filter(status=PendingActionStatus.PENDING).update(
        status=PendingActionStatus.CONFIRMED
    )
    values = template_values(client=client_a, conversation=conversation, user=None)
    assert values["order_id"] == "TH-55555"


# -- tenants -----------------------------------------------------------------------------------


def test_another_client_cannot_fill_or_send_into_a_conversation(client_a, client_b):
    conversation, _ = conversation_create(client=client_a)
    verify(conversation, name="Ana")
    reply_template_create(client=client_b, name="Hi", shortcut="hi", body="Hi {customer_name}")
    other = key_for(client_b, Role.OWNER)
    listed = other.get(f"/api/v1/reply-templates/?conversation={conversation.public_id}")
    assert_error(listed, 404)
    assert b"Ana" not in listed.content
    for text in ("Hi {customer_name}", "Hi Ana"):
        sent = other.post(
            f"/api/v1/conversations/{conversation.public_id}/messages",
            {"text": text},
            format="json",
        )
        assert_error(sent, 404)
    assert staff_lines(conversation) == []
    conversation.refresh_from_db()
    assert conversation.status == "open"


def test_another_clients_agent_cannot_reply_in_the_console(browser_for, client_a, client_b):
    conversation, _ = conversation_create(client=client_a)
    outsider = browser_for(Role.AGENT, client=client_b)
    url = f"/console/conversations/{conversation.public_id}/reply?client={client_b.slug}"
    assert outsider.post(url, {"text": "Your order {order_id}"}).status_code == 404
    assert outsider.post(url, {"text": "Hello"}).status_code == 404
    assert staff_lines(conversation) == []
