"""The first cut of indexing and search, and the business info document with FAQs as rows."""

from typing import cast

import pytest

from apps.clients.models import Client
from apps.knowledge.models import Article, ArticleChunk, ArticleKind
from apps.knowledge.selectors import business_info_for, search_chunks
from apps.knowledge.services.indexing import article_index
from tests.factories import ClientFactory

pytestmark = pytest.mark.django_db


def _article(client, title, body, **kw):
    article = Article(client=client, title=title, body=body, **kw)
    article.refresh_hash()
    article.save()
    return article


def test_index_splits_by_heading_and_skips_unchanged():
    client = ClientFactory()
    article = _article(client, "Returns", "Intro line.\n\n## Window\n30 days.\n\n## Cost\nFree.")
    assert article_index(article=article) == 3
    headings = list(
        ArticleChunk.objects.for_client(client)
        .order_by("ordinal")
        .values_list("heading", flat=True)
    )
    assert headings == ["Returns", "Returns › Window", "Returns › Cost"]
    assert article_index(article=article) == 0


def test_search_finds_usable_articles_only():
    client = ClientFactory()
    on = _article(client, "Boot sizing", "Our hiking boots run half a size small.")
    off = _article(client, "Boot care", "Clean hiking boots with a soft brush.", enabled=False)
    for a in (on, off):
        article_index(article=a)
    hits = search_chunks(client=client, query="hiking boots size", language="en")
    assert [h.article_id for h in hits] == [on.pk]


def test_business_info_for_adds_faq_rows_unless_the_document_has_its_own():
    client = cast(Client, ClientFactory(business_info={"about": {"description": "Shop"}}))
    _article(client, "Do you ship abroad?", "Yes, to the EU.", kind=ArticleKind.FAQ)
    info = business_info_for(client)
    assert info["faqs"] == [{"question": "Do you ship abroad?", "answer": "Yes, to the EU."}]
    client.business_info = {"faqs": [{"question": "q", "answer": "a"}]}
    assert business_info_for(client)["faqs"] == [{"question": "q", "answer": "a"}]
