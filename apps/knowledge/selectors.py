"""Read side of the knowledge base."""

from __future__ import annotations

from typing import Any

from apps.clients.models import Client
from apps.knowledge import retrieval
from apps.knowledge.models import Article, ArticleKind


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


def search_chunks(
    *, client: Client, query: str, language: str = "", limit: int = 5
) -> list[retrieval.Hit]:
    """The best chunks of the client's usable articles for `query` (`retrieval.search`)."""
    return retrieval.search(client=client, query=query, language=language, limit=limit)
