"""An identifying tool parameter (`"x-identifier": true`) must have been given in this
conversation — typed by the customer or returned by an earlier tool result — before the tool
runs or is put to the customer. Small models copy the example id out of a parameter's
description ("Track my order" ran track_shipment {"order_id": "TH-10042"}); the guard asks for
it instead, in every mode and language."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from apps.conversations.services import conversation_create
from apps.tools.identifiers import given_words, identifier_params, spellings, ungiven
from apps.tools.models import ClientTool, PendingAction
from tests.support.fake_webhook import Reply
from tests.support.shop import ORDER_SCHEMA, Chat, assess, cancel_assess, critique

pytestmark = pytest.mark.django_db

MARKED: dict[str, Any] = copy.deepcopy(ORDER_SCHEMA)
MARKED["properties"]["order_id"]["x-identifier"] = True


# -- the rule, on its own ------------------------------------------------------------------------

# (what the conversation gave, the id the model wrote): never enough.
NOT_GIVEN = [
    ([], "TH-12345"),
    (["Track my order"], "TH-12345"),
    (["Where is my order?", "It's the blue jacket"], "TH-10042"),
    (["My order is TH-1004"], "TH-10042"),  # part of the digits
    (["order 1004"], "TH-10042"),
    (["order 0042"], "TH-10042"),
    (["TH-100421"], "TH-10042"),  # a longer id is another id
    (["TH-10043 please"], "TH-10042"),
    (["I paid 10042 dollars... no, just kidding"], "TH-100420"),
    ([{"status": "shipped", "order_id": "TH-55555"}], "TH-12345"),
    (["", "yes"], "TH-12345"),
]
# ... and enough.
GIVEN = [
    (["Where is TH-12345?"], "TH-12345"),
    (["where is th12345"], "TH-12345"),
    (["order th 12345 please"], "TH-12345"),
    (["Order #TH_12345."], "TH-12345"),
    (["Hi", "Order 12345"], "TH-12345"),  # the whole digit run of a prefixed id
    (["¿Dónde está mi pedido «TH-12345»?"], "TH-12345"),
    (["הזמנה TH-12345"], "TH-12345"),
    ([{"orders": [{"id": "TH-54321", "status": "shipped"}]}], "TH-54321"),
    (["card 4111 1111 1111 1111"], "4111111111111111"),
]


@pytest.mark.parametrize(("texts", "value"), NOT_GIVEN)
def test_an_id_the_conversation_did_not_give_is_not_given(texts: list[Any], value: str) -> None:
    assert ungiven(MARKED, {"order_id": value}, given_words(texts)) == ["order_id"]


@pytest.mark.parametrize(("texts", "value"), GIVEN)
def test_an_id_typed_or_returned_in_any_spelling_is_given(texts: list[Any], value: str) -> None:
    assert ungiven(MARKED, {"order_id": value}, given_words(texts)) == []


def test_only_marked_params_are_checked() -> None:
    assert identifier_params(ORDER_SCHEMA) == []
    assert ungiven(ORDER_SCHEMA, {"order_id": "TH-12345"}, set()) == []
    assert identifier_params(MARKED) == ["order_id"]
    assert spellings("TH-12345") == {"th12345", "12345"}
    assert spellings("12") == {"12"} and spellings(None) == set() and spellings("--") == set()


# -- in a turn -----------------------------------------------------------------------------------


@pytest.fixture
def marked(shop, standard_shop):
    for client in (shop, standard_shop):
        for tool in ClientTool.objects.for_client(client):
            if "order_id" in tool.parameters.get("properties", {}):
                tool.parameters["properties"]["order_id"]["x-identifier"] = True
                tool.save(update_fields=["parameters"])
    return shop


def test_an_id_from_the_description_is_asked_for_never_looked_up(marked, chat, llm, webhook):
    llm.script(
        "assess",
        assess(
            tool_call="get_order_status",
            tool_params={"order_id": "TH-12345"},  # "like TH-12345" in the description
            response="Order TH-12345 is on its way.",
        ),
    )
    [reply] = chat.say("Track my order")
    assert webhook.requests == []
    assert "TH-12345" not in reply.text
    assert "order_id" in reply.text or "order" in reply.text.lower()
    [guard] = chat.all(kind="guard")
    assert guard.data["reason"] == "ungiven_identifier"


def test_an_id_of_another_conversation_is_not_given_here(marked, chat, llm, webhook, shop):
    llm.script("assess", assess(tool_call="get_order_status", tool_params={"order_id": "TH-12345"}))
    llm.script("compose", {"response": "Shipped."})
    webhook.script(Reply.ok({"status": "shipped"}))
    chat.say("Where is TH-12345?")
    assert len(webhook.requests) == 1

    other = Chat(shop, conversation_create(client=shop)[0], chat._capture)
    llm.script("assess", assess(tool_call="get_order_status", tool_params={"order_id": "TH-12345"}))
    [reply] = other.say("And my order?")
    assert len(webhook.requests) == 1
    assert "TH-12345" not in reply.text


def test_an_id_typed_earlier_or_returned_by_a_tool_runs(marked, chat, llm, webhook):
    llm.script("assess", assess(response="Which order?", confidence=9))
    chat.say("Hi, it's about th 12345")
    llm.script("assess", assess(tool_call="get_order_status", tool_params={"order_id": "TH-12345"}))
    llm.script("compose", {"response": "Shipped, together with TH-54321."})
    webhook.script(Reply.ok({"status": "shipped", "shipped_with": "TH-54321"}))
    chat.say("Where is it?")
    assert [r.json["params"] for r in webhook.requests] == [{"order_id": "TH-12345"}]

    llm.script("assess", assess(tool_call="get_order_status", tool_params={"order_id": "TH-54321"}))
    llm.script("compose", {"response": "Also shipped."})
    webhook.script(Reply.ok({"status": "shipped"}))
    chat.say("And the other one?")
    assert [r.json["params"]["order_id"] for r in webhook.requests] == ["TH-12345", "TH-54321"]


def test_no_confirmation_question_for_an_id_nobody_gave(marked, chat, llm, webhook):
    llm.script("assess", cancel_assess(response=""))
    llm.script("critique", critique("PROCEED"))
    [reply] = chat.say("Cancel my order")
    assert reply.kind != "confirmation_request"
    assert not PendingAction.objects.unscoped("test checks the database directly").exists()
    assert webhook.requests == []


def test_standard_mode_asks_in_the_customer_s_language(
    marked, standard_shop, llm, webhook, django_capture_on_commit_callbacks
):
    standard_shop.languages = ["en", "es"]
    standard_shop.save(update_fields=["languages"])
    chat = Chat.new(standard_shop, django_capture_on_commit_callbacks)
    llm.script(
        "respond",
        {
            "response": "Su pedido TH-12345 está en camino.",
            "tool_call": "get_order_status",
            "tool_params": {"order_id": "TH-12345"},
        },
    )
    [reply] = chat.say("Hola, ¿dónde está mi pedido? Lo compré la semana pasada.")
    assert webhook.requests == []
    assert reply.text.startswith("Para hacerlo necesito algunos datos")
    assert "TH-12345" not in reply.text
