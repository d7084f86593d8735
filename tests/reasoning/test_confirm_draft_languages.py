"""The unavailable-tool draft rule (`guards.unavailable_tool_draft_problem`) in every shipped
language: a draft that only announces an action, or that says an action was done which no tool
performed, is never sent in place of a tool the client does not have — whatever its language.
The phrasings are per-language data (`apps/core/language_packs/<lang>.py`: HOLDING,
ACTIONS)."""

from __future__ import annotations

import pytest

from apps.reasoning import confirmations
from apps.reasoning.guards import unavailable_tool_draft_problem
from apps.tools.models import ClientTool

pytestmark = pytest.mark.django_db


def draft_problem(shop, draft: str, tool_name: str) -> str:
    """Why `draft` may not be sent for the tool `tool_name` the shop does not have ("" if it
    may)."""
    tools = list(ClientTool.objects.for_client(shop))
    return unavailable_tool_draft_problem(draft, tool_name=tool_name, tools=tools)


@pytest.mark.parametrize(
    ("draft", "named"),
    [
        ("Tu pedido ha sido anulado y recibirás el dinero pronto.", "anulado"),
        ("Votre commande a été annulée, vous serez remboursé.", "annulee"),
        ("Ihre Bestellung wurde storniert, das Geld kommt bald.", "storniert"),
        ("O seu pedido foi cancelado e o dinheiro volta em breve.", "cancelado"),
        ("Il tuo ordine è stato annullato, riceverai il rimborso.", "annullato"),
        ("Uw bestelling is geannuleerd, u krijgt uw geld terug.", "geannuleerd"),
        ("ההזמנה שלך בוטלה והכסף יחזור אלייך בקרוב", "בוטלה"),
        ("ביטלתי את ההזמנה שלך, הכסף יחזור בקרוב", "ביטלתי"),
        ("تم إلغاء طلبك وستصلك الأموال قريبا", "الغاء"),
        ("Hemos actualizado la dirección de envío de tu pedido.", "actualizado"),
        ("Votre adresse a été mise à jour pour cette commande.", "mise a jour"),
        ("הכתובת עודכנה בהצלחה עבור ההזמנה שלך", "עודכנה"),
        ("تم تعديل عنوان الشحن الخاص بطلبك بنجاح", "تعديل"),
    ],
)
def test_a_draft_saying_an_action_was_done_is_not_sent_in_any_language(shop, draft, named):
    problem = draft_problem(shop, draft, "whatever")
    assert problem.startswith("the draft names an action no tool performed")
    assert named in problem


@pytest.mark.parametrize(
    "draft",
    [
        "Déjame revisar eso, un momento por favor.",
        "Un instant, je vérifie votre commande.",
        "Einen Moment, ich schaue kurz nach.",
        "Deixe-me verificar isso para você agora.",
        "Un attimo, controllo subito il tuo ordine.",
        "Een moment, ik kijk het even na.",
        "רגע, אני בודק את זה בשבילך עכשיו",
        "لحظة من فضلك، سأتحقق من طلبك الآن",
    ],
)
def test_a_draft_that_only_announces_is_not_sent_in_any_language(shop, draft):
    assert draft_problem(shop, draft, "whatever") == "the draft only announces an action"


@pytest.mark.parametrize(
    "draft",
    [
        "Nuestra tienda abre de lunes a viernes, de nueve a cinco.",
        "Notre boutique est ouverte du lundi au vendredi, de neuf à cinq.",
        "Unser Geschäft hat montags bis freitags von neun bis fünf geöffnet.",
        "A nossa loja abre de segunda a sexta, das nove às cinco.",
        "Il negozio è aperto dal lunedì al venerdì, dalle nove alle cinque.",
        "Onze winkel is open van maandag tot vrijdag, van negen tot vijf.",
        "החנות פתוחה בימים ראשון עד חמישי בין תשע לחמש",
        "متجرنا مفتوح من الاثنين إلى الجمعة من التاسعة حتى الخامسة",
    ],
)
def test_an_answer_in_its_own_right_is_sent_in_any_language(shop, draft):
    assert draft_problem(shop, draft, "opening_hours") == ""


def test_the_draft_data_is_built_once_for_every_language():
    drafts = confirmations.draft_vocabulary()
    assert drafts is confirmations.draft_vocabulary()
    assert {"anul", "annul", "stornier", "ביטל", "الغ"} <= drafts.actions["cancel"]
    assert "let me" in drafts.holding and "dejame" in drafts.holding
