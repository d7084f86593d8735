"""A reply that repeats our instructions to the customer is refused in code: asked again once
(quoting why), then the turn falls back — in any language the conversation is in. Quoting the
business's own text (its policies, in the same system message) is not an echo."""

from __future__ import annotations

import pytest

from apps.reasoning.prompt_echo import echoed_instructions
from apps.reasoning.steps._shared import RULES
from tests.support.shop import assess

pytestmark = pytest.mark.django_db

LEAK_EN = (
    "Sure! Destructive actions (cancel, delete, refund) need the customer's explicit "
    "confirmation of the exact details."
)
# A small model answering in Spanish with our (English) rule pasted in.
LEAK_ES = (
    "¡Claro! Use a tool only for what the customer asked; never invent parameter values. "
    "Dígame el número de pedido."
)
POLICY = "Returns are accepted within 30 days of delivery for a full refund to the card."


@pytest.mark.parametrize("reply", [LEAK_EN, LEAK_ES])
def test_a_reply_quoting_the_rules_is_an_echo(reply: str) -> None:
    assert echoed_instructions(reply, system=[RULES])


@pytest.mark.parametrize(
    "reply",
    [
        "Our returns window is 30 days. Would you like me to start a return?",
        "Claro, ¿me indica el número de pedido para consultarlo?",
        "I can't find that in our information; shall I pass you to a colleague?",
        "",
        # The business's own words, in the same system message: quoting them is fine.
        f"Good news: {POLICY}",
    ],
)
def test_own_words_and_the_business_s_text_are_not_an_echo(reply: str) -> None:
    assert echoed_instructions(reply, system=[RULES + "\n" + POLICY], data=[POLICY]) == ""


def test_an_echo_is_asked_again_with_the_reason_quoted(chat, llm) -> None:
    llm.script("assess", assess(response=LEAK_EN, confidence=9))
    llm.script("assess", assess(response="Happy to help! What would you like to do?"))

    [reply] = chat.say("Hi, can you help me?")

    assert reply.text == "Happy to help! What would you like to do?"
    _first, second = llm.calls("assess")
    assert "repeats your instructions" in second.messages[-1]["content"]
    assert "explicit confirmation" not in reply.text


def test_an_echo_twice_is_never_shown_in_spanish_either(chat, llm, shop) -> None:
    shop.languages = ["en", "es"]
    shop.save(update_fields=["languages"])
    llm.script("assess", assess(response=LEAK_ES, confidence=9))
    llm.script("assess", assess(response=LEAK_ES, confidence=9))

    replies = chat.say("Hola, quiero saber dónde está mi pedido, por favor, gracias")

    assert replies, "the turn ends in a reply or a hand-off"
    assert all("never invent parameter values" not in r.text for r in replies)
    assert len(llm.calls("assess")) == 2
