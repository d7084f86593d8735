"""The conversation's language is sticky: short and mixed messages in every shipped language —
order ids, digits, emoji, names, yes/no words, one-word answers — never change it; a long clear
message in another language, or the customer asking for one, does (docs/languages.md)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from apps.conversations.models import Conversation
from apps.core.languages import (
    SHIPPED,
    clear_language,
    language_evidence,
    reply_language,
    requested_language,
)
from tests.conftest import ROOT
from tests.languages.conftest import say
from tests.widget.conftest import Widget

BENCHMARK = ROOT / "devtools" / "benchmarks" / "data" / "language_detection.json"

# Per shipped language: messages that say nothing about the conversation's language.
SHORT: dict[str, list[str]] = {
    "en": [
        "Order 12345",
        "order #4412",
        "my order 12345",
        "TH-12345",
        "12345",
        "👍",
        "🙏🙏",
        "ok 👍",
        "yes",
        "no",
        "Yes please",
        "no thanks",
        "Thanks!",
        "Hello",
        "John Smith",
        "Mary-Jane Watson",
        "My name is Hans Müller",
        "Sure",
    ],
    "es": [
        "Pedido 12345",
        "pedido nº 4412",
        "Pedido TH-12345, gracias",
        "sí",
        "no",
        "Sí, por favor",
        "No, gracias",
        "¡Gracias!",
        "Hola",
        "José García",
        "Hola, my order is 12345",
        "María José Fernández",
        "vale",
        "¡Perfecto! 😊",
    ],
    "fr": [
        "Commande 12345",
        "n° 4412",
        "oui",
        "non",
        "Oui, merci",
        "Non merci",
        "Merci !",
        "Bonjour",
        "Jean-Pierre de la Fontaine",
        "d'accord",
        "parfait 👍",
    ],
    "de": [
        "Bestellung 12345",
        "Nr. 4412",
        "Bestellung 12345 bitte",
        "Ja",
        "Nein",
        "Ja, bitte",
        "Nein danke",
        "Danke schön",
        "Hallo",
        "Hans Müller",
        "Maria Schmidt",
        "Ich heiße Maria",
        "Danke, Bestellung TH-12345 bitte",
        "genau",
        "super 👍",
    ],
    "pt": [
        "Pedido 12345",
        "encomenda 4412",
        "sim",
        "não",
        "Sim, obrigado",
        "Não, obrigada",
        "Olá",
        "João da Silva",
        "Maria dos Santos Silva",
        "beleza",
        "tá bom 👍",
    ],
    "it": [
        "Ordine 12345",
        "ordine n. 4412",
        "sì",
        "no",
        "Sì, grazie",
        "No grazie",
        "Ciao",
        "Giuseppe Verdi",
        "Maria De Luca",
        "va bene",
        "perfetto 👍",
    ],
    "nl": [
        "Bestelling 12345",
        "bestelnummer 4412",
        "ja",
        "nee",
        "Ja, graag",
        "Nee, dank je",
        "Bedankt!",
        "Hoi",
        "Jan de Vries",
        "Anne-Marie van der Berg",
        "prima",
        "oké 👍",
    ],
    "he": [
        "הזמנה 12345",
        "מספר הזמנה 4412",
        "כן",
        "לא",
        "כן, בבקשה",
        "לא תודה",
        "תודה!",
        "שלום",
        "נועה כהן",
        "דוד בן משה",
        "בסדר",
        "מעולה 👍",
    ],
    "ar": [
        "طلب 12345",
        "رقم الطلب ١٢٣٤٥",
        "١٢٣٤٥",
        "نعم",
        "لا",
        "نعم، من فضلك",
        "لا شكرا",
        "شكرا!",
        "مرحبا",
        "محمد أحمد",
        "محمد علي حسن",
        "حسنا",
        "ممتاز 👍",
    ],
}

# Per shipped language: a long message clearly in it.
LONG: dict[str, str] = {
    "en": "Hello, I would like to know where my order is, please",
    "es": "Hola, quisiera saber dónde está mi pedido, por favor",
    "fr": "Bonjour, je voudrais savoir où en est ma commande, s'il vous plaît",
    "de": "Hallo, ich möchte wissen, wo meine Bestellung gerade ist",
    "pt": "Olá, gostaria de saber onde está a minha encomenda, por favor",
    "it": "Buongiorno, vorrei sapere dove si trova il mio ordine, per favore",
    "nl": "Hallo, ik wil graag weten waar mijn bestelling nu is",
    "he": "שלום, אני רוצה לדעת איפה ההזמנה שלי נמצאת עכשיו",
    "ar": "مرحبا، أريد أن أعرف أين طلبي الآن من فضلك",
}

# The customer asks for a language, written in each shipped language: (text, the language
# asked for).
REQUESTS: dict[str, list[tuple[str, str]]] = {
    "en": [
        ("Can you answer in Spanish?", "es"),
        ("Could you reply in German, please?", "de"),
        ("Spanish please", "es"),
        ("Do you speak French?", "fr"),
    ],
    "es": [
        ("¿Puede responder en español?", "es"),
        ("¿Puede responder en inglés?", "en"),
        ("En español, por favor", "es"),
        ("¿Habla usted francés?", "fr"),
    ],
    "fr": [
        ("Pouvez-vous répondre en anglais ?", "en"),
        ("Parlez-vous français ?", "fr"),
        ("En français, s'il vous plaît", "fr"),
    ],
    "de": [
        ("Können Sie bitte auf Englisch antworten?", "en"),
        ("Auf Deutsch bitte", "de"),
        ("Sprechen Sie Deutsch?", "de"),
    ],
    "pt": [
        ("Pode responder em inglês?", "en"),
        ("Em português, por favor", "pt"),
        ("Você fala português?", "pt"),
    ],
    "it": [
        ("Può rispondere in inglese?", "en"),
        ("In italiano, per favore", "it"),
        ("Parla italiano?", "it"),
    ],
    "nl": [
        ("Kunt u in het Engels antwoorden?", "en"),
        ("In het Nederlands graag", "nl"),
        ("Spreekt u Nederlands?", "nl"),
    ],
    "he": [
        ("אפשר לענות באנגלית?", "en"),
        ("בעברית בבקשה", "he"),
        ("אתה מדבר עברית?", "he"),
    ],
    "ar": [
        ("هل يمكنك الرد بالإنجليزية؟", "en"),
        ("بالعربية من فضلك", "ar"),
        ("هل تتكلم العربية؟", "ar"),
    ],
}

# A language named, but nothing asked for (or the opposite asked): no request.
NOT_REQUESTS = [
    "I don't speak Spanish",
    "Do you have the manual in Spanish?",
    "My Spanish friend said you would reply quickly",
    "No hablo inglés",
    "Je ne parle pas anglais",
    "Ich spreche kein Englisch",
    "Não falo inglês",
    "Non parlo inglese",
    "Ik spreek geen Engels",
    "אני לא מדבר אנגלית",
    "لا أتكلم الإنجليزية",
    "Can you answer in Spanish or in French?",  # two languages: ambiguous
]

ALL_SHORT = [(code, text) for code, texts in SHORT.items() for text in texts]


def _client(default: str = "en") -> SimpleNamespace:
    # What the rule reads of a client: its default and its allowed languages (all nine).
    return SimpleNamespace(language=default, languages=list(SHIPPED))


def _talk(start: str, messages: list[str], client: SimpleNamespace | None = None) -> str:
    """The conversation's language after `messages`, as `handle_turn` keeps it."""
    client = client or _client()
    language = start
    for text in messages:
        language = reply_language(detected=language_evidence(text), client=client, current=language)
    return language


def test_the_corpus_covers_every_shipped_language():
    assert set(SHORT) == set(LONG) == set(REQUESTS) == set(SHIPPED)


@pytest.mark.parametrize(("written_in", "text"), ALL_SHORT)
def test_a_short_or_mixed_message_is_no_evidence(written_in, text):
    assert language_evidence(text) == "", (written_in, text)


@pytest.mark.parametrize("start", sorted(SHIPPED))
def test_short_messages_never_switch_a_conversation(start):
    # Every short message of every language, one after another, in a conversation held in
    # `start`: the conversation (and the widget's words, which follow it) stays in `start`.
    texts = [text for _, text in ALL_SHORT]
    client = _client()
    language = start
    for text in texts:
        language = reply_language(detected=language_evidence(text), client=client, current=language)
        assert language == start, text


def test_order_12345_keeps_an_english_conversation_english():
    # The README's step 2, on an English page, for a client that serves all nine languages
    # (it used to come out German: a short text judged among the allowed languages).
    assert _talk("en", ["Order 12345"]) == "en"
    assert _talk("en", ["Order 12345", "Ja", "Maria Schmidt", "👍", "ok"]) == "en"


@pytest.mark.parametrize("code", sorted(SHIPPED))
def test_a_long_clear_message_is_evidence(code):
    assert clear_language(LONG[code]) == code
    assert language_evidence(LONG[code]) == code


@pytest.mark.parametrize("target", sorted(SHIPPED))
def test_a_long_clear_message_switches_the_conversation(target):
    start = "de" if target == "en" else "en"
    assert _talk(start, [LONG[target]]) == target
    # …and then sticks: the short messages after it keep it.
    assert _talk(start, [LONG[target], *SHORT[start], *SHORT[target]]) == target


REQUEST_CASES = [(code, text, asked) for code, cases in REQUESTS.items() for text, asked in cases]


@pytest.mark.parametrize(("written_in", "text", "asked"), REQUEST_CASES)
def test_asking_for_a_language_switches_the_conversation(written_in, text, asked):
    assert requested_language(text) == asked
    assert language_evidence(text) == asked  # the request wins over the words' language
    start = "de" if asked == "en" else "en"
    assert _talk(start, [text]) == asked


@pytest.mark.parametrize("code", sorted(SHIPPED))
def test_asking_in_english_for_each_shipped_language(code):
    from apps.core import language_packs

    name = language_packs.require("en").request.names[code].capitalize()
    assert requested_language(f"Please answer in {name}") == code
    assert requested_language(f"Can we continue in {name}?") == code


@pytest.mark.parametrize("text", NOT_REQUESTS)
def test_naming_a_language_is_not_asking_for_it(text):
    assert requested_language(text) == ""


def test_evidence_for_a_language_the_client_does_not_serve_gives_its_default():
    client = SimpleNamespace(language="en", languages=["en", "es"])
    assert _talk("es", [LONG["fr"]], client) == "en"
    assert _talk("es", ["Order 12345", "Ja"], client) == "es"


# ---------------------------------------------------------------- through the widget API


@pytest.fixture
def nine_languages(shop: Any) -> Any:
    # Like the demo shop: English by default, every shipped language allowed.
    shop.language, shop.languages = "en", sorted(SHIPPED)
    shop.save(update_fields=["language", "languages"])
    return shop


def _start(widget: Widget, body: dict[str, Any]) -> tuple[str, str]:
    response = widget.start(body)
    assert response.status_code == 201, response.content
    return response.json()["id"], response.json()["token"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("sent", "starts_in"),
    [("es", "es"), ("pt-BR", "pt"), ("he-IL", "he"), ("", "en"), ("xx", "en"), (None, "en")],
)
def test_a_conversation_starts_in_the_widgets_language(nine_languages, sent, starts_in):
    widget = Widget(nine_languages)
    conversation_id, _ = _start(widget, {} if sent is None else {"language": sent})
    conversation = Conversation.objects.for_client(nine_languages).get(public_id=conversation_id)
    assert conversation.language == starts_in


@pytest.mark.django_db(transaction=True)
def test_a_widget_language_the_client_does_not_serve_starts_in_its_default(shop):
    shop.language, shop.languages = "es", ["es", "en"]
    shop.save(update_fields=["language", "languages"])
    conversation_id, _ = _start(Widget(shop), {"language": "fr"})
    assert Conversation.objects.for_client(shop).get(public_id=conversation_id).language == "es"


@pytest.mark.django_db(transaction=True)
def test_order_12345_keeps_the_widget_conversation_english(nine_languages, webhook, settings):
    settings.OPENAI_API_KEY = ""  # the offline demo model answers, in the prompt's language
    widget = Widget(nine_languages)
    conversation_id, token = _start(widget, {"language": "en-US"})

    body = say(widget, conversation_id, token, "Cancel my order")
    assert body["language"] == "en"
    body = say(widget, conversation_id, token, "Order 12345")
    # No evidence in the message: nothing for the widget to follow, the reply in English.
    assert body["message"]["language"] == ""
    assert body["language"] == "en"
    [question] = body["replies"]
    assert question["kind"] == "confirmation_request" and question["language"] == "en"
    assert "TH-12345" in question["text"]
    for text in ("Ja", "Maria Schmidt", "👍"):
        body = say(widget, conversation_id, token, text)
        assert body["language"] == "en", text
        assert body["message"]["language"] == "", text
    conversation = Conversation.objects.for_client(nine_languages).get(public_id=conversation_id)
    assert conversation.language == "en"


@pytest.mark.django_db(transaction=True)
def test_clear_evidence_switches_the_widget_conversation(nine_languages, webhook, settings):
    settings.OPENAI_API_KEY = ""
    widget = Widget(nine_languages)
    conversation_id, token = _start(widget, {"language": "en"})

    body = say(widget, conversation_id, token, LONG["es"])
    assert body["language"] == "es" and body["message"]["language"] == "es"
    body = say(widget, conversation_id, token, "12345")
    assert body["language"] == "es" and body["message"]["language"] == ""
    body = say(widget, conversation_id, token, "Can you answer in English, please?")
    assert body["language"] == "en" and body["message"]["language"] == "en"
    listed = widget.messages(conversation_id, token).json()
    assert listed["language"] == "en"


def test_the_shipped_short_messages_never_give_a_wrong_language():
    # The language-detection benchmark's short customer messages (docs/benchmarks.md): clear
    # evidence is never the wrong language, and most of them are clear.
    data = json.loads(BENCHMARK.read_text(encoding="utf-8"))["messages"]
    results = [(code, clear_language(text)) for code, texts in data.items() for text in texts]
    wrong = [(code, got) for code, got in results if got not in ("", code)]
    assert wrong == []
    clear = sum(1 for code, got in results if got == code)
    assert clear >= 0.85 * len(results), (clear, len(results))


def test_courtesy_words_do_not_make_a_message_long_but_tell_its_language():
    # "please" does not count towards "long enough", yet it is English: without it "refund on
    # order" reads German to the detector.
    assert clear_language("Please refund 150 on order TH-12345") == "en"
    assert _talk("en", ["Please refund 150 on order TH-12345", "Nein, bitte nicht"]) == "en"
