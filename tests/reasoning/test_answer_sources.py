"""The sources under a knowledge answer (`apps.reasoning.knowledge.answer_sources`): the
articles the answer came from — of this client only, usable (published, switched on) only,
with the article's public page where it has one — written on the reply's `data.sources`
for the widget and the console; none when the client switched them off, when a tool ran or
when the guards asked the customer something."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from apps.clients.models import Client
from apps.knowledge.models import Article, ArticleStatus
from apps.knowledge.retrieval import Hit
from apps.reasoning.knowledge import answer_sources
from tests.factories import ClientFactory
from tests.support.fake_webhook import Reply
from tests.support.shop import Chat, article, assess, cancel_assess, lookup_assess

pytestmark = pytest.mark.django_db

FIT = "Our Ridgeline hiking boots run half a size small, so order half a size up."
BOOTS_URL = "https://shop.example/help/boot-sizing"


def load_knowledge(client: Client) -> None:
    article(client, "Boot sizing", f"## Fit\n{FIT}", source_url=BOOTS_URL)
    article(client, "Ridgeline boots FAQ", "Ridgeline hiking boots: sizing runs small.")
    article(client, "Old boot sizing", "Ridgeline hiking boots sizing: two up.", enabled=False)
    article(
        client,
        "New boot sizing",
        "Ridgeline hiking boots sizing: a full size down.",
        status=ArticleStatus.DRAFT,
        source_url="https://shop.example/help/draft",
    )
    article(client, "Tent care", "## Drying\nDry your tent fully before storing it.")


def ask_kb_then_answer(llm: Any, plan: dict[str, Any] | None = None) -> None:
    """The model asks for the boot sizing articles, then plans `plan` (by default: answers FIT
    with confidence 8)."""
    llm.script(
        "assess",
        assess(confidence=5, needs_more_context=["kb:Ridgeline hiking boots sizing"]),
        plan or assess(response=FIT, confidence=8),
    )


def test_a_knowledge_answer_names_its_articles(chat: Chat, llm: Any) -> None:
    load_knowledge(chat.client)
    # Another tenant's help centre with the same article: never a source of this one's answers.
    other = ClientFactory(slug="other-shop", plan=chat.client.plan)
    article(other, "Boot sizing", f"## Fit\n{FIT}", source_url="https://other.example/boots")
    ask_kb_then_answer(llm)

    [reply] = chat.say("Do the Ridgeline hiking boots run small?")

    assert reply.text == FIT
    sources = reply.data["sources"]
    assert {"title": "Boot sizing", "url": BOOTS_URL} in sources
    titles = [s["title"] for s in sources]
    # an article without a public page is its title alone
    assert {"title": "Ridgeline boots FAQ", "url": ""} in sources
    # never a switched-off or draft article, never another tenant's page, never a weak match
    assert "Old boot sizing" not in titles and "New boot sizing" not in titles
    assert "Tent care" not in titles
    assert all("other.example" not in s["url"] for s in sources)
    assert len(sources) == len(set(titles)) <= 3


def test_no_sources_when_the_client_switched_them_off(chat: Chat, llm: Any) -> None:
    load_knowledge(chat.client)
    Client.objects.filter(pk=chat.client.pk).update(show_sources=False)
    chat.client.refresh_from_db()
    ask_kb_then_answer(llm)

    [reply] = chat.say("Do the Ridgeline hiking boots run small?")

    assert reply.text == FIT
    assert "sources" not in reply.data


def test_no_sources_under_an_answer_from_a_tool(chat: Chat, llm: Any, webhook: Any) -> None:
    load_knowledge(chat.client)
    ask_kb_then_answer(llm, lookup_assess("TH-55555", confidence=9))
    webhook.script(Reply.ok({"status": "shipped"}))
    llm.script("compose", {"response": "Order TH-55555 has shipped."})

    [reply] = chat.say("Where are my Ridgeline hiking boots, order TH-55555?")

    assert reply.text == "Order TH-55555 has shipped."
    assert "sources" not in reply.data


def test_no_sources_under_a_confirmation_question(chat: Chat, llm: Any) -> None:
    load_knowledge(chat.client)
    question = "Shall I cancel order TH-55555?"
    ask_kb_then_answer(llm, cancel_assess("TH-55555", response=question, confidence=9))

    replies = chat.say("The Ridgeline hiking boots are too small: cancel order TH-55555")

    assert replies and all("sources" not in r.data for r in replies)


def hit(a: Article, score: float) -> Hit:
    return Hit(
        article_id=a.pk,
        article_public_id=str(a.public_id),
        title=a.title,
        kind=a.kind,
        chunk_id=a.pk * 10,
        ordinal=0,
        heading="",
        text=a.body,
        tokens=10,
        score=score,
        source_url=a.source_url,
    )


def turn_with(client: Client, hits: list[Hit], verdicts: tuple[str, ...] = ("none",)) -> Any:
    """What `answer_sources` reads of a turn."""
    return SimpleNamespace(client=client, knowledge=hits, verdicts=list(verdicts), tools_run=[])


def test_sources_are_read_again_within_the_client_and_only_usable(shop: Client) -> None:
    boots = article(shop, "Boot sizing", FIT, source_url=BOOTS_URL)
    faq = article(shop, "Boot FAQ", "Runs small.", source_url="ftp://shop.example/faq")
    weak = article(shop, "Socks", "Wool socks.", source_url="https://shop.example/socks")
    other = ClientFactory(slug="other-shop", plan=shop.plan)
    theirs = article(other, "Their boots", FIT, source_url="https://other.example/boots")
    hits = [hit(boots, 9.0), hit(theirs, 8.5), hit(faq, 6.0), hit(weak, 1.0)]

    assert answer_sources(turn_with(shop, hits)) == [
        {"title": "Boot sizing", "url": BOOTS_URL},
        {"title": "Boot FAQ", "url": ""},  # not a web page: the title alone
    ]
    # unpublished (or switched off) after it was fetched: no longer a source
    Article.objects.for_client(shop).filter(pk=boots.pk).update(status=ArticleStatus.DRAFT)
    Article.objects.for_client(shop).filter(pk=faq.pk).update(enabled=False)
    assert answer_sources(turn_with(shop, hits)) == []
    # not a plain answer: a guard asked, or nothing decided
    Article.objects.for_client(shop).filter(pk=boots.pk).update(status=ArticleStatus.PUBLISHED)
    assert answer_sources(turn_with(shop, hits, ("none", "ask"))) == []
    assert answer_sources(turn_with(shop, hits, ())) == []
    assert answer_sources(turn_with(shop, [])) == []
