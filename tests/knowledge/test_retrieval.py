"""Chunking and retrieval (full text: SQLite FTS5 here, PostgreSQL with DATABASE_URL)."""

from __future__ import annotations

import pytest
from django.db import connection

from apps.knowledge import retrieval
from apps.knowledge.models import Article, ArticleChunk, ArticleKind, ArticleStatus, KnowledgeSource
from apps.knowledge.services.indexing import MAX_TOKENS, article_index, chunk_texts
from tests.factories import ClientFactory

pytestmark = pytest.mark.django_db


def _article(client, title, body, **kw):
    article = Article(client=client, title=title, body=body, **kw)
    article.refresh_hash()
    article.save()
    article_index(article=article)
    return article


def test_chunks_keep_the_heading_path_and_stay_within_the_token_bound():
    paragraph = " ".join(f"Sentence {i} about refunds and store credit." for i in range(40))
    body = (
        "Intro.\n\n## Refund window\n"
        + "\n\n".join([paragraph] * 4)
        + "\n\n### Sale items\nFinal sale.\n\n## Costs\nFree."
    )
    article = Article(title="Returns", body=body)
    chunks = chunk_texts(article)
    headings = [h for h, _ in chunks]
    assert headings[0] == "Returns"
    assert "Returns › Refund window" in headings
    assert "Returns › Refund window › Sale items" in headings
    assert headings[-1] == "Returns › Costs"
    window = [t for h, t in chunks if h == "Returns › Refund window"]
    assert len(window) > 1  # a long section is split
    for heading, text in chunks:
        assert (len(heading) + 1 + len(text)) / 4 <= MAX_TOKENS + 1
    # Nothing is lost: every sentence is in some chunk.
    joined = " ".join(t for _, t in chunks)
    assert joined.count("Sentence 39 about refunds") == 4


def test_an_faq_is_one_chunk_with_question_and_answer():
    client = ClientFactory()
    faq = _article(client, "Do you ship abroad?", "Yes, to the EU.", kind=ArticleKind.FAQ)
    [chunk] = ArticleChunk.objects.for_client(client).filter(article=faq)
    assert (chunk.heading, chunk.text) == ("Do you ship abroad?", "Yes, to the EU.")


def test_unchanged_articles_keep_their_chunk_ids_and_edits_rebuild():
    client = ClientFactory()
    article = _article(client, "Care", "## Wash\nCold water.\n\n## Dry\nAir dry only.")
    ids = list(ArticleChunk.objects.for_client(client).values_list("pk", flat=True))
    assert article_index(article=article) == 0
    assert list(ArticleChunk.objects.for_client(client).values_list("pk", flat=True)) == ids
    article.body = "## Wash\nWarm water, gentle cycle."
    article.refresh_hash()
    article.save()
    assert article_index(article=article) == 1
    [hit] = retrieval.search(client=client, query="gentle cycle")
    assert hit.article_id == article.pk and "Warm water" in hit.text
    assert retrieval.search(client=client, query="air dry") == []


def test_a_natural_question_finds_the_answering_chunk_first():
    client = ClientFactory()
    _article(client, "Shipping regions", "## Canada\nWe ship to Canada in 5 to 8 days.")
    boots = _article(
        client,
        "Boot sizing",
        "## Fit\nOur hiking boots run half a size small; order half a size up.",
        language="en",
    )
    _article(client, "Tent care", "## Drying\nDry your tent before storing it.")
    hits = retrieval.search(client=client, query="What size hiking boots should I order?")
    assert hits and hits[0].article_id == boots.pk
    hit = hits[0]
    assert (hit.title, hit.kind, hit.heading) == ("Boot sizing", "article", "Boot sizing › Fit")
    assert hit.article_public_id == str(boots.public_id)
    assert hit.score > 0 and hit.tokens > 0 and hit.ordinal == 0


@pytest.mark.parametrize("switch", ["disabled", "draft", "source_off"])
def test_an_unusable_article_is_never_returned(switch):
    client = ClientFactory()
    kw: dict[str, object] = {}
    if switch == "disabled":
        kw["enabled"] = False
    elif switch == "draft":
        kw["status"] = ArticleStatus.DRAFT
    else:
        kw["source"] = KnowledgeSource.objects.create(
            client=client, name="Old site", kind="url", enabled=False
        )
    _article(client, "Warranty", "Lifetime warranty on all packs.", **kw)
    assert retrieval.search(client=client, query="warranty packs") == []
    assert "Warranty" not in retrieval.topics(client=client)


def test_search_is_client_scoped():
    a, b = ClientFactory(), ClientFactory()
    _article(a, "Warranty", "Lifetime warranty on all packs.")
    assert retrieval.search(client=b, query="warranty") == []
    assert len(retrieval.search(client=a, query="warranty")) == 1


def test_the_token_budget_takes_hits_in_rank_order_while_they_fit():
    client = ClientFactory()
    for i in range(6):
        _article(client, f"Stove {i}", f"Camping stove fuel canister note {i}. " * (3 + i))
    hits = retrieval.search(client=client, query="stove fuel", limit=10)
    assert len(hits) == 6
    budget = hits[0].tokens + hits[1].tokens
    capped = retrieval.search(client=client, query="stove fuel", limit=10, token_budget=budget)
    assert sum(h.tokens for h in capped) <= budget
    assert capped[:2] == hits[:2]


def test_a_chunk_far_below_the_best_is_left_out_with_a_minimum_share():
    client = ClientFactory()
    _article(client, "Stove fuel", "Stove fuel canisters: stove fuel for every camping stove.")
    _article(client, "Packing list", "Bring a map, water, a jacket and fuel.")
    hits = retrieval.search(client=client, query="stove fuel canister", limit=5)
    assert [h.title for h in hits] == ["Stove fuel", "Packing list"]
    share = hits[1].score / hits[0].score
    assert 0 < share < 0.9
    cut = retrieval.search(
        client=client, query="stove fuel canister", limit=5, min_share_of_best=share + 0.05
    )
    assert [h.title for h in cut] == ["Stove fuel"]
    # under the weaker chunk's share it stays: the cut is relative, not a fixed score
    kept = retrieval.search(
        client=client, query="stove fuel canister", limit=5, min_share_of_best=share - 0.05
    )
    assert [h.title for h in kept] == ["Stove fuel", "Packing list"]


def test_query_syntax_is_escaped():
    client = ClientFactory()
    _article(client, "Gift cards", "Gift cards never expire.")
    for query in ['gift" OR "x', "cards -never", "NEAR(gift cards)", "*", "'; drop table x; --"]:
        retrieval.search(client=client, query=query)  # no error
    assert retrieval.search(client=client, query="") == []
    assert retrieval.search(client=client, query="?!") == []


def test_topics_are_bounded_and_prefer_tags():
    client = ClientFactory()
    for i in range(30):
        _article(client, f"A rather long article title number {i}", "Text.", tags=["returns"])
    _article(client, "Sizing", "Text.", tags=["sizing", "returns"])
    topics = retrieval.topics(client=client)
    assert topics[:2] == ["returns", "sizing"]
    assert len(topics) <= retrieval.MAX_TOPICS
    assert sum(len(t) + 2 for t in topics) / 4 <= retrieval.MAX_TOPIC_TOKENS


def test_the_summary_is_topics_and_has_knowledge_in_one_cache_read(monkeypatch):
    client, empty = ClientFactory(), ClientFactory()
    _article(client, "Sizing", "Text.", tags=["sizing"])
    reads: list[str] = []
    get = retrieval.cache.get

    def counted_get(key: str, *args: object, **kwargs: object) -> object:
        reads.append(key)
        return get(key, *args, **kwargs)

    monkeypatch.setattr(retrieval.cache, "get", counted_get)
    for shop, has in ((client, True), (empty, False)):
        assert retrieval.knowledge_summary(client=shop) == (retrieval.topics(client=shop), has)
        assert retrieval.has_knowledge(client=shop) is has
        reads.clear()
        retrieval.knowledge_summary(client=shop)
        assert len(reads) == 1


@pytest.mark.skipif(connection.vendor != "sqlite", reason="the FTS5 table is SQLite's")
def test_sqlite_fts_rows_follow_the_chunks():
    client = ClientFactory()
    article = _article(client, "Stoves", "## Fuel\nIsobutane canisters.")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM knowledge_chunk_fts WHERE knowledge_chunk_fts MATCH 'isobutane'"
        )
        assert cursor.fetchone()[0] == 1
        article.delete()
        cursor.execute(
            "SELECT count(*) FROM knowledge_chunk_fts WHERE knowledge_chunk_fts MATCH 'isobutane'"
        )
        assert cursor.fetchone()[0] == 0
