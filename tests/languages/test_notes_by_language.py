"""A turn's prompt gets the notes of the customer's language and the language-neutral ones
first, then the strategies and patterns written in another language."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from apps.conversations.services import conversation_create
from apps.notes.models import Note, NoteSource, NoteType
from apps.notes.selectors import prompt_notes
from apps.notes.services import note_add
from apps.reasoning.services import handle_turn
from tests.support.shop import assess


def add(client: Any, type: str, content: str, language: str, hours: int) -> Note:
    note = note_add(
        client=client, type=type, content=content, language=language, source=NoteSource.STAFF
    )
    Note.objects.for_client(client).filter(pk=note.pk).update(
        created_at=timezone.now() - timedelta(hours=hours)
    )
    return note


@pytest.mark.django_db
def test_own_language_and_neutral_notes_come_first(client_a):
    es_tip = add(client_a, NoteType.TIP, "tip in es", "es", 5)
    neutral = add(client_a, NoteType.TIP, "neutral tip", "", 4)
    en_strategy = add(client_a, NoteType.STRATEGY, "strategy in en", "en", 1)  # the newest
    add(client_a, NoteType.TIP, "tip in en", "en", 2)  # another language, not cross-language
    _, ids = prompt_notes(client=client_a, language="es")
    assert ids == [neutral.pk, es_tip.pk, en_strategy.pk]
    # The English view of the same notes.
    _, ids = prompt_notes(client=client_a, language="en")
    assert ids[0] == en_strategy.pk and es_tip.pk not in ids


@pytest.mark.django_db(transaction=True)
def test_a_turn_reads_the_notes_of_the_customers_language(shop, llm, webhook):
    shop.language, shop.languages = "en", ["en", "es"]
    shop.save(update_fields=["language", "languages"])
    add(shop, NoteType.TIP, "Say hola", "es", 1)
    add(shop, NoteType.TIP, "Say hello", "en", 1)
    llm.script("assess", assess(response="Abrimos a las 9.", confidence=9))
    # The conversation starts in English (the client's default); the message is Spanish.
    conversation, _ = conversation_create(client=shop)
    handle_turn(client=shop, conversation=conversation, text="¿A qué hora abren la tienda?")
    prompt = llm.calls("assess")[0].prompt_text
    assert "Say hola" in prompt and "Say hello" not in prompt
