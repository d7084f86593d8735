"""The knowledge base in the modes, through the real `openai` SDK against the scripted server:
adaptive's topics line and `kb:` fetches, standard's chunks for the message, deliberative's
synthesis asking for more; the trace's `knowledge` step and citations in the debug view; the
evaluation reading exactly the fetched chunks; switched-off articles never reaching a prompt;
and the offline demo model retrieving for real."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from apps.clients.models import Plan
from apps.knowledge.models import Article, ArticleKind, ArticleStatus
from apps.reasoning.models import ReasoningStep
from apps.reasoning.steps import _data, _demo
from tests.factories import set_deliberation
from tests.support.shop import Chat, article, assess, make_shop

pytestmark = pytest.mark.django_db

FIT = "Our Ridgeline hiking boots run half a size small, so order half a size up."
OFF = "Ridgeline hiking boots secret sizing: always order two sizes up (draft, wrong)."
DRAFT = "Ridgeline hiking boots sizing draft: order a full size down."


def load_knowledge(client: Any) -> Article:
    boots = article(
        client, "Boot sizing", f"## Fit\n{FIT}\n\n## Width\nWide sizes exist.", tags=["sizing"]
    )
    article(client, "Old sizing", OFF, enabled=False, tags=["secret"])
    article(client, "New sizing", DRAFT, status=ArticleStatus.DRAFT)
    article(client, "Tent care", "## Drying\nDry your tent fully before storing it.", tags=["care"])
    article(client, "Do you ship to Canada?", "Yes, in 5 to 8 days.", kind=ArticleKind.FAQ)
    return boots


def system_of(call: Any) -> str:
    return "\n".join(m["content"] for m in call.messages if m["role"] == "system")


def knowledge_blocks(call: Any) -> list[str]:
    return [
        m["content"]
        for m in call.messages
        if m["role"] == "user" and f'label="{_data.KNOWLEDGE}"' in m["content"]
    ]


def topics_blocks(call: Any) -> list[str]:
    return [
        m["content"]
        for m in call.messages
        if m["role"] == "user" and f'label="{_data.KNOWLEDGE_TOPICS}"' in m["content"]
    ]


def steps_named(name: str) -> list[ReasoningStep]:
    return list(
        ReasoningStep.objects.unscoped("test reads the trace").filter(name=name).order_by("index")
    )


def test_adaptive_lists_topics_fetches_kb_and_cites(chat: Chat, llm: Any, client: Any) -> None:
    boots = load_knowledge(chat.client)
    Plan.objects.filter(pk=chat.client.plan_id).update(
        evaluation_enabled=True, evaluation_min_chars=10
    )
    chat.client.plan.refresh_from_db()
    llm.script(
        "assess",
        assess(confidence=5, needs_more_context=["kb:hiking boots sizing"]),
        assess(response=FIT, confidence=8),
    )
    llm.script(
        "evaluate",
        {"valid": True, "improved_response": None, "improved_confidence": 0, "evaluation": "ok"},
    )

    [reply] = chat.say("Do the Ridgeline hiking boots run small? What size should I order?")

    assert reply.text == FIT
    first, second = llm.calls("assess")
    # the topics (never a switched-off article's) come as data; the system names the kb: key
    [topics] = topics_blocks(first)
    assert "sizing" in topics and "Boot sizing" in topics and "sizing" not in system_of(first)
    assert "secret" not in first.prompt_text and "kb:<search words>" in system_of(first)
    assert knowledge_blocks(first) == []
    # the fetched chunk comes as a data block, never in the system message
    [block] = knowledge_blocks(second)
    assert FIT in block and FIT not in system_of(second)
    assert "hiking boots sizing" not in system_of(second)
    for call in llm.requests:
        assert OFF not in call.prompt_text and DRAFT not in call.prompt_text
    # the trace: the fetch and the knowledge step with the hits
    [fetch] = steps_named("context_fetch")
    assert fetch.output["kb"] == ["hiking boots sizing"] and fetch.output["chunks"] >= 1
    [knowledge] = steps_named("knowledge")
    assert knowledge.output["query"] == "hiking boots sizing"
    top = knowledge.output["hits"][0]
    assert (top["article"], top["title"], top["chunk"]) == (str(boots.public_id), "Boot sizing", 0)
    assert top["score"] > 0 and top["tokens"] > 0
    assert knowledge.output["tokens"] <= 700
    # the evaluation reads exactly the fetched chunks (and the minimal context) as sources
    [evaluate] = llm.calls("evaluate")
    assert FIT in evaluate.prompt_text and OFF not in evaluate.prompt_text
    # the debug view shows the citation
    from tests.factories import UserFactory

    client.force_login(UserFactory(is_superuser=True))
    url = reverse("admin:conversations_conversation_change", args=[chat.conversation.pk])
    page = client.get(url).content.decode()
    assert "Knowledge: hiking boots sizing" in page
    assert 'class="gd-citation"' in page and "Boot sizing" in page


def test_adaptive_without_knowledge_offers_no_kb_key(chat: Chat, llm: Any) -> None:
    llm.script("assess", assess(response="Hi!"))
    chat.say("hello")
    [call] = llm.calls("assess")
    assert "kb:" not in system_of(call) and "topics" not in system_of(call)
    assert topics_blocks(call) == []
    assert steps_named("knowledge") == []


def test_an_article_switched_off_after_indexing_never_reaches_a_prompt(
    chat: Chat, llm: Any
) -> None:
    boots = load_knowledge(chat.client)
    boots.enabled = False
    boots.save()  # chunks stay (same content); the article is no longer usable
    llm.script(
        "assess",
        assess(confidence=5, needs_more_context=["kb:hiking boots sizing"]),
        assess(response="I don't know that one.", confidence=6),
    )
    chat.say("What size hiking boots should I order?")
    for call in llm.requests:
        assert FIT not in call.prompt_text and OFF not in call.prompt_text
    [knowledge] = steps_named("knowledge")
    assert "Boot sizing" not in [h["title"] for h in knowledge.output["hits"]]


def test_standard_mode_gets_the_top_chunks_for_the_message(
    standard_shop: Any, llm: Any, django_capture_on_commit_callbacks: Any
) -> None:
    standard_shop.business_info = {
        k: v for k, v in standard_shop.business_info.items() if k != "faqs"
    }  # FAQs live as articles
    standard_shop.save()
    load_knowledge(standard_shop)
    chat = Chat.new(standard_shop, django_capture_on_commit_callbacks)
    llm.script("respond", {"response": FIT, "tool_call": None, "tool_params": {}})
    chat.say("What size hiking boots should I order?")
    [call] = llm.calls("respond")
    [block] = knowledge_blocks(call)
    assert FIT in block and FIT not in system_of(call)
    # no FAQ dump: the Canada FAQ does not match the message and is not in the prompt
    assert "5 to 8 days" not in call.prompt_text
    assert OFF not in call.prompt_text and DRAFT not in call.prompt_text
    [knowledge] = steps_named("knowledge")
    assert knowledge.output["purpose"] == "respond"
    assert knowledge.output["tokens"] <= 1200


def deep_kb_chat(slug: str, webhook: Any, llm: Any, on_commit: Any) -> Chat:
    """A deliberative shop with the knowledge loaded, one loop step that ends it, no
    refinement."""
    shop = make_shop("deliberative", webhook.url(), slug=slug)
    set_deliberation(shop.plan_id, refinement_iterations=0, min_steps=1)
    shop.refresh_from_db()
    load_knowledge(shop)
    scores = dict.fromkeys(
        ["grounded", "relevant", "safe", "clear", "complete", "helpful", "honest"], 0.95
    )
    llm.default(
        "reason_step",
        {"content": "think", "status": "final", "scores": scores, "rationale": "r"},
    )
    llm.default("feedback", {"feedback": "ok"})
    return Chat.new(shop, on_commit)


def test_deliberative_synthesis_may_ask_for_more(
    db: Any, webhook: Any, llm: Any, django_capture_on_commit_callbacks: Any
) -> None:
    chat = deep_kb_chat("deep-kb", webhook, llm, django_capture_on_commit_callbacks)
    llm.script(
        "synthesize",
        assess(confidence=6, response="Let me check.", needs_more_context=["kb:tent drying"]),
        assess(response="Dry your tent fully before storing it.", confidence=8),
    )
    [reply] = chat.say("Is there anything about boots?")
    assert reply.text == "Dry your tent fully before storing it."
    # the reasoning steps read the chunks fetched for the message
    assert any(knowledge_blocks(call) for call in llm.calls("reason_step"))
    first, second = llm.calls("synthesize")
    assert "Dry your tent" not in first.prompt_text
    assert any("Dry your tent" in b for b in knowledge_blocks(second))
    purposes = [s.output["purpose"] for s in steps_named("knowledge")]
    assert purposes == ["deliberate", "synthesize"]
    # Deliberative fetches leave out chunks far below the best (their excerpts are re-sent in
    # every call of the turn), and the trace says by which share.
    assert {s.output["min_share_of_best"] for s in steps_named("knowledge")} == {0.4}


def test_deliberative_fetches_cut_chunks_below_the_share_of_the_best(
    db: Any, webhook: Any, llm: Any, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.REASONING_DELIBERATIVE_KB_MIN_SHARE = 1.0  # only chunks as good as the best
    chat = deep_kb_chat("deep-cut", webhook, llm, django_capture_on_commit_callbacks)
    llm.default("synthesize", assess(response="Dry your tent fully.", confidence=8))
    chat.say("How do I dry my tent and store my boots?")
    [fetched] = steps_named("knowledge")
    best = [h["score"] for h in fetched.output["hits"]]
    assert best and set(best) == {best[0]}
    settings.REASONING_DELIBERATIVE_KB_MIN_SHARE = 0.0
    chat.say("How do I dry my tent and store my boots?")
    again = ReasoningStep.objects.unscoped("test reads the trace").filter(name="knowledge").last()
    assert again is not None and again.pk != fetched.pk
    assert len(again.output["hits"]) > len(best)
    assert "min_share_of_best" not in again.output


def test_the_offline_demo_model_retrieves(
    chat: Chat, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.OPENAI_API_KEY = ""
    load_knowledge(chat.client)
    [reply] = chat.say("Do the hiking boots run small?")
    assert "half a size small" in reply.text
    [knowledge] = steps_named("knowledge")
    assert knowledge.output["query"] == "Do the hiking boots run small?"
    assert knowledge.output["hits"][0]["title"] == "Boot sizing"


RENTAL_PRICES = (
    "What does it cost to rent gear? Rentals are priced per night, with a two-night minimum.\n\n"
    "| Item | Per night |\n|---|---|\n| 2-person tent | $18 |\n| Snowshoes | $12 |\n\n"
    "We place a deposit hold of $100 per item on your credit card at pickup."
)


def test_the_offline_demo_model_answers_how_much_with_the_amount(chat: Chat, settings: Any) -> None:
    """A question about an amount gets the sentence (or table row) that states it, not the
    text's own question or a chunk without any price."""
    settings.OPENAI_API_KEY = ""
    article(chat.client, "Gear rentals", "Rent tents and snowshoes at our Denver showroom.")
    article(chat.client, "Rental prices and deposits", RENTAL_PRICES, tags=["rentals"])
    [reply] = chat.say("How much does it cost to rent snowshoes?")
    assert "$12" in reply.text, reply.text
    assert "What does it cost" not in reply.text


@pytest.mark.parametrize(
    "question",
    ["¿cuánto cuesta alquilar snowshoes?", "wie viel kosten snowshoes zur miete?"],
)
def test_the_demo_models_amount_cues_are_in_every_language(question: str) -> None:
    chunks = [
        {"heading": "Gear rentals", "text": "Rent tents and snowshoes at our showroom."},
        {"heading": "Rental prices", "text": RENTAL_PRICES},
    ]
    answer = _demo._knowledge_answer(question, chunks)
    assert "$12" in answer and "What does it cost" not in answer, answer
