"""A Spanish and a Hebrew customer through the widget API: the README's flows (order status, a
returns question, the three-turn cancellation, hand-off) answered in their language — by the
offline demo model, and by a model behind the scripted fake server asked for that language."""

from __future__ import annotations

from typing import Any

import pytest

from apps.conversations.models import Conversation, ConversationStatus
from apps.core.languages import detect
from devtools.fake_llm import RecordedRequest
from tests.languages.conftest import say
from tests.support.fake_webhook import Reply
from tests.support.shop import cancel_assess, critique
from tests.widget.conftest import Widget

pytestmark = pytest.mark.django_db(transaction=True)

STATUS = {
    "order_id": "TH-10042",
    "status": "shipped",
    "placed_on": "2026-11-20",
    "items": 2,
    "total": "89.00",
}
CANCELLED = {"order_id": "TH-12345", "status": "cancelled", "refund": "45.00"}

# Per language: the customer's messages, and words the assistant's replies must contain.
FLOWS: dict[str, dict[str, Any]] = {
    "es": {
        "status": "¿Cuál es el estado de mi pedido TH-10042?",
        "status_reply": "El pedido TH-10042",
        "returns": "¿Cuál es su política de devoluciones?",
        "returns_reply": "Esto dice nuestra política:",
        "cancel": "Quiero cancelar mi pedido, por favor",
        "ask_reply": "número de pedido",
        "order": "Pedido 12345",
        "cancelled_reply": "El pedido TH-12345 ha sido cancelado",
        "person": "Quiero hablar con una persona",
    },
    "he": {
        "status": "מה הסטטוס של ההזמנה שלי TH-10042?",
        "status_reply": "הזמנה TH-10042",
        "returns": "מה מדיניות ההחזרות שלכם?",
        "returns_reply": "כך כתוב במדיניות שלנו:",
        "cancel": "אני רוצה לבטל את ההזמנה שלי",
        "ask_reply": "מספר ההזמנה",
        "order": "הזמנה 12345",
        "cancelled_reply": "הזמנה TH-12345 בוטלה",
        "person": "אני רוצה לדבר עם נציג",
    },
}


@pytest.fixture
def multilingual(shop: Any) -> Any:
    shop.language, shop.languages = "en", ["en", "es", "he"]
    shop.save(update_fields=["language", "languages"])
    return shop


def _reply_text(body: dict[str, Any]) -> str:
    return "\n".join(r["text"] for r in body["replies"])


@pytest.mark.parametrize("code", ["es", "he"])
def test_offline_demo_model_answers_the_readme_flows(multilingual, webhook, settings, code):
    settings.OPENAI_API_KEY = ""  # the offline demo model answers
    flow = FLOWS[code]
    widget = Widget(multilingual)
    conversation_id, token = widget.conversation()

    webhook.script(Reply.ok(STATUS))
    body = say(widget, conversation_id, token, flow["status"])
    assert body["language"] == code and body["message"]["language"] == code
    assert flow["status_reply"] in _reply_text(body)
    assert all(r["language"] == code for r in body["replies"])

    body = say(widget, conversation_id, token, flow["returns"])
    assert _reply_text(body).startswith(flow["returns_reply"])

    # The three-turn cancellation (a new conversation, as in the README): the number is asked
    # for, the action put to the customer, then run once on their answer — every reply in
    # their language.
    conversation_id, token = widget.conversation()
    body = say(widget, conversation_id, token, flow["cancel"])
    assert flow["ask_reply"] in _reply_text(body)
    body = say(widget, conversation_id, token, flow["order"])
    [question] = body["replies"]
    assert question["kind"] == "confirmation_request" and "TH-12345" in question["text"]
    webhook.script(Reply.ok(CANCELLED))
    body = say(widget, conversation_id, token, "ok")
    assert body["language"] == code  # "ok" is too short to tell: the conversation's language
    assert flow["cancelled_reply"] in _reply_text(body)
    assert detect(_reply_text(body)) == code
    assert [r.json["tool"] for r in webhook.requests] == ["get_order_status", "cancel_order"]

    body = say(widget, conversation_id, token, flow["person"])
    assert [r["kind"] for r in body["replies"]] == ["handoff"]
    conversation = Conversation.objects.for_client(multilingual).get(public_id=conversation_id)
    assert conversation.status == ConversationStatus.ESCALATED
    assert conversation.language == code


def test_offline_demo_model_is_deterministic(multilingual, webhook, settings):
    settings.OPENAI_API_KEY = ""
    texts = []
    for _ in range(2):
        widget = Widget(multilingual)
        conversation_id, token = widget.conversation()
        texts.append(_reply_text(say(widget, conversation_id, token, FLOWS["es"]["cancel"])))
    assert texts[0] == texts[1]


# What a model behind the scripted server answers, in the language its prompt asks for.
SCRIPTED = {
    "es": {
        "ask": "Con gusto. ¿Cuál es su número de pedido?",
        "done": "Listo: el pedido TH-12345 está cancelado y le devolveremos 45 dólares.",
    },
    "he": {
        "ask": "בשמחה. מה מספר ההזמנה שלך?",
        "done": "בוצע: הזמנה TH-12345 בוטלה ונחזיר לך 45 דולר.",
    },
    "en": {"ask": "Sure. What is your order number?", "done": "Done: TH-12345 is cancelled."},
}


def _asked(request: RecordedRequest) -> str:
    system = request.messages[0]["content"]
    return next((code for code in ("es", "he") if f"({code})" in system), "en")


@pytest.mark.parametrize("code", ["es", "he"])
def test_a_model_asked_for_the_language_answers_in_it(multilingual, llm, webhook, code):
    flow = FLOWS[code]
    llm.script(
        "assess",
        lambda r: cancel_assess(None, response=SCRIPTED[_asked(r)]["ask"]),
        cancel_assess(response="…"),
        cancel_assess(confirmed=True, response="…"),
    )
    llm.script(
        "critique",
        lambda r: critique("ASK_USER", SCRIPTED[_asked(r)]["ask"]),
        critique("ASK_USER", ""),
        critique("PROCEED"),
    )
    llm.script("compose", lambda r: {"response": SCRIPTED[_asked(r)]["done"]})
    widget = Widget(multilingual)
    conversation_id, token = widget.conversation()

    body = say(widget, conversation_id, token, flow["cancel"])
    assert _reply_text(body) == SCRIPTED[code]["ask"]
    body = say(widget, conversation_id, token, flow["order"])
    assert body["replies"][0]["kind"] == "confirmation_request"
    webhook.script(Reply.ok(CANCELLED))
    body = say(widget, conversation_id, token, "ok")
    assert _reply_text(body) == SCRIPTED[code]["done"]
    assert [r["language"] for r in body["replies"]] == [code]
    # Every customer-facing call was asked for the language; the critique was told it.
    name = {"es": "Spanish", "he": "Hebrew"}[code]
    for request in llm.calls("assess") + llm.calls("compose"):
        assert request.messages[0]["content"].rstrip().endswith(f"Reply in {name} ({code}).")
    for request in llm.calls("critique"):
        assert f"must be in {name} ({code})" in request.messages[0]["content"]
