"""The staff side in Spanish: a staff member who picked Spanish (Django's language cookie) gets
the console and the admin in Spanish, while what the customer is told stays in the
conversation's language."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders
from django.urls import reverse

from apps.accounts.models import Role
from apps.conversations.models import Kind, Message
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def spanish(browser):
    browser.cookies[settings.LANGUAGE_COOKIE_NAME] = "es"
    return browser


def test_the_console_queue_and_a_conversation_are_in_spanish(browser_for, data_a):
    agent = spanish(browser_for(Role.AGENT))
    queue = agent.get(reverse("console-escalations")).content.decode()
    assert '<html lang="es">' in queue
    for text in ("Cola de escalados", "Último mensaje del cliente", "Cerrar sesión"):
        assert text in queue
    assert "El cliente pidió hablar con una persona" in queue  # the escalation's reason
    assert "Escalation queue" not in queue

    page = agent.get(reverse("console-conversation", args=[data_a.conversation.public_id]))
    body = page.content.decode()
    for text in ("Una persona lleva esta conversación", "Responder al cliente", "Enviar respuesta"):
        assert text in body
    assert "Send reply" not in body


def test_a_spanish_reply_tells_the_customer_in_the_conversations_language(browser_for, data_a):
    agent = spanish(browser_for(Role.AGENT))
    conversation = data_a.quiet_conversation  # not escalated: replying takes it over
    conversation.language = "he"
    conversation.save(update_fields=["language"])
    url = reverse("console-conversation-reply", args=[conversation.public_id])
    response = agent.post(url, {"text": "Hola, te ayudo yo."}, follow=True)
    assert "Respuesta enviada. Esta conversación es suya hasta que la resuelva." in (
        response.content.decode()
    )
    joined = (
        Message.objects.for_client(data_a.client)
        .filter(conversation=conversation, kind=Kind.HANDOFF)
        .get()
    )
    assert joined.text == "נציג מהצוות שלנו הצטרף לשיחה."


def test_an_admin_page_is_in_spanish(client, data_a):
    client.force_login(UserFactory(is_superuser=True))
    spanish(client)
    body = client.get(reverse("admin:escalations_escalation_changelist")).content.decode()
    assert "Administración de GuideDesk" in body  # our title
    assert "Resolver y devolver a la IA" in body  # our action
    assert "El cliente pidió hablar con una persona" in body  # our choice label
    assert "Resolve and hand back to the AI" not in body
    index = client.get(reverse("admin:index")).content.decode()
    assert "Clientes, conversaciones y facturación" in index


def console_texts(body: str) -> dict[str, str]:
    start = body.index('<script type="application/json" id="gd-console-texts">')
    chunk = body[start:].split(">", 1)[1].split("</script>", 1)[0]
    return json.loads(chunk)


def test_the_live_updates_speak_the_page_language(browser_for, data_a):
    """console.js draws rows and states from its own words, which the page hands it."""
    english = console_texts(browser_for(Role.AGENT).get(reverse("console-queue")).content.decode())
    assert english["Unassigned"] == "Unassigned"
    assert english["%(age)s ago"] == "%(age)s ago"
    texts = console_texts(
        spanish(browser_for(Role.AGENT)).get(reverse("console-queue")).content.decode()
    )
    assert set(texts) == set(english)
    assert texts["Unassigned"] == "Sin asignar"
    assert texts["%(age)s ago"] == "hace %(age)s"
    assert texts["Updates live."] == "Se actualiza en directo."
    script = Path(finders.find("console/console.js")).read_text()
    for english_text in texts:  # every word the script shows goes through the table
        assert f'say("{english_text}"' in script
