"""Chunks for retrieval: an article is split by heading into chunks of at most `MAX_TOKENS`
estimated tokens (a long section at paragraph, then sentence, then word boundaries), each
keeping its heading path ("Returns › Refund window"). An FAQ is one chunk (question + answer).

The full-text index is filled in the same transaction: on PostgreSQL the chunk's
`search_vector` (the article language's text-search configuration; heading weight A, text B),
on SQLite the FTS5 table `knowledge_chunk_fts`, which triggers keep in step with the chunk rows
(migration 0003). When `EMBEDDING_MODEL` is set
the chunks get the provider's embeddings after the commit, in batches; a failure leaves them
without one (search then ranks them by text alone) and never fails the save.

An article whose `indexed_hash` equals its `content_hash` is left alone: same chunks, same ids."""

from __future__ import annotations

import logging
import math
import re

from django.contrib.postgres.search import SearchVector
from django.db import connection, transaction

from apps.knowledge import cache as knowledge_cache
from apps.knowledge import embeddings
from apps.knowledge.models import Article, ArticleChunk, ArticleKind
from apps.notes.textsearch import search_config_for

logger = logging.getLogger(__name__)

MAX_TOKENS = 350
HEADING_SEPARATOR = " › "

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.MULTILINE)
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+")


def estimate_tokens(text: str) -> int:
    """One token per four characters, rounded up (the gateway's estimate)."""
    return max(1, math.ceil(len(text) / 4))


def _sections(article: Article) -> list[tuple[str, str]]:
    """(heading path, text) per heading section, the article's title at the root."""
    body = article.body or ""
    title = article.title.strip()
    path: list[tuple[int, str]] = []  # (level, heading) of the headings above
    parts: list[tuple[str, str]] = []
    heading = title
    last = 0
    for match in _HEADING.finditer(body):
        text = body[last : match.start()].strip()
        if text:
            parts.append((heading, text))
        level, name = len(match.group(1)), match.group(2).strip()
        path = [(lvl, h) for lvl, h in path if lvl < level] + [(level, name)]
        heading = HEADING_SEPARATOR.join([title, *(h for _, h in path)])
        last = match.end()
    tail = body[last:].strip()
    if tail or not parts:
        parts.append((heading, tail or title))
    return parts


def _pieces(text: str, limit: int) -> list[str]:
    """`text` as pieces of at most `limit` estimated tokens, cut at paragraph, then sentence,
    then word boundaries (a single over-long word is cut by characters)."""
    if estimate_tokens(text) <= limit:
        return [text]
    for splitter, joiner in ((re.compile(r"\n\s*\n"), "\n\n"), (_SENTENCE_END, " ")):
        units = [u.strip() for u in splitter.split(text) if u.strip()]
        if len(units) > 1:
            return _pack(units, joiner, limit)
    words = text.split()
    if len(words) > 1:
        return _pack(words, " ", limit)
    size = limit * 4
    return [text[i : i + size] for i in range(0, len(text), size)]


def _pack(units: list[str], joiner: str, limit: int) -> list[str]:
    out: list[str] = []
    current = ""
    for unit in units:
        for piece in _pieces(unit, limit):
            candidate = f"{current}{joiner}{piece}" if current else piece
            if estimate_tokens(candidate) <= limit:
                current = candidate
            else:
                if current:
                    out.append(current)
                current = piece
    if current:
        out.append(current)
    return out


def chunk_texts(article: Article, *, limit: int = MAX_TOKENS) -> list[tuple[str, str]]:
    """The article's chunks as (heading, text), in order."""
    if article.kind == ArticleKind.FAQ:
        return [(article.title.strip(), (article.body or "").strip() or article.title.strip())]
    chunks: list[tuple[str, str]] = []
    for heading, text in _sections(article):
        # The heading is indexed (and shown) with the text: leave it room.
        room = max(50, limit - estimate_tokens(heading))
        chunks.extend((heading, piece) for piece in _pieces(text, room))
    return chunks


def article_index(*, article: Article) -> int:
    """(Re)build an article's chunks when its content changed; returns the number written
    (0 = already indexed: its chunks are left untouched)."""
    if article.indexed_hash and article.indexed_hash == article.content_hash:
        return 0
    with transaction.atomic():
        count = _rebuild(article)
    if embeddings.enabled():
        chunk_ids = list(
            ArticleChunk.objects.for_client(article.client)
            .filter(article=article)
            .values_list("pk", flat=True)
        )
        transaction.on_commit(
            lambda: embeddings.fill_chunks(client=article.client, chunk_ids=chunk_ids)
        )
    return count


def _rebuild(article: Article) -> int:
    chunks_of_client = ArticleChunk.objects.for_client(article.client)
    chunks_of_client.filter(article=article).delete()
    language = article.language or article.client.language
    chunks = [
        ArticleChunk(
            client_id=article.client_id,
            article=article,
            ordinal=i,
            heading=heading[:300],
            text=text,
            tokens=estimate_tokens(f"{heading}\n{text}"),
            language=language,
        )
        for i, (heading, text) in enumerate(chunk_texts(article))
    ]
    chunks_of_client.bulk_create(chunks)
    if connection.vendor == "postgresql":
        config = search_config_for(language)
        chunks_of_client.filter(article=article).update(
            search_vector=SearchVector("heading", weight="A", config=config)
            + SearchVector("text", weight="B", config=config)
        )
    Article.objects.for_client(article.client).filter(pk=article.pk).update(
        indexed_hash=article.content_hash
    )
    knowledge_cache.invalidate(article.client_id)
    article.indexed_hash = article.content_hash
    return len(chunks)
