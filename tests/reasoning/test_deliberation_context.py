"""Deliberative mode's context (apps/reasoning/deliberation/context.py): the sections the
conversation needs in full, the others named and fetched when the synthesis asks for them —
through the real `openai` SDK against the scripted server."""

from __future__ import annotations

from typing import Any

import pytest

from apps.clients.models import Client
from apps.conversations.services import conversation_create
from apps.reasoning.deliberation.context import (
    MAX_SECTIONS,
    deliberative_context,
    relevance,
    select,
    tool_signature,
)
from apps.reasoning.models import ReasoningTrace
from apps.tools.models import ClientTool
from devtools.fake_llm import message_text
from tests.factories import set_deliberation
from tests.reasoning.test_deliberative import end_of, rc, step
from tests.support.shop import Chat, assess, make_shop

pytestmark = pytest.mark.django_db

RETURNS = (
    "Items can be returned within 60 days of delivery, unused and with their tags. Refunds go "
    "to the original payment method within 5 business days of the return arriving. Footwear "
    "must be tried on indoors only; boots with dirt or wear on the soles cannot be returned. "
    "Tents go back in their stuff sacks with all poles and stakes. A prepaid label comes with "
    "every US return and $7.95 is deducted unless the item is defective."
)
SHIPPING = (
    "Orders placed before noon ship the same day. Standard delivery takes 3-7 business days; "
    "overnight delivery costs $29.95 and arrives the next business day. International parcels "
    "take 7-21 business days, duties collected at checkout for Canada, the UK and the EU. Fuel "
    "canisters cannot be shipped abroad. Tracking numbers arrive by email."
)
PRIVACY = (
    "We keep order records for 7 years and support conversations for 2 years. Ask "
    "privacy@shop.example to see, correct or erase your personal data; card details are never "
    "stored by us. We do not sell personal information and share it only with carriers and "
    "payment processors."
)
TERMS = (
    "Our own label carries a 2-year warranty against defects in materials and workmanship; "
    "other brands are covered by their maker's warranty and we help file the claim. Warranties "
    "do not cover normal wear, misuse or accidents. Obvious pricing errors may be cancelled."
)
# The same business in Spanish: the scoring knows no language's words.
ES = {
    "returns": "Puede devolver los artículos en un plazo de 60 días desde la entrega, sin usar y "
    "con sus etiquetas. El reembolso se hace en 5 días hábiles.",
    "shipping": "Los pedidos hechos antes del mediodía se envían el mismo día; la entrega "
    "estándar tarda de 3 a 7 días hábiles.",
    "privacy": "Guardamos los pedidos 7 años. Escriba a privacidad@tienda.example para ver o "
    "borrar sus datos personales.",
    "terms": "Nuestra marca tiene una garantía de 2 años contra defectos de fabricación.",
}


def shop_info(policies: dict[str, str]) -> dict[str, Any]:
    return {
        "about": {"description": "An outdoor shop.", "full": "A long story about the shop."},
        "contact": {"hours": "Mon-Fri 9-17", "phone": "+1 555 0100"},
        "policies": policies,
        "ai_instructions": "Be brief.",
    }


def policy_shop(mode: str, webhook: Any, slug: str, refinement_iterations: int) -> Client:
    """A shop on `mode` whose business information holds the four policies above."""
    client = make_shop(mode, webhook.url(), slug=slug)
    client.business_info = shop_info(
        {"returns": RETURNS, "shipping": SHIPPING, "privacy": PRIVACY, "terms": TERMS}
    )
    client.save(update_fields=["business_info"])
    set_deliberation(client.plan_id, refinement_iterations=refinement_iterations)
    client.plan.refresh_from_db()
    return client


@pytest.fixture
def shop(db, webhook) -> Client:
    return policy_shop("deliberative", webhook, "ctx-shop", refinement_iterations=1)


def tools_of(client: Client) -> list[ClientTool]:
    return list(ClientTool.objects.filter(client=client, enabled=True).order_by("name"))


def script_rising_loop(llm: Any) -> None:
    """Four steps, each on course (the server's note, no feedback call), the last at target."""
    llm.script("reason_step", *[step(n, s) for n, s in enumerate([0.6, 0.65, 0.7, 0.8], 1)])


def trace() -> ReasoningTrace:
    return ReasoningTrace.objects.unscoped("test checks the database directly").get()


def test_the_relevant_policy_scores_highest_in_english_and_in_spanish() -> None:
    english = {
        "policies.returns": RETURNS,
        "policies.shipping": SHIPPING,
        "policies.privacy": PRIVACY,
        "policies.terms": TERMS,
    }
    scores = relevance("How many days do I have to return unused boots?", english)
    assert max(scores, key=scores.__getitem__) == "policies.returns"
    scores = relevance("Can you erase my personal data?", english)
    assert max(scores, key=scores.__getitem__) == "policies.privacy"

    spanish = {f"policies.{k}": v for k, v in ES.items()}
    scores = relevance("¿Cuántos días tengo para devolver unas botas sin usar?", spanish)
    assert max(scores, key=scores.__getitem__) == "policies.returns"
    scores = relevance("¿Tienen garantía contra defectos?", spanish)
    assert max(scores, key=scores.__getitem__) == "policies.terms"


def test_only_standout_sections_are_selected_and_wanted_ones_always() -> None:
    # Nothing stands out: nothing is sent in full.
    assert select({"a": 0.1, "b": 0.1, "c": 0.1}) == []
    assert select({"a": 0.0, "b": 0.0}) == []
    # One clear winner among many.
    assert select({"a": 0.5, "b": 0.05, "c": 0.05, "d": 0.04}) == ["a"]
    # At most MAX_SECTIONS by score; a key already wanted is kept first, whatever its score.
    many = {f"k{i}": 1.0 for i in range(MAX_SECTIONS + 2)} | {f"z{i}": 0.0 for i in range(20)}
    assert len(select(many)) == MAX_SECTIONS
    assert select({"a": 0.5, "b": 0.0, "c": 0.01}, wanted=["b"])[0] == "b"
    assert select({"a": 0.5, "b": 0.0, "c": 0.0}, wanted=["not-a-section"]) == ["a"]


def test_the_context_names_every_section_and_gives_the_relevant_ones(shop) -> None:
    scope = deliberative_context(
        client=shop, tools=tools_of(shop), query="How many days do I have to return my boots?"
    )
    assert "policies.returns" in scope.included
    assert RETURNS in scope.text
    assert PRIVACY not in scope.text and "A long story" not in scope.text
    # Every section is named, so the synthesis can ask for the others; the tools' schemas as
    # `tool_schema:<name>` after the tools' own lines.
    for key in ("policies.shipping", "policies.privacy", "about.full"):
        assert key in scope.listed and key in scope.text
    assert "tool_schema:<name>" in scope.text.split("## sections", 1)[1]
    for tool in tools_of(shop):
        assert f"tool_schema:{tool.name}" in scope.available
    assert set(scope.available) == set(scope.listed) - set(scope.included)
    # Always there: the basics, the business's instructions, one line per enabled tool.
    assert "Business: Trail Shop" in scope.text and "Be brief." in scope.text
    for tool in tools_of(shop):
        assert tool_signature(tool) in scope.text
    assert "gift_card_balance" not in scope.text  # disabled


def test_a_tool_line_says_what_calling_it_takes(shop) -> None:
    tool = ClientTool.objects.get(client=shop, name="update_shipping_address")
    line = tool_signature(tool)
    assert line.startswith("- update_shipping_address (action): Change where an order ships.")
    assert 'order_id* (string "^TH-\\\\d{5}$")' in line and "address* (string)" in line


def test_the_part_before_the_turns_sections_is_the_same_for_every_message(shop) -> None:
    """What the provider can cache across turns: everything before the chosen sections."""
    tools = tools_of(shop)
    one = deliberative_context(client=shop, tools=tools, query="Can I return my boots?")
    two = deliberative_context(client=shop, tools=tools, query="Do you ship overnight?")
    stable = one.text.split("\n\n## policies.")[0]
    assert two.text.startswith(stable) and "## sections" in stable
    assert one.included != two.included


def test_the_turn_sends_the_chosen_sections_and_fetches_one_the_synthesis_asks_for(chat, llm):
    script_rising_loop(llm)
    llm.script(
        "synthesize",
        assess(response="Let me check.", confidence=5, needs_more_context=["policies.terms"]),
        assess(response="Our label has a 2-year warranty; returns take 60 days.", confidence=9),
    )
    llm.script("refine_critique", rc(95))

    chat.say("How many days do I have to return unused boots?")

    calls = [r for r in llm.requests if r.step != "feedback"]
    assert [r.step for r in calls] == [
        *["reason_step"] * 4,
        "synthesize",
        "synthesize",
        "refine_critique",
    ]
    system = message_text(calls[0].messages[0])
    assert RETURNS in system and TERMS not in system  # terms: named, not given
    assert "policies.terms" in system
    # Every call keeps the same first message (the cached prefix) …
    assert all(r.messages[0] == calls[0].messages[0] for r in calls)
    # … the asked-for section comes after the loop, in the second synthesis and after it.
    first, second, critique = calls[4].messages, calls[5].messages, calls[6].messages
    assert not any(TERMS in message_text(m) for m in first)
    asked = [m for m in second if TERMS in message_text(m)]
    assert len(asked) == 1 and asked[0]["role"] == "system"
    assert second[: len(first) - 1] == first[:-1]  # appended: the loop stays a cached prefix
    assert any(TERMS in message_text(m) for m in critique)  # the critic judges against it too
    end = end_of(trace())
    assert "policies.returns" in end["context"] and end["context_asked"] == ["policies.terms"]
    assert "policies.terms" in trace().context_fetched


def test_a_key_the_context_did_not_name_is_not_fetched(chat, llm):
    script_rising_loop(llm)
    llm.script(
        "synthesize",
        assess(response="Returns take 60 days.", confidence=9, needs_more_context=["secrets"]),
    )
    llm.script("refine_critique", rc(95))

    chat.say("How many days do I have to return unused boots?")

    assert [r.step for r in llm.requests].count("synthesize") == 1
    assert end_of(trace())["context_asked"] == []


def test_sections_adaptive_fetched_are_kept_when_it_escalates(
    db, webhook, llm, django_capture_on_commit_callbacks
):
    """ "Deliberate when needed": the keys adaptive's assess asked for are in the deliberative
    context whatever their score."""
    client = policy_shop("as_needed", webhook, "ctx-when-needed", refinement_iterations=0)
    conversation = conversation_create(client=client)[0]
    chat = Chat(client, conversation, django_capture_on_commit_callbacks)
    llm.script(
        "assess",
        assess(response="Let me check.", confidence=5, needs_more_context=["policies.privacy"]),
        assess(response="Maybe 60 days?", confidence=5),
    )
    script_rising_loop(llm)
    llm.script("synthesize", assess(response="Returns take 60 days.", confidence=9))

    chat.say("How many days do I have to return unused boots?")

    first_step = next(r for r in llm.requests if r.step == "reason_step")
    system = message_text(first_step.messages[0])
    assert PRIVACY in system and RETURNS in system
    assert end_of(trace())["context"][0] == "policies.privacy"


def test_a_small_business_info_is_sent_whole(shop) -> None:
    shop.business_info = shop_info({"returns": "30-day returns.", "shipping": "Ships in 2 days."})
    shop.save(update_fields=["business_info"])
    scope = deliberative_context(client=shop, tools=tools_of(shop), query="Can I return it?")
    assert scope.available == [] and set(scope.included) == set(scope.listed)
    assert "Ships in 2 days." in scope.text


def test_a_question_the_basics_answer_gets_no_section(shop) -> None:
    """A section is sent only when it matches the message better than the basics (always sent)
    do — not merely because it is the best of a bad lot; every section stays named."""
    tools = tools_of(shop)
    for query in ("Hi! What are your opening hours?", "¿Cuál es su horario?"):
        scope = deliberative_context(client=shop, tools=tools, query=query)
        assert scope.included == [], (query, scope.as_data())
        assert "Hours: Mon-Fri 9-17" in scope.text
        for key in ("policies.returns", "policies.privacy"):
            assert key in scope.available and key in scope.text
        assert "tool_schema:cancel_order" in scope.available
        assert RETURNS not in scope.text and PRIVACY not in scope.text
    # A question the basics do not answer still gets its section.
    scope = deliberative_context(client=shop, tools=tools, query="Can I return my boots?")
    assert scope.included[0] == "policies.returns"
    assert scope.scores["policies.returns"] > scope.floor


def test_a_section_must_score_above_the_floor() -> None:
    assert select({"a": 0.5, "b": 0.05, "c": 0.05, "d": 0.04}, floor=0.6) == []
    assert select({"a": 0.5, "b": 0.05, "c": 0.05, "d": 0.04}, floor=0.4) == ["a"]
    assert select({"a": 0.5, "b": 0.0}, wanted=["b"], floor=0.9) == ["b"]  # wanted: kept


def test_a_tool_schema_section_does_not_repeat_the_tools_line(shop) -> None:
    tools = tools_of(shop)
    scope = deliberative_context(
        client=shop, tools=tools, query="Change the shipping address of TH-12345 to 1 Main St"
    )
    assert "tool_schema:update_shipping_address" in scope.included
    tool = next(t for t in tools if t.name == "update_shipping_address")
    body = scope.text.split("## tool_schema:update_shipping_address\n", 1)[1]
    assert body.startswith("parameters: {") and '"address"' in body
    assert scope.text.count(str(tool.description)) == 1  # in the tool's line only


def test_the_knowledge_block_gives_each_chunk_under_its_heading_without_its_id() -> None:
    from apps.knowledge.retrieval import Hit
    from apps.reasoning.deliberation.context import knowledge_message
    from apps.reasoning.knowledge import source_label

    hits = [
        Hit(1, "a1b2c3d4-0000-4000-8000-000000000001", "Boot sizing", "faq", 7, 0, "Boot sizing",
            "Our boots run half a size small.", 9, 3.2, ""),
        Hit(2, "a1b2c3d4-0000-4000-8000-000000000002", "Tents", "article", 8, 2,
            "Tents › Drying", "Dry your tent fully before storing it.", 10, 2.1, ""),
    ]  # fmt: skip
    [message] = knowledge_message(hits)
    text = message_text(message)
    assert message["role"] == "user" and "knowledge base excerpts" in text
    assert "## Boot sizing\nOur boots run half a size small." in text
    assert "## Tents › Drying\nDry your tent fully before storing it." in text
    assert "a1b2c3d4" not in text and source_label(hits[0]).startswith("kb a1b2c3d4")
    assert knowledge_message([]) == []
