"""Typed confirmations in every shipped language (`guards.confirmation_answer`), measured on the
phrasing and adversarial lists in tests/reasoning/confirm_phrases/<lang>.json: ≥ 95 % of the
natural phrasings read right, 0 adversarial answers read as a yes, 100 % by the buttons. Plus the
normalisation, the cross-language ambiguity rule and the identifier rule in other scripts.

The per-language figures are printed by `benchmarks/confirm_phrases.py` (docs/benchmarks.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from apps.core.languages import SHIPPED
from apps.reasoning import confirmations
from apps.reasoning.guards import (
    confirmation_answer,
    confirmation_decision,
    confirmation_reading,
)
from apps.tools.models import PendingActionStatus
from apps.tools.pending import OpenQuestion, StructuredAnswer, params_digest

PHRASES = Path(__file__).parent / "confirm_phrases"
ORDER = {"order_id": "TH-12345"}
REFUND = {"order_id": "TH-12345", "amount": "49.90"}


def phrase_list(code: str) -> dict[str, Any]:
    return json.loads((PHRASES / f"{code}.json").read_text("utf-8"))


# --- the lists -------------------------------------------------------------------------------


@pytest.mark.parametrize("code", list(SHIPPED))
def test_each_language_has_its_lists(code: str) -> None:
    data = phrase_list(code)
    assert data["language"] == code
    answers = [item["answer"] for item in data["phrasing"]]
    assert len(answers) >= 30 and answers.count("yes") >= 20 and answers.count("no") >= 8
    whys = {item["why"] for item in data["adversarial"]}
    assert {"another order", "a condition", "a question", "a negation", "yes but"} <= whys
    assert any("params" in item for item in data["adversarial"])  # another amount


@pytest.mark.parametrize("code", list(SHIPPED))
def test_at_least_95_percent_of_the_phrasings_read_right(code: str) -> None:
    data = phrase_list(code)
    misses = [
        (item["text"], confirmation_reading(item["text"], item.get("params", data["params"])))
        for item in data["phrasing"]
        if confirmation_answer(item["text"], item.get("params", data["params"])) != item["answer"]
    ]
    assert len(misses) <= 0.05 * len(data["phrasing"]), misses


@pytest.mark.parametrize("code", list(SHIPPED))
def test_no_adversarial_answer_is_a_yes(code: str) -> None:
    data = phrase_list(code)
    false_yes = [
        item["text"]
        for item in data["adversarial"]
        if confirmation_answer(item["text"], item.get("params", data["params"])) == "yes"
    ]
    assert false_yes == []


@pytest.mark.parametrize("code", list(SHIPPED))
def test_the_buttons_read_every_phrasing_right(code: str) -> None:
    """The same answers given by the Yes/No buttons: settled by the structured answer."""
    data = phrase_list(code)
    digest = params_digest(data["params"])
    status = {"yes": PendingActionStatus.CONFIRMED, "no": PendingActionStatus.DECLINED}
    for item in data["phrasing"] + [{**a, "answer": "no"} for a in data["adversarial"]]:
        question = OpenQuestion(
            params=data["params"],
            shown_before=True,
            expired=False,
            first_reply=True,
            another_confirmed=False,
            action_id=3,
            digest=digest,
            structured=StructuredAnswer(3, digest, item["answer"]),
        )
        assert confirmation_decision(question, item["text"]) == status[item["answer"]]


# --- what the issue named --------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "כן",
        "כן, בטל את ההזמנה",
        "Sí, cancélalo",
        "sí, cancélalo",
        "oui",
        "ja bitte",
        "Yes go ahead and cancel it",
        "Yes! Thanks so much",
        "نعم",
        "Sim, pode cancelar",
        "Sì, annullalo",
        "Ja, annuleer hem maar",
    ],
)
def test_what_was_a_dead_end_now_confirms(text: str) -> None:
    assert confirmation_answer(text, ORDER) == "yes"


# --- normalisation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("כֵּן", "yes"),  # niqqud
        ("כן, בַּטֵּל אֶת הַהַזְמָנָה", "yes"),
        ("\u200fכן\u200f", "yes"),  # right-to-left marks
        ("نَعَم", "yes"),  # harakat
        ("طبعـــاً", "yes"),  # tatweel
        ("أيوه", "yes"),
        ("ايوه", "yes"),  # with and without the hamza seat
        ("👍🏽", "yes"),  # skin tone
        ("✅", "yes"),
        ("👎", "no"),
        ("SÍ, CANCÉLALO", "yes"),
        ("si, cancelalo", "yes"),  # without accents
        ("JA BITTE", "yes"),
        ("לא", "no"),
        ("لأ", "no"),
        ("¿sí?", "other"),  # Spanish question marks
        ("نعم؟", "other"),  # Arabic question mark
        ('כן, אח"כ', "other"),  # Hebrew abbreviation typed with a quote: "later"
    ],
)
def test_normalised_answers(text: str, answer: str) -> None:
    assert confirmation_answer(text, ORDER) == answer


def test_normalise_keeps_one_spelling() -> None:
    assert confirmations.normalise("Sí, CANCÉLALO") == "si, cancelalo"
    assert confirmations.normalise("כֵּן") == "כן"
    assert confirmations.normalise("أَلْغِ ١٢٣٤٥") == "الغ 12345"
    assert confirmations.tokenise("¿ok? sí") == [["?"], ["ok"], ["?"], ["si"]]


# --- one vocabulary, many languages: ambiguity -----------------------------------------------


def test_the_vocabulary_is_built_once_and_names_its_ambiguous_words() -> None:
    assert confirmations.vocabulary() is confirmations.vocabulary()
    ambiguous = confirmations.vocabulary().ambiguous
    # yes in one language, something else in another: "if" (es, fr), "and" (es), "the" (es),
    # "before" (it), "which" (ar)
    assert {"si", "y", "los", "prima", "اي"} <= ambiguous
    assert "ja" not in ambiguous and "oui" not in ambiguous and "כן" not in ambiguous


@pytest.mark.parametrize("code", ["common", *SHIPPED])
def test_every_language_is_data(code: str) -> None:
    module = confirmations.language_data(code)
    for name in ("YES", "NO_START", "NEGATIONS", "HEDGES", "ECHO"):
        assert isinstance(getattr(module, name), tuple)
    if code != "common":
        assert module.YES and module.NEGATIONS and module.HEDGES and module.ECHO


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("Si", "yes"),
        ("si.", "yes"),
        ("Si, cancélalo", "yes"),
        ("si por favor", "yes"),
        ("sì per favore", "yes"),
        ("si cancelas el pedido", "other"),  # "if you cancel the order"
        ("si lo cancelas", "other"),
        ("oui, si c'est gratuit", "other"),  # "if it's free"
        ("Sí, si no se ha enviado", "no"),  # a condition with a negation: never a yes
        ("y", "yes"),
        ("cancela y reembolsa", "other"),  # "y" is "and" here, not "yes"
        ("los", "yes"),  # German "go!"
        ("los pedidos", "other"),  # Spanish "the orders"
        ("Prima!", "yes"),
        ("prima annulla l'altro", "other"),  # Italian "first cancel the other one"
        ("اي", "yes"),
        ("اي طلب", "other"),  # "which order"
        ("annuleer hem maar", "other"),  # a go-ahead, but no explicit yes
        ("Ja, annuleer hem maar", "yes"),
        ("ja maar", "other"),  # "yes but"
        ("ja, maar", "other"),
    ],
)
def test_a_word_that_means_yes_only_somewhere_stands_alone(text: str, answer: str) -> None:
    assert confirmation_answer(text, ORDER) == answer


# --- conditions, hedges and negations in every language ------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "yes if it hasn't shipped",
        "sí, si todavía no se envió",
        "oui s'il n'est pas parti",
        "ja, wenn es noch geht",
        "sim, se ainda der",
        "sì, se è ancora possibile",
        "ja, als het nog kan",
        "כן, אם אפשר עדיין",
        "כן, כשתוכל",
        "نعم، إذا كان ممكنا",
        "نعم لو ممكن",
        "ok, but later",
        "sí pero luego",
        "oui mais plus tard",
        "ja aber später",
        "sim mas depois",
        "sì ma dopo",
        "ja maar later",
        "כן אבל אחר כך",
        "نعم لكن بعدين",
        "yes, and the other one too",
        "sí, y el otro también",
        "כן, וגם את השנייה",
        "نعم، والثاني كمان",
    ],
)
def test_a_condition_or_hedge_is_never_a_yes(text: str) -> None:
    assert confirmation_answer(text, ORDER) != "yes"


@pytest.mark.parametrize(
    "text",
    [
        "no",
        "No, no lo canceles",
        "non, ne l'annulez pas",
        "nein, nicht stornieren",
        "não, não cancela",
        "no, non annullarlo",
        "nee, niet annuleren",
        "לא, אל תבטל",
        "ולא לבטל",  # "and not to cancel": ו + לא
        "لا، لا تلغيه",
        "ولا تلغيه",
        "yes but don't cancel it",
        "sí pero no lo canceles",
    ],
)
def test_a_negation_anywhere_is_a_no(text: str) -> None:
    assert confirmation_answer(text, ORDER) == "no"


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("no problem", "yes"),  # "no" inside a yes phrase of several words
        ("No hay problema", "yes"),
        ("pas de problème", "yes"),
        ("kein Problem", "yes"),
        ("geen probleem", "yes"),
        ("אין בעיה", "yes"),
        ("لا مانع", "yes"),
        ("no, problem is the other order", "no"),  # split by a comma: not the phrase
    ],
)
def test_no_problem_is_a_yes_phrase(text: str, answer: str) -> None:
    assert confirmation_answer(text, ORDER) == answer


# --- the identifier rule in every script -----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "params", "answer"),
    [
        ("כן, בטל את TH-12345", ORDER, "yes"),
        ("כן, בטל את TH-54321", ORDER, "other"),
        ("نعم، ألغِ الطلب رقم ١٢٣٤٥", ORDER, "yes"),  # Arabic-Indic digits
        ("نعم، ألغِ الطلب رقم ٥٤٣٢١", ORDER, "other"),
        ("sí, pedido 12345", ORDER, "yes"),
        ("sí, pedido 54321", ORDER, "other"),
        ("sí, reembolsa 49,90", REFUND, "yes"),  # a decimal comma
        ("ja, erstatten Sie 49,90 €", REFUND, "yes"),
        ("oui, remboursez 49.90", REFUND, "yes"),
        ("sí, reembolsa 59,90", REFUND, "other"),
        ("yes refund 1,000", REFUND, "other"),
        ("כן", None, "yes"),
        ("כן TH-12345", None, "other"),  # an identifier with nothing to compare it with
        ("yes, order no. 12345", ORDER, "yes"),  # "no." before a number is "number"
        ("Sí, pedido nº 12345", ORDER, "yes"),
        ("oui, commande n° 12345", ORDER, "yes"),
        ("sì, ordine n. 12345", ORDER, "yes"),
        ("ja, Bestellung Nr. 12345", ORDER, "yes"),
        ("כן, הזמנה מס' 12345", ORDER, "yes"),
        ("Sí, pedido nº 54321", ORDER, "other"),
        ("No. 12345", ORDER, "other"),
        ("No, 12345", ORDER, "no"),
        ("No", ORDER, "no"),
    ],
)
def test_identifiers_must_name_the_params_in_any_script(
    text: str, params: dict[str, Any] | None, answer: str
) -> None:
    assert confirmation_answer(text, params) == answer


def test_the_reading_says_why() -> None:
    reading = confirmation_reading("Sí, cancélalo", ORDER)
    assert reading.answer == "yes" and "es" in reading.languages
    assert confirmation_reading("yes cancel TH-54321", ORDER).reason.startswith("names something")
    assert "hedge" in confirmation_reading("si cancelas", ORDER).reason
