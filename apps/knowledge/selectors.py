"""Read side of the knowledge base."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.db.models import Count, Q, QuerySet

from apps.clients.models import Client
from apps.knowledge import retrieval
from apps.knowledge.models import Article, ArticleKind, KnowledgeSource, SourceStatus


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


# The best chunks of the client's usable articles for a query: retrieval's search, offered
# here so that other apps read the knowledge base through its selectors.
search_chunks = retrieval.search


# ---------------------------------------------------------------------------------------------
# Content lists (the admin and the staff API)
# ---------------------------------------------------------------------------------------------


def articles_list(
    *,
    client: Client,
    kind: str | None = None,
    status: str | None = None,
    enabled: bool | None = None,
    language: str | None = None,
    tag: str | None = None,
    source: KnowledgeSource | None = None,
    q: str | None = None,
) -> QuerySet[Article]:
    """The client's articles (or FAQs with `kind="faq"`), filtered, by title."""
    rows = Article.objects.for_client(client).select_related("source", "approved_by")
    if kind:
        rows = rows.filter(kind=kind)
    if status:
        rows = rows.filter(status=status)
    if enabled is not None:
        rows = rows.filter(enabled=enabled)
    if language is not None:
        rows = rows.filter(language=language)
    if source is not None:
        rows = rows.filter(source=source)
    if q:
        rows = rows.filter(Q(title__icontains=q) | Q(body__icontains=q))
    if tag:
        # JSON containment is not on SQLite: the (small) id list is found in Python there.
        if connection.vendor == "postgresql":
            rows = rows.filter(tags__contains=[tag])
        else:
            wanted = tag.casefold()
            ids = [
                pk
                for pk, tags in rows.values_list("pk", "tags")
                if any(str(t).casefold() == wanted for t in tags or [])
            ]
            rows = rows.filter(pk__in=ids)
    return rows.order_by("title", "id")


def article_get(*, client: Client, public_id: Any, kind: str | None = None) -> Article | None:
    rows = Article.objects.for_client(client).select_related("source", "approved_by")
    if kind:
        rows = rows.filter(kind=kind)
    return rows.filter(public_id=public_id).first()


def sources_list(*, client: Client) -> QuerySet[KnowledgeSource]:
    return (
        KnowledgeSource.objects.for_client(client)
        .annotate(article_count=Count("articles"))
        .order_by("name", "id")
    )


def source_get(*, client: Client, public_id: Any) -> KnowledgeSource | None:
    return sources_list(client=client).filter(public_id=public_id).first()


def source_progress_json(source: KnowledgeSource) -> dict[str, Any]:
    """A source's sync as its admin page shows it (and polls it while it runs): the status in
    words, pages done of the total known so far, the sync's message and whether it is still
    running."""
    progress = source.progress or {}
    done, total = int(progress.get("done") or 0), int(progress.get("total") or 0)
    return {
        "status": source.status,
        "status_label": str(source.get_status_display()),
        "busy": source.status in (SourceStatus.QUEUED, SourceStatus.SYNCING),
        "done": done,
        "total": total,
        "percent": round(100 * done / total) if total else None,
        "message": str(progress.get("message") or ""),
        "error": source.error,
        "last_synced_at": source.last_synced_at.isoformat() if source.last_synced_at else None,
    }
