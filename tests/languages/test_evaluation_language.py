"""The evaluation is told the expected reply language and flags a reply written in another."""

from __future__ import annotations

from typing import Any

import pytest

from apps.conversations.models import Kind, Message
from apps.reasoning.evaluation import wrong_language
from tests.reasoning.test_evaluation import ev, evaluation_on, respond
from tests.support.shop import Chat

pytestmark = pytest.mark.django_db

SPANISH = (
    "Puede devolver cualquier artículo sin usar dentro de los 30 días siguientes a la entrega "
    "y le enviamos una etiqueta de devolución por correo electrónico."
)
ENGLISH = (
    "You can return any unused item within 30 days of delivery and we email you a free "
    "return label straight away."
)


@pytest.fixture
def std_chat(standard_shop: Any, django_capture_on_commit_callbacks: Any) -> Chat:
    standard_shop.language, standard_shop.languages = "en", ["en", "es"]
    standard_shop.save(update_fields=["language", "languages"])
    return Chat.new(standard_shop, django_capture_on_commit_callbacks)


def test_wrong_language_in_code():
    assert wrong_language(SPANISH, expected="es") == ""
    assert wrong_language(ENGLISH, expected="es") == "written in English (en), not Spanish"
    assert wrong_language("OK", expected="es") == ""  # too short to tell: not flagged


def test_a_reply_in_the_wrong_language_is_flagged(std_chat: Chat, llm: Any) -> None:
    evaluation_on(std_chat)
    llm.script("respond", respond(ENGLISH))
    llm.script("evaluate", ev(True))
    [reply] = std_chat.say("¿Cuánto tiempo tengo para devolver un artículo?")
    assert reply.text == ENGLISH
    system = llm.calls("evaluate")[0].messages[0]["content"]
    assert "The reply to the customer must be in Spanish (es)" in system
    evaluation = Message.objects.for_client(std_chat.client).get(kind=Kind.EVALUATION)
    assert evaluation.data["expected_language"] == "es"
    assert evaluation.data["wrong_language"] == "written in English (en), not Spanish"


def test_an_improvement_in_the_wrong_language_is_refused(std_chat: Chat, llm: Any) -> None:
    evaluation_on(std_chat)
    llm.script("respond", respond(SPANISH))
    llm.script("evaluate", ev(None, improved=ENGLISH, conf=10))
    [reply] = std_chat.say("¿Cuánto tiempo tengo para devolver un artículo?")
    assert reply.text == SPANISH  # the draft stays
    evaluation = Message.objects.for_client(std_chat.client).get(kind=Kind.EVALUATION)
    assert evaluation.data["improvement_rejected"].startswith("written in English")
    assert evaluation.data["wrong_language"] == ""


POLICY_ES = (
    "Las devoluciones se aceptan dentro de los 30 días siguientes a la entrega, con reembolso "
    "completo al método de pago original."
)
DRAFT_ES = "Puede devolver un artículo dentro de los 30 días siguientes a la entrega."
GROUNDED_ES = (
    "Las devoluciones se aceptan dentro de los 30 días siguientes a la entrega, con reembolso "
    "completo al método de pago original."
)
UNSUPPORTED_ES = (
    "Las devoluciones se aceptan en cualquier momento, con reembolso completo y además un vale "
    "de regalo para la tienda."
)


def test_an_ungrounded_improvement_is_refused_in_spanish_too(std_chat: Chat, llm: Any) -> None:
    """The grounding rule holds in the customer's language: a Spanish source,
    a Spanish "improvement" that says "at any time" and adds a voucher → the draft stays, the
    claim is named; a Spanish correction the policy states replaces the draft."""
    evaluation_on(std_chat, evaluation_escalate_below=0, evaluation_min_chars=10)
    info = std_chat.client.business_info
    info["policies"]["returns"] = POLICY_ES
    std_chat.client.business_info = info
    std_chat.client.save(update_fields=["business_info"])

    llm.script("respond", respond(DRAFT_ES))
    llm.script("evaluate", ev(True, improved=UNSUPPORTED_ES, conf=99))
    [reply] = std_chat.say("¿Cuánto tiempo tengo para devolver un artículo?")
    assert reply.text == DRAFT_ES
    evaluation = Message.objects.for_client(std_chat.client).get(kind=Kind.EVALUATION)
    rejected = evaluation.data["improvement_rejected"]
    assert "«Las devoluciones se aceptan en cualquier momento»" in rejected
    assert "vale" in rejected and "tienda" in rejected

    llm.script("respond", respond(DRAFT_ES))
    llm.script("evaluate", ev(True, improved=GROUNDED_ES, conf=99))
    [reply] = std_chat.say("¿Y me devuelven todo el dinero?")
    assert reply.text == GROUNDED_ES
    last = Message.objects.for_client(std_chat.client).filter(kind=Kind.EVALUATION).last()
    assert last is not None and last.data["outcome"] == "improved"
