"""Read side of the knowledge base."""

from __future__ import annotations

from typing import Any

from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db import connection

from apps.clients.models import Client
from apps.knowledge.models import Article, ArticleChunk, ArticleKind


def faqs_for(*, client: Client) -> list[dict[str, str]]:
    """The client's usable FAQs as `{"question", "answer"}`, in title order."""
    rows = (
        Article.objects.for_client(client)
        .usable()
        .filter(kind=ArticleKind.FAQ)
        .values_list("title", "body")
    )
    return [{"question": q, "answer": a} for q, a in rows]


def business_info_for(client: Client) -> dict[str, Any]:
    """The business info document in its documented shape (docs/business-info.md): the basics
    stored on the client plus the FAQs, which live as articles of kind FAQ.

    A document that carries its own `faqs` (one a simulation supplies, or one not yet migrated)
    is returned as it is."""
    info = dict(client.business_info) if isinstance(client.business_info, dict) else {}
    if "faqs" not in info:
        info["faqs"] = faqs_for(client=client)
    return info


def search_chunks(*, client: Client, query: str, language: str = "", limit: int = 5) -> list[Any]:
    """A first cut of retrieval (PostgreSQL full-text rank; elsewhere word overlap) that the
    retrieval work replaces with `apps.knowledge.retrieval.search`: usable articles' chunks,
    best first, each with `.score`."""
    from apps.notes.textsearch import search_config_for

    chunks = ArticleChunk.objects.for_client(client).filter(
        article__in=Article.objects.for_client(client).usable()
    )
    if connection.vendor == "postgresql":
        config = search_config_for(language or client.language)
        q = SearchQuery(query, config=config, search_type="websearch")
        q = q | SearchQuery(" or ".join(query.split()), config=config, search_type="websearch")
        ranked = chunks.annotate(score=SearchRank("search_vector", q)).filter(score__gt=0)
        return list(ranked.order_by("-score", "id")[:limit])
    words = {w for w in query.lower().split() if len(w) > 2}
    scored = []
    for chunk in chunks.select_related("article"):
        text = f"{chunk.heading} {chunk.text}".lower()
        score = sum(1 for w in words if w in text)
        if score:
            chunk.score = score  # type: ignore[attr-defined]
            scored.append(chunk)
    return sorted(scored, key=lambda c: (-c.score, c.pk))[:limit]  # type: ignore[attr-defined]
