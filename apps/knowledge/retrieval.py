"""Retrieval: the chunks of a client's usable articles that best match a query.

- Both: the query is its words less its language's stop words (`query_terms`).
- PostgreSQL: the chunk's `search_vector` (GIN-indexed) matched by `websearch_to_tsquery` of the
  query's words OR-combined — in the query language's configuration and in 'simple', so a
  natural question matches — ranked by Σ idf(word) × `ts_rank` (among the best `PG_CANDIDATES`
  by `ts_rank`).
- SQLite (the demo): the FTS5 table `knowledge_chunk_fts` matched by the query's words (each
  quoted, OR-combined), ranked with bm25 (heading weighted twice the text).
- With `EMBEDDING_MODEL` set: the text ranking and the cosine ranking of the chunks'
  embeddings fused by reciprocal rank fusion (k = 60); `Hit.score` is then the fused score.

Only chunks of usable articles (published, switched on, from a source switched on) of the
client are ever returned. With a `token_budget`, hits are taken in rank order while they fit
(a hit that does not fit is skipped; a smaller one after it may still fit)."""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

from django.core.cache import cache
from django.db import connection
from django.db.models import QuerySet

from apps.clients.models import Client
from apps.core import language_packs
from apps.core.tenant_sql import sql_rows
from apps.knowledge import cache as knowledge_cache
from apps.knowledge import embeddings
from apps.knowledge.models import Article, ArticleChunk
from apps.notes.textsearch import search_config_for

__all__ = ["RRF_K", "Hit", "has_knowledge", "search", "topics"]

RRF_K = 60
MAX_QUERY_TERMS = 32
MAX_TOPICS = 12
MAX_TOPIC_TOKENS = 60
# How many of the client's chunks (with an embedding) the cosine ranking reads at most.
EMBEDDING_SCAN = 5000

_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class Hit:
    article_id: int
    article_public_id: str
    title: str
    kind: str
    chunk_id: int
    ordinal: int
    heading: str
    text: str
    tokens: int
    score: float
    source_url: str


def stop_words(language: str) -> frozenset[str]:
    """The stop words of `language` (a code such as `es` or `pt-BR`): its grammar words
    (articles, pronouns, prepositions, auxiliaries, question words), which a help centre's text
    rarely uses but a customer's question always does (its pack's `STOP_WORDS` file). Empty
    for a language no pack ships."""
    return _stop_words(language.split("-")[0].lower())


@language_packs.derived
def _stop_words(code: str) -> frozenset[str]:
    pack = language_packs.get(code)
    path = pack.stop_words if pack is not None else None
    if path is None or not path.is_file():
        return frozenset()
    lines = path.read_text(encoding="utf-8").splitlines()
    return frozenset(w.strip().lower() for w in lines if w.strip() and not w.startswith("#"))


def query_terms(query: str, language: str = "") -> list[str]:
    """The query's distinct words (lower-cased, in order, at most `MAX_QUERY_TERMS`), less the
    stop words of its language — unless nothing else is left. Without this, a question's
    "do", "I", "where" (rare in articles, so weighted high) rank a short chunk that happens to
    hold them above the article about the question's subject."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(query.lower()):
        word = word.strip("_")
        if word and word not in seen:
            seen[word] = None
    words = list(seen)
    stop = stop_words(language) if language else frozenset()
    content = [w for w in words if w not in stop]
    return (content or words)[:MAX_QUERY_TERMS]


def _usable_chunks(client: Client) -> QuerySet[ArticleChunk]:
    return ArticleChunk.objects.for_client(client).filter(
        article__in=Article.objects.for_client(client).usable()
    )


# PostgreSQL ranks in two passes: every chunk matching one of the query's words by `ts_rank`
# against the query in its language's configuration (cheap), then the best `PG_CANDIDATES` of
# them by the sum over the words of idf(word) × `ts_rank(chunk, word)` (normalised by the
# chunk's length, 1 + log) — `ts_rank` alone weighs every word alike, so "order", in half the
# help centre, counted as much as "germany" (docs/knowledge.md, "Full-text search"). The idf is
# BM25's, log(1 + (N − n + 0.5) / (n + 0.5)) over the client's N chunks, n of them holding the
# word, counted first (one query; each count an index scan).
PG_CANDIDATES = 200
PG_RANK_NORMALISATION = 1  # ts_rank's: divide by 1 + the logarithm of the chunk's length
_PG_WORD = (
    "(websearch_to_tsquery(%(config)s::regconfig, %(w{i})s)"
    " || websearch_to_tsquery('simple'::regconfig, %(w{i})s))"
)
_PG_COUNTS = """
    SELECT (SELECT count(*) FROM knowledge_articlechunk WHERE client_id = %(client)s) AS total,
           {counts}
"""
_PG_COUNT = (
    "(SELECT count(*) FROM knowledge_articlechunk"
    " WHERE client_id = %(client)s AND search_vector @@ {word}) AS n{i}"
)
_PG_SQL = """
    SELECT candidates.id, ({score}) AS score
    FROM (
        SELECT c.id, c.search_vector
        FROM knowledge_articlechunk c
        JOIN knowledge_article a ON a.id = c.article_id
        LEFT JOIN knowledge_knowledgesource s ON s.id = a.source_id
        WHERE c.client_id = %(client)s AND a.client_id = %(client)s
          AND c.search_vector @@ ({any_word})
          AND a.status = 'published' AND a.enabled AND (s.id IS NULL OR s.enabled)
        ORDER BY ts_rank(c.search_vector, websearch_to_tsquery(%(config)s::regconfig, %(text)s))
            DESC, c.id
        LIMIT %(candidates)s
    ) AS candidates
    ORDER BY score DESC, candidates.id
    LIMIT %(n)s
"""


def _idf(total: int, holding: int) -> float:
    return math.log(1 + (total - holding + 0.5) / (holding + 0.5)) if holding else 0.0


def _pg_ranking(client: Client, terms: list[str], language: str, n: int) -> list[tuple[int, float]]:
    params: dict[str, str | int] = {
        "config": search_config_for(language or client.language),
        "text": " or ".join(terms),
        "client": client.pk,
        "candidates": max(PG_CANDIDATES, n),
        "n": n,
    }
    params.update({f"w{i}": term for i, term in enumerate(terms)})
    words = [_PG_WORD.format(i=i) for i in range(len(terms))]
    counts = ", ".join(_PG_COUNT.format(word=word, i=i) for i, word in enumerate(words))
    sql = _PG_COUNTS.format(counts=counts)
    total, *holding = sql_rows("knowledge.pg_counts", sql, params, client_id=client.pk)[0]
    weighted = [
        (word, _idf(int(total), int(count)))
        for word, count in zip(words, holding, strict=True)
        if count
    ]
    if not weighted:
        return []
    score = " + ".join(
        f"{weight:.6f} * ts_rank(candidates.search_vector, {word}, {PG_RANK_NORMALISATION})"
        for word, weight in weighted
    )
    any_word = " || ".join(word for word, _ in weighted)
    sql = _PG_SQL.format(score=score, any_word=any_word)
    rows = sql_rows("knowledge.pg_ranking", sql, params, client_id=client.pk)
    return [(pk, float(value)) for pk, value in rows if value > 0]


def _sqlite_ranking(client: Client, terms: list[str], n: int) -> list[tuple[int, float]]:
    match = " OR ".join('"{}"'.format(t.replace('"', '""')) for t in terms)
    sql = """
        SELECT f.rowid, bm25(knowledge_chunk_fts, 2.0, 1.0) AS rank
        FROM knowledge_chunk_fts f
        JOIN knowledge_articlechunk c ON c.id = f.rowid
        JOIN knowledge_article a ON a.id = c.article_id
        LEFT JOIN knowledge_knowledgesource s ON s.id = a.source_id
        WHERE knowledge_chunk_fts MATCH %s AND c.client_id = %s AND a.client_id = %s
          AND a.status = 'published' AND a.enabled AND (s.id IS NULL OR s.enabled)
        ORDER BY rank, f.rowid
        LIMIT %s
    """
    rows = sql_rows(
        "knowledge.sqlite_ranking", sql, [match, client.pk, client.pk, n], client_id=client.pk
    )
    return [(pk, -float(rank)) for pk, rank in rows]


def _text_ranking(
    client: Client, terms: list[str], language: str, n: int
) -> list[tuple[int, float]]:
    if connection.vendor == "postgresql":
        return _pg_ranking(client, terms, language, n)
    if connection.vendor == "sqlite":
        return _sqlite_ranking(client, terms, n)
    raise NotImplementedError(f"no full-text search on {connection.vendor}")


def _cosine_ranking(client: Client, vector: list[float], n: int) -> list[tuple[int, float]]:
    rows = (
        _usable_chunks(client)
        .filter(embedding_model=embeddings.model_name(), embedding__isnull=False)
        .order_by("id")
        .values_list("id", "embedding")[:EMBEDDING_SCAN]
    )
    scored = [(pk, embeddings.cosine(vector, emb)) for pk, emb in rows if isinstance(emb, list)]
    scored.sort(key=lambda item: (-item[1], item[0]))
    return scored[:n]


def fuse(*rankings: list[tuple[int, float]], k: int = RRF_K) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: Σ 1 / (k + rank), rank counted from 1 in each ranking."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, (pk, _score) in enumerate(ranking, start=1):
            scores[pk] = scores.get(pk, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


def search(
    *,
    client: Client,
    query: str,
    language: str = "",
    limit: int = 5,
    token_budget: int | None = None,
    min_share_of_best: float = 0.0,
) -> list[Hit]:
    """The best chunks of the client's usable articles for `query`, best first. With
    `min_share_of_best` (0–1), a chunk scoring below that share of the best chunk's score is
    left out: a weak match that only fills the budget (docs/knowledge.md, "Relevance cut")."""
    terms = query_terms(query, language or client.language)
    if not terms or limit <= 0:
        return []
    candidates = max(limit * 4, 20)
    ranking = _text_ranking(client, terms, language, candidates)
    vector = embeddings.embed_query(query)
    if vector is not None:
        ranking = fuse(ranking, _cosine_ranking(client, vector, candidates))
    if not ranking:
        return []
    # The rankings only return chunks of usable articles; the rows are read client-scoped.
    rows = {
        row["id"]: row
        for row in ArticleChunk.objects.for_client(client)
        .filter(pk__in=[pk for pk, _ in ranking])
        .values(
            "id",
            "ordinal",
            "heading",
            "text",
            "tokens",
            "article_id",
            "article__public_id",
            "article__title",
            "article__kind",
            "article__source_url",
        )
    }
    hits: list[Hit] = []
    spent = 0
    best = ranking[0][1]
    floor = best * min_share_of_best if best > 0 else float("-inf")
    for pk, score in ranking:
        if score < floor:
            break  # the ranking is best first: every later chunk scores lower still
        row = rows.get(pk)
        if row is None:
            continue
        if token_budget is not None and spent + row["tokens"] > token_budget:
            continue
        spent += row["tokens"]
        hits.append(
            Hit(
                article_id=row["article_id"],
                article_public_id=str(row["article__public_id"]),
                title=row["article__title"],
                kind=row["article__kind"],
                chunk_id=pk,
                ordinal=row["ordinal"],
                heading=row["heading"],
                text=row["text"],
                tokens=row["tokens"],
                score=round(score, 6),
                source_url=row["article__source_url"],
            )
        )
        if len(hits) >= limit:
            break
    return hits


def topics(*, client: Client, language: str = "") -> list[str]:
    """What the client's usable knowledge is about, for adaptive mode's minimal context: the
    most used tags, then article titles, at most `MAX_TOPICS` and `MAX_TOPIC_TOKENS` (estimated
    at four characters a token) together. Without a language, from the cache when it is warm
    (`apps.knowledge.cache`); otherwise one query."""
    if language:
        return _topics(client, language)[0]
    return _summary(client)[0]


def has_knowledge(*, client: Client) -> bool:
    """The client has at least one usable article or FAQ (from the same cached summary as
    `topics`: no query when it is warm). A turn skips searching a client with none."""
    return _summary(client)[1]


def knowledge_summary(*, client: Client) -> tuple[list[str], bool]:
    """`topics` (without a language) and `has_knowledge` together: one cache read, for a caller
    that needs both (adaptive mode's context)."""
    return _summary(client)


def _summary(client: Client) -> tuple[list[str], bool]:
    key = knowledge_cache.topics_key(client.pk)
    cached = cache.get(key)
    if isinstance(cached, dict):
        return list(cached["topics"]), bool(cached["any"])
    found, any_usable = _topics(client, "")
    cache.set(key, {"topics": found, "any": any_usable}, knowledge_cache.TOPICS_TTL_SECONDS)
    return found, any_usable


def _topics(client: Client, language: str) -> tuple[list[str], bool]:
    articles = Article.objects.for_client(client).usable()
    if language:
        articles = articles.filter(language__in=[language, ""])
    rows = list(articles.order_by("-updated_at", "id").values_list("title", "tags", "kind")[:500])
    tags: Counter[str] = Counter()
    for _title, article_tags, _kind in rows:
        if isinstance(article_tags, list):
            tags.update({str(t).strip().lower() for t in article_tags if str(t).strip()})
    ordered = [t for t, _ in sorted(tags.items(), key=lambda item: (-item[1], item[0]))]
    ordered += [title.strip() for title, _tags, kind in rows if kind == "article"]
    chosen: list[str] = []
    chars = 0
    for topic in ordered:
        if topic in chosen or len(chosen) >= MAX_TOPICS:
            continue
        cost = len(topic) + 2
        if (chars + cost) / 4 > MAX_TOPIC_TOKENS:
            continue
        chosen.append(topic)
        chars += cost
    return chosen, bool(rows)
