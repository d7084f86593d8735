"""A sitemap: every page it lists on its own host is fetched and kept as one article (a page
it no longer lists is switched off), again every `resync_hours`."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from django.conf import settings
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from apps.knowledge.extract import (
    SITEMAP_TYPES,
    TEXT_TYPES,
    ExtractError,
    sitemap_entries,
    text_sitemap_entries,
)
from apps.knowledge.fetch import FetchError
from apps.knowledge.sources._base import MAX_URL_CHARS, WebSourceKind

if TYPE_CHECKING:
    from apps.knowledge.fetch import Fetcher
    from apps.knowledge.services.sync import SourceImport

# Sitemap entries read in all (the sitemaps protocol allows 50,000 per file).
MAX_SITEMAP_ENTRIES = 50_000


class Sitemap(WebSourceKind):
    name = "sitemap"
    label = gettext_noop("A sitemap (every page it lists)")
    rank = 30

    def run(self, sync: SourceImport, fetcher: Fetcher) -> None:
        sync.report(_("Reading the sitemap."))
        listed = sitemap_pages(sync, fetcher)
        sync.import_pages(fetcher, listed)
        sync.switch_off_missing(set(listed))


def sitemap_pages(sync: SourceImport, fetcher: Fetcher) -> list[str]:
    """The page URLs the source's sitemap lists (following a sitemap index, bounded), on the
    sitemap's own host only. Raises FetchError / ExtractError when the first sitemap cannot be
    read; a nested one that fails is skipped (and counted)."""
    first = sync.source.url
    host = (urlsplit(first).hostname or "").lower()
    todo, seen, pages = [first], set[str](), list[str]()
    max_sitemaps = int(settings.KNOWLEDGE_MAX_SITEMAPS)
    while todo and len(seen) < max_sitemaps and len(pages) < MAX_SITEMAP_ENTRIES:
        sitemap = todo.pop(0)
        seen.add(sitemap)
        try:
            is_index, urls = _entries(fetcher, sitemap)
        except (FetchError, ExtractError) as exc:
            if sitemap == first:
                raise
            sync.page_failed(sitemap, str(exc))
            continue
        same_host = [u for u in urls if _on_host(u, host)]
        if is_index:
            todo.extend(u for u in same_host if u not in seen and u not in todo)
        else:
            pages.extend(same_host)
    pages = list(dict.fromkeys(pages))[:MAX_SITEMAP_ENTRIES]
    if not pages:
        raise ExtractError(_("The sitemap lists no pages on its own host."))
    return pages


def _entries(fetcher: Fetcher, sitemap: str) -> tuple[bool, list[str]]:
    """(whether it is a sitemap index, the URLs it lists)."""
    fetched = fetcher.get(sitemap, accept=SITEMAP_TYPES | TEXT_TYPES)
    if fetched.content_type in TEXT_TYPES:
        text = fetched.body.decode(fetched.charset or "utf-8", errors="replace")
        return False, text_sitemap_entries(text)
    root, urls = sitemap_entries(fetched.body)
    return root == "sitemapindex", urls


def _on_host(url: str, host: str) -> bool:
    parts = urlsplit(url)
    return (
        (parts.hostname or "").lower() == host
        and parts.scheme in {"http", "https"}
        and len(url) <= MAX_URL_CHARS
    )


KIND = Sitemap()
