"""Optional embeddings: chunk vectors from the provider's `/v1/embeddings` (the real openai SDK
against the scripted server's hashed bag-of-words vectors), reciprocal rank fusion with the
text ranking, and failures that leave search on full text alone."""

from __future__ import annotations

from typing import Any

import pytest

from apps.knowledge import embeddings, retrieval
from apps.knowledge.models import Article, ArticleChunk
from apps.knowledge.services.indexing import article_index
from devtools.fake_llm import FakeLLMServer, embedding_vector
from tests.factories import ClientFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def provider(llm: FakeLLMServer, settings: Any) -> FakeLLMServer:
    """The scripted server (tests/support/shop.py's, reset around the test) as the embeddings
    provider too, two texts a request."""
    settings.EMBEDDING_MODEL = "fake-embed"
    settings.EMBEDDING_BATCH = 2
    return llm


def save(client: Any, title: str, body: str, capture: Any) -> Article:
    article = Article(client=client, title=title, body=body)
    article.refresh_hash()
    article.save()
    with capture(execute=True):  # the embeddings are filled after the commit
        article_index(article=article)
    return article


def test_indexing_fills_embeddings_in_batches(provider, django_capture_on_commit_callbacks):
    client = ClientFactory()
    save(
        client,
        "Care",
        "## Wash\nCold.\n\n## Dry\nAir.\n\n## Store\nDry place.",
        django_capture_on_commit_callbacks,
    )
    chunks = list(ArticleChunk.objects.for_client(client).order_by("ordinal"))
    assert len(chunks) == 3
    assert [len(batch) for batch in provider.embedding_requests] == [2, 1]
    for chunk in chunks:
        assert chunk.embedding_model == "fake-embed"
        assert chunk.embedding == pytest.approx(embedding_vector(f"{chunk.heading}\n{chunk.text}"))


def test_a_failed_embedding_never_fails_the_save(provider, django_capture_on_commit_callbacks):
    client = ClientFactory()
    provider.embedding_failures = 1
    article = save(
        client,
        "Stoves",
        "## Fuel\nIsobutane.\n\n## Wind\nUse a screen.\n\n## Pots\nTitanium.",
        django_capture_on_commit_callbacks,
    )
    chunks = list(ArticleChunk.objects.for_client(client).order_by("ordinal"))
    assert [c.embedding is None for c in chunks] == [True, True, False]  # first batch failed
    assert article.indexed_hash == article.content_hash
    # search still ranks every chunk by text; the query embedding fails too: text only
    provider.embedding_failures = 1
    [hit] = retrieval.search(client=client, query="isobutane fuel")
    assert hit.heading == "Stoves › Fuel"


def test_search_fuses_text_and_cosine_rankings(provider, django_capture_on_commit_callbacks):
    client = ClientFactory()
    capture = django_capture_on_commit_callbacks
    save(client, "Rain jackets", "Rain jackets keep you dry in rain and wind.", capture)
    save(client, "Down jackets", "Down jackets are warm; keep them dry.", capture)
    save(client, "Tents", "Tents keep rain out when pitched tight.", capture)
    save(client, "Boots", "Waterproof boots for rain.", capture)
    query = "dry in the rain"
    terms = retrieval.query_terms(query)
    text = retrieval._text_ranking(client, terms, "", 20)
    cosine = retrieval._cosine_ranking(client, embedding_vector(query), 20)
    expected = retrieval.fuse(text, cosine)
    hits = retrieval.search(client=client, query=query, limit=10)
    assert [h.chunk_id for h in hits] == [pk for pk, _ in expected][: len(hits)]
    assert len(hits) == 4
    for hit, (_pk, score) in zip(hits, expected, strict=False):
        assert hit.score == pytest.approx(score, rel=1e-5)
    # RRF by hand for the top hit: 1/(60 + its text rank) + 1/(60 + its cosine rank)
    top = hits[0].chunk_id
    by_hand = sum(
        1 / (60 + rank)
        for ranking in (text, cosine)
        for rank, (pk, _) in enumerate(ranking, start=1)
        if pk == top
    )
    assert hits[0].score == pytest.approx(by_hand, rel=1e-5)
    assert provider.embedding_requests[-1] == [query]  # the query went through the SDK


def test_embeddings_off_by_default(settings):
    settings.EMBEDDING_MODEL = ""
    assert embeddings.enabled() is False
    assert embeddings.embed_query("anything") is None
