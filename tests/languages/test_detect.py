"""Which language a customer wrote in, and which language the reply is in."""

from __future__ import annotations

import pytest

from apps.core.languages import SHIPPED, allowed_languages, detect, reply_language
from tests.factories import ClientFactory


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("Where is my order TH-12345?", "en"),
        ("¿Dónde está mi pedido?", "es"),
        ("sí, cancélalo", "es"),
        ("Bonjour, où en est ma commande ?", "fr"),
        ("Hallo, wo ist meine Bestellung?", "de"),
        ("Olá, onde está a minha encomenda?", "pt"),
        ("Ciao, dov'è il mio ordine?", "it"),
        ("Hallo, waar is mijn bestelling?", "nl"),
        ("כן", "he"),
        ("איפה ההזמנה שלי?", "he"),
        ("نعم", "ar"),
        ("أين طلبي؟", "ar"),
    ],
)
def test_detects_the_shipped_languages(text, code):
    assert detect(text) == code


@pytest.mark.parametrize("text", ["", "ok", "12345", "TH-12345", "?!", "   "])
def test_unsure_is_empty(text):
    assert detect(text) == ""


def test_a_short_text_is_judged_among_the_clients_languages_only():
    # "obrigado" is Portuguese; a client serving only English and Spanish cannot get it back.
    assert detect("obrigado") == "pt"
    assert detect("obrigado", candidates=["en", "es"]) in {"es", "en", ""}
    # A longer text is judged among every shipped language whatever the client allows.
    long_text = "Olá, gostaria de saber onde está a minha encomenda, por favor"
    assert detect(long_text, candidates=["en", "es"]) == "pt"


def test_unknown_candidates_are_ignored():
    assert detect("¿Dónde está mi pedido?", candidates=["xx", "es"]) == "es"


@pytest.mark.django_db
def test_reply_language_rule():
    client = ClientFactory(language="en", languages=["en", "es", "he"])
    assert allowed_languages(client) == ["en", "es", "he"]
    assert reply_language(detected="es", client=client) == "es"
    assert reply_language(detected="he", client=client) == "he"
    # Not allowed: the default language.
    assert reply_language(detected="fr", client=client) == "en"
    # Unsure: the conversation keeps its language, if allowed.
    assert reply_language(detected="", client=client, current="es") == "es"
    assert reply_language(detected="", client=client, current="fr") == "en"
    # A language the client does not serve, detected for sure: the default, not the current.
    assert reply_language(detected="fr", client=client, current="es") == "en"


@pytest.mark.django_db
def test_no_allowed_list_means_the_default_only():
    client = ClientFactory(language="es", languages=[])
    assert allowed_languages(client) == ["es"]
    assert reply_language(detected="en", client=client) == "es"
    assert reply_language(detected="es-MX", client=client) == "es"


def test_every_shipped_language_is_detectable():
    # lingua knows every shipped code (a new code lingua lacks would fail here, not in a turn).
    from apps.core.languages import _detector

    assert _detector(frozenset(SHIPPED)) is _detector(frozenset(SHIPPED))  # built once
