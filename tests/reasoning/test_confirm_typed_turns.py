"""Typed confirmations in other languages, end to end: a real turn (the real openai SDK against
the scripted server, a real webhook) runs the destructive tool once on "sí, cancélalo" or
"כן, בטל את ההזמנה", and never on a conditional or foreign-order answer in the same language."""

from __future__ import annotations

from typing import Any

import pytest

from apps.conversations.services import conversation_create
from apps.tools.models import PendingAction, PendingActionStatus
from tests.reasoning.conftest import Chat, assess, critique
from tests.support.fake_webhook import Reply

pytestmark = pytest.mark.django_db
ORDER = {"order_id": "TH-12345"}


@pytest.fixture
def chat(shop, django_capture_on_commit_callbacks) -> Chat:
    return Chat(shop, conversation_create(client=shop)[0], django_capture_on_commit_callbacks)


def _ask(chat: Chat, llm: Any, text: str) -> None:
    llm.script(
        "assess",
        assess(
            response="Puedo cancelar el pedido TH-12345.",
            tool_call="cancel_order",
            tool_params=ORDER,
            is_destructive=True,
        ),
    )
    llm.script("critique", critique("ASK_USER", "¿Cancelar?", "destructive"))
    [question] = chat.say(text)
    assert question.kind == "confirmation_request"


def _status() -> str:
    return PendingAction.objects.unscoped("test checks the database directly").get().status


@pytest.mark.parametrize(
    "answer", ["sí, cancélalo", "Sí, adelante", "כן, בטל את ההזמנה", "نعم، ألغِ الطلب", "ja bitte"]
)
def test_a_typed_yes_in_another_language_runs_the_action_once(chat, llm, webhook, answer):
    _ask(chat, llm, "Quiero cancelar mi pedido TH-12345")
    llm.script(
        "assess", assess(response="Cancelando.", tool_call="cancel_order", tool_params=ORDER)
    )
    llm.script("critique", critique("PROCEED"))
    webhook.script(Reply.ok({"status": "cancelled"}))
    llm.script("compose", {"response": "Listo: el pedido TH-12345 está cancelado."})
    [reply] = chat.say(answer)
    assert reply.text == "Listo: el pedido TH-12345 está cancelado."
    [call] = webhook.requests
    assert call.params == ORDER
    assert _status() == PendingActionStatus.EXECUTED


@pytest.mark.parametrize(
    ("answer", "status"),
    [
        ("sí, si todavía no se envió", PendingActionStatus.DECLINED),  # "no" in it: a no
        ("sí, pero primero dime el importe", PendingActionStatus.EXPIRED),
        ("sí, cancela el pedido TH-54321", PendingActionStatus.EXPIRED),
        ("כן, אם אפשר", PendingActionStatus.EXPIRED),
        ("לא, אל תבטל", PendingActionStatus.DECLINED),
    ],
)
def test_a_conditional_or_foreign_answer_runs_nothing(chat, llm, webhook, answer, status):
    _ask(chat, llm, "Quiero cancelar mi pedido TH-12345")
    llm.script("assess", assess(response="¿En qué más puedo ayudarte?"))
    chat.say(answer)
    assert webhook.requests == []
    assert _status() == status
