"""Chunks for retrieval. A first cut (one chunk per heading section); the retrieval work
replaces the splitting and adds SQLite FTS5 and embeddings behind the same signature."""

from __future__ import annotations

import re

from django.contrib.postgres.search import SearchVector
from django.db import connection, transaction

from apps.knowledge.models import Article, ArticleChunk
from apps.notes.textsearch import search_config_for

_HEADING = re.compile(r"^#{1,6}\s+(.*)$", re.MULTILINE)


def _sections(article: Article) -> list[tuple[str, str]]:
    body = article.body or ""
    parts: list[tuple[str, str]] = []
    heading = article.title
    last = 0
    for match in _HEADING.finditer(body):
        text = body[last : match.start()].strip()
        if text:
            parts.append((heading, text))
        heading = match.group(1).strip()
        last = match.end()
    tail = body[last:].strip()
    if tail or not parts:
        parts.append((heading, tail))
    return parts


@transaction.atomic
def article_index(*, article: Article) -> int:
    """(Re)build an article's chunks when its content changed; returns the number written
    (0 = already indexed)."""
    if article.indexed_hash and article.indexed_hash == article.content_hash:
        return 0
    ArticleChunk.objects.for_client(article.client).filter(article=article).delete()
    chunks = [
        ArticleChunk(
            client_id=article.client_id,
            article=article,
            ordinal=i,
            heading=heading[:300],
            text=text,
            tokens=max(1, len(text) // 4),
            language=article.language,
        )
        for i, (heading, text) in enumerate(_sections(article))
    ]
    ArticleChunk.objects.for_client(article.client).bulk_create(chunks)
    if connection.vendor == "postgresql":
        config = search_config_for(article.language)
        ArticleChunk.objects.for_client(article.client).filter(article=article).update(
            search_vector=SearchVector("heading", weight="A", config=config)
            + SearchVector("text", weight="B", config=config)
        )
    Article.objects.for_client(article.client).filter(pk=article.pk).update(
        indexed_hash=article.content_hash
    )
    article.indexed_hash = article.content_hash
    return len(chunks)
