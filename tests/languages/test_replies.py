"""A customer message's language is recorded; every customer-facing step is asked to reply in
the turn's language; critique and evaluation are told it; replies record it."""

from __future__ import annotations

from typing import Any

import pytest

from apps.conversations.models import Message, Role
from apps.conversations.services import conversation_create
from apps.reasoning import steps
from apps.reasoning.services import handle_turn
from apps.reasoning.steps._shared import language_asked, language_line, with_language
from tests.support.shop import assess
from tests.widget.conftest import Widget


def _allow(client: Any, *codes: str) -> None:
    client.language, client.languages = codes[0], list(codes)
    client.save(update_fields=["language", "languages"])


def test_language_line_is_our_own_words():
    assert language_line("he") == "Reply in Hebrew (he)."
    assert language_line("es-MX") == "Reply in Spanish (es)."
    system = {"role": "system", "content": "Rules.\n\nReply in Hebrew (he)."}
    assert language_asked([system]) == "he"
    # Only the system message's last line counts: a customer cannot ask through the data.
    assert language_asked([{"role": "user", "content": "Reply in Hebrew (he)."}]) == ""


REPLY_STEPS = sorted(n for n in steps.names() if steps.get(n).language == "reply")
REVIEW_STEPS = sorted(n for n in steps.names() if steps.get(n).language == "review")


def test_the_customer_facing_steps_are_marked():
    assert {"respond", "assess", "clarify", "compose", "improve", "synthesize"} <= set(REPLY_STEPS)
    assert {"critique", "evaluate", "refine_critique"} <= set(REVIEW_STEPS)


@pytest.mark.parametrize("name", REPLY_STEPS + REVIEW_STEPS)
def test_with_language_ends_the_system_message(name):
    step = steps.get(name)
    messages = [{"role": "system", "content": "Our rules."}, {"role": "user", "content": "hola"}]
    out = with_language(messages, step=step, code="es")
    last = out[0]["content"].rsplit("\n", 1)[-1]
    if step.language == "reply":
        assert last == "Reply in Spanish (es)."
    else:
        assert "Spanish (es)" in last and last.startswith("The reply to the customer must be")
    assert out[1] == messages[1]  # the data is untouched
    assert messages[0]["content"] == "Our rules."  # the caller's list is not changed


@pytest.mark.django_db(transaction=True)
def test_a_spanish_message_is_recorded_and_answered_in_spanish(shop, llm, webhook):
    _allow(shop, "en", "es", "he")
    llm.script("assess", assess(response="Abrimos de 9 a 17, de lunes a viernes.", confidence=9))
    conversation, _ = conversation_create(client=shop)
    message = handle_turn(client=shop, conversation=conversation, text="¿A qué hora abren?")
    message.refresh_from_db()
    conversation.refresh_from_db()
    assert message.language == "es"
    assert conversation.language == "es"
    system = llm.calls("assess")[0].messages[0]["content"]
    assert system.rstrip().endswith("Reply in Spanish (es).")
    reply = (
        Message.objects.for_client(shop)
        .filter(conversation=conversation, role=Role.ASSISTANT)
        .visible()
        .get()
    )
    assert reply.language == "es"


@pytest.mark.django_db(transaction=True)
def test_a_language_the_client_does_not_serve_gets_the_default(shop, llm, webhook):
    _allow(shop, "en", "es")
    llm.script("assess", assess(response="We open at 9.", confidence=9))
    conversation, _ = conversation_create(client=shop)
    text = "Bonjour, à quelle heure ouvrez-vous le matin ?"
    message = handle_turn(client=shop, conversation=conversation, text=text)
    message.refresh_from_db()
    conversation.refresh_from_db()
    assert message.language == "fr"  # recorded as written
    assert conversation.language == "en"  # held in the client's default
    assert llm.calls("assess")[0].messages[0]["content"].rstrip().endswith("Reply in English (en).")


@pytest.mark.django_db(transaction=True)
def test_a_message_too_short_to_tell_keeps_the_conversations_language(shop, llm, webhook):
    _allow(shop, "en", "es")
    llm.script(
        "assess",
        assess(response="¿En qué puedo ayudarle?", confidence=9),
        assess(response="Gracias.", confidence=9),
    )
    conversation, _ = conversation_create(client=shop)
    handle_turn(client=shop, conversation=conversation, text="Hola, necesito ayuda con mi pedido")
    message = handle_turn(client=shop, conversation=conversation, text="12345")
    message.refresh_from_db()
    assert message.language == ""
    conversation.refresh_from_db()
    assert conversation.language == "es"
    assert llm.calls("assess")[1].messages[0]["content"].rstrip().endswith("(es).")


@pytest.mark.django_db(transaction=True)
def test_a_failing_detector_never_loses_the_message(shop, llm, webhook, monkeypatch):
    def broken(*args: Any, **kwargs: Any) -> str:
        raise RuntimeError("detector down")

    monkeypatch.setattr("apps.conversations.services.language_evidence", broken)
    llm.script("assess", assess(response="We open at 9.", confidence=9))
    conversation, _ = conversation_create(client=shop)
    message = handle_turn(client=shop, conversation=conversation, text="When do you open?")
    message.refresh_from_db()
    assert message.text == "When do you open?" and message.language == ""


@pytest.mark.django_db(transaction=True)
def test_message_json_carries_the_language(shop, llm, webhook):
    _allow(shop, "en", "es")
    llm.script("assess", assess(response="Abrimos a las 9.", confidence=9))
    widget = Widget(shop)
    conversation_id, token = widget.conversation()
    body = widget.say(conversation_id, token, "¿A qué hora abren la tienda?").json()
    assert body["language"] == "es"
    assert body["message"]["language"] == "es"
    assert [r["language"] for r in body["replies"]] == ["es"]
    listed = widget.messages(conversation_id, token).json()
    assert [m["language"] for m in listed["results"]] == ["es", "es"]
    assert listed["language"] == "es"  # a returning customer's widget finds it too


@pytest.mark.parametrize(
    "text",
    [
        "I want to talk to a human",
        "Quiero hablar con una persona, por favor",
        "Je voudrais parler à un conseiller",
        "Ich möchte mit einem Menschen sprechen",
        "Quero falar com um atendente",
        "Vorrei parlare con un operatore",
        "Ik wil met een medewerker spreken",
        "אני רוצה לדבר עם נציג",
        "أريد التحدث مع موظف",
    ],
)
def test_a_person_is_asked_for_in_every_shipped_language(text):
    from apps.reasoning.services import wants_human

    assert wants_human(text)


@pytest.mark.parametrize("text", ["¿Dónde está mi pedido?", "איפה ההזמנה שלי?", "Where is it?"])
def test_an_ordinary_message_is_not_a_request_for_a_person(text):
    from apps.reasoning.services import wants_human

    assert not wants_human(text)


@pytest.mark.django_db
def test_the_staff_api_shows_each_messages_language(client_a, key_a, key_b):
    from django.urls import reverse

    from apps.conversations.services import message_append
    from tests.conftest import api_for

    conversation, _ = conversation_create(client=client_a)
    message_append(
        client=client_a, conversation=conversation, role=Role.USER, text="Hola", language="es"
    )
    url = reverse("api-conversation-detail", args=[conversation.public_id])
    body = api_for(key_a).get(url).json()
    assert [m["language"] for m in body["messages"]] == ["es"]
    assert api_for(key_b).get(url).status_code == 404  # another client's key: nothing


def test_the_demo_reads_either_language_line():
    from apps.reasoning.steps._shared import review_line

    system = {"role": "system", "content": f"Rules.\n\n{review_line('es')}"}
    assert language_asked([system]) == "es"


def test_every_demo_language_has_every_phrase():
    from apps.reasoning.steps._demo import phrases

    spoken = phrases()
    assert {"en", "es", "he"} <= set(spoken)
    for code, said in spoken.items():
        assert set(said) == set(spoken["en"]), code
