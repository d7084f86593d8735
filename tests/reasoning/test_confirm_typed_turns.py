"""Typed confirmations in other languages, end to end: a real turn (the real openai SDK against
the scripted server, a real webhook) runs the destructive tool once on "sí, cancélalo" or
"כן, בטל את ההזמנה", never on a conditional, sarcastic, reversed or foreign-order answer in the
same language; an unclear answer is asked again with the buttons (apps/reasoning/reask.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone, translation

from apps.reasoning import guards
from apps.tools.models import ClientTool, PendingAction, PendingActionStatus
from tests.reasoning.helpers import script_tool_run
from tests.support.shop import Chat, assess, cancel_assess, critique

pytestmark = pytest.mark.django_db
ORDER = {"order_id": "TH-12345"}
CANCELLED = "Listo: el pedido TH-12345 está cancelado."


def _ask(chat: Chat, llm: Any, text: str) -> None:
    llm.script(
        "assess",
        cancel_assess(response="Puedo cancelar el pedido TH-12345.", needs_confirmation=False),
    )
    llm.script("critique", critique("ASK_USER", "¿Cancelar?", "destructive"))
    [question] = chat.say(text)
    assert question.kind == "confirmation_request"


def script_cancelled(llm: Any, webhook: Any) -> None:
    """The confirmed cancellation runs and the customer is told so in Spanish."""
    plan = assess(response="Cancelando.", tool_call="cancel_order", tool_params=ORDER)
    script_tool_run(llm, webhook, plan, {"status": "cancelled"}, CANCELLED)


def _status() -> str:
    return PendingAction.objects.unscoped("test checks the database directly").get().status


@pytest.mark.parametrize(
    "answer", ["sí, cancélalo", "Sí, adelante", "כן, בטל את ההזמנה", "نعم، ألغِ الطلب", "ja bitte"]
)
def test_a_typed_yes_in_another_language_runs_the_action_once(chat, llm, webhook, answer):
    _ask(chat, llm, "Quiero cancelar mi pedido TH-12345")
    script_cancelled(llm, webhook)
    [reply] = chat.say(answer)
    assert reply.text == CANCELLED
    [call] = webhook.requests
    assert call.params == ORDER
    assert _status() == PendingActionStatus.EXECUTED


def _actions() -> list[PendingAction]:
    return list(
        PendingAction.objects.unscoped("test checks the database directly").order_by("created_at")
    )


@pytest.mark.parametrize(
    "answer",
    [
        "sí, pero primero dime el importe",  # a condition
        "Sí, cancela la cancelación",  # a reversal
        "Ya, claro",  # sarcasm
        "Vale gracias, ya está",  # thanks-but
        "כן, אם אפשר",
        "כן, בטל את הביטול",
    ],
)
def test_an_unclear_answer_is_asked_again_with_the_buttons(chat, llm, webhook, answer):
    """Nothing runs, no model is asked: the same action again, with its buttons and the
    reason, in the customer's language; the new question keeps the first one's deadline."""
    _ask(chat, llm, "Quiero cancelar mi pedido TH-12345")
    [again] = chat.say(answer)
    assert webhook.requests == []
    assert again.kind == "confirmation_request" and again.data["reask"] is True
    first, second = _actions()
    assert (first.status, second.status) == (
        PendingActionStatus.EXPIRED,
        PendingActionStatus.PENDING,
    )
    assert second.expires_at == first.expires_at and second.params == ORDER
    assert again.data["pending_action"] == second.pk and second.question_id == again.pk
    tool = ClientTool.objects.for_client(chat.client).get(name="cancel_order")
    with translation.override(again.language):  # the turn's reply language
        assert again.text == guards.reask_text(tool, ORDER)
    assert again.data["reason"]  # why it was no yes
    step = chat.all(kind="confirmation_request")  # both questions are in the conversation
    assert len(step) == 2


def test_asked_again_in_the_customers_language(shop, chat, llm, webhook):
    shop.languages = ["en", "es"]
    shop.save(update_fields=["languages"])
    _ask(chat, llm, "Quiero cancelar mi pedido TH-12345")
    [again] = chat.say("Sí, cancela la cancelación")
    assert again.language == "es"
    assert again.text == (
        "No lo he entendido como un sí. Pulse «Sí» para realizar la acción «Cancel order» "
        "(order id: TH-12345) o «No» para detenerla."
    )


def test_the_question_asked_again_runs_on_a_clear_yes(chat, llm, webhook):
    _ask(chat, llm, "Quiero cancelar mi pedido TH-12345")
    chat.say("Ya, claro")
    script_cancelled(llm, webhook)
    [reply] = chat.say("Sí, cancélalo")
    assert reply.text == CANCELLED
    assert len(webhook.requests) == 1
    assert [a.status for a in _actions()] == [
        PendingActionStatus.EXPIRED,
        PendingActionStatus.EXECUTED,
    ]


def test_a_second_unclear_answer_is_a_new_request(chat, llm, webhook):
    """Asked again once: a second unclear answer closes it and goes to the model."""
    _ask(chat, llm, "Quiero cancelar mi pedido TH-12345")
    chat.say("Ya, claro")
    llm.script("assess", assess(response="¿En qué más puedo ayudarte?"))
    [reply] = chat.say("sí, pero primero dime el importe")
    assert reply.text == "¿En qué más puedo ayudarte?"
    assert webhook.requests == []
    assert [a.status for a in _actions()] == [PendingActionStatus.EXPIRED] * 2


def test_an_unclear_answer_after_the_deadline_is_not_asked_again(chat, llm, webhook):
    _ask(chat, llm, "Quiero cancelar mi pedido TH-12345")
    PendingAction.objects.unscoped("test checks the database directly").update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    llm.script("assess", assess(response="¿En qué más puedo ayudarte?"))
    [reply] = chat.say("Ya, claro")
    assert reply.kind != "confirmation_request" and webhook.requests == []
    assert [a.status for a in _actions()] == [PendingActionStatus.EXPIRED]


@pytest.mark.parametrize(
    ("answer", "status"),
    [
        ("sí, cancela el pedido TH-54321", PendingActionStatus.EXPIRED),  # a new request
        ("¿cuánto tarda el envío?", PendingActionStatus.EXPIRED),
        ("לא, אל תבטל", PendingActionStatus.DECLINED),
        ("No, gracias", PendingActionStatus.DECLINED),
        ("sí, si todavía no se envió", PendingActionStatus.DECLINED),  # "todavía no": a no
    ],
)
def test_a_new_request_or_a_no_runs_nothing_and_is_not_asked_again(
    chat, llm, webhook, answer, status
):
    _ask(chat, llm, "Quiero cancelar mi pedido TH-12345")
    llm.script("assess", assess(response="¿En qué más puedo ayudarte?"))
    [reply] = chat.say(answer)
    assert reply.kind != "confirmation_request"
    assert webhook.requests == []
    assert [a.status for a in _actions()] == [status]
