"""Fetching a knowledge source's pages: bounded, and only where the webhooks may go.

- Only http(s). Every address a host resolves to must be public unless
  KNOWLEDGE_FETCH_ALLOW_PRIVATE_NETWORKS is on (development, tests) — the webhooks' SSRF rule
  (`apps.platform.netguard`); the connection is pinned to the checked address, and every redirect
  is checked again before it is followed (at most MAX_REDIRECTS).
- Every request ends within KNOWLEDGE_FETCH_TIMEOUT seconds, wall clock (`apps.platform.http`), and
  within the sync's own deadline (`apps.core.deadlines`).
- A page is at most KNOWLEDGE_MAX_PAGE_BYTES (that page fails), a sync reads at most
  KNOWLEDGE_MAX_SYNC_BYTES in all (the sync stops there).
- Only the content types the extraction understands are read."""

from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType
from typing import Self
from urllib.parse import urljoin

import httpx2
from django.conf import settings
from django.utils.translation import gettext as _

from apps.core import deadlines
from apps.platform.db import release_connection
from apps.platform.http import CONNECT_TO, wall_clock_client
from apps.platform.netguard import checked_addresses

USER_AGENT = "GuideDesk-KnowledgeImport/1"
MAX_REDIRECTS = 5


class FetchError(Exception):
    """This page could not be fetched (the sync goes on with the next one)."""


class SyncBudgetExceeded(FetchError):
    """The sync as a whole has used up its bytes or its time: it stops here."""


@dataclass(frozen=True)
class Limits:
    max_page_bytes: int
    max_sync_bytes: int
    timeout: float
    allow_private: bool

    @classmethod
    def from_settings(cls) -> Limits:
        return cls(
            max_page_bytes=int(settings.KNOWLEDGE_MAX_PAGE_BYTES),
            max_sync_bytes=int(settings.KNOWLEDGE_MAX_SYNC_BYTES),
            timeout=float(settings.KNOWLEDGE_FETCH_TIMEOUT),
            allow_private=bool(settings.KNOWLEDGE_FETCH_ALLOW_PRIVATE_NETWORKS),
        )


@dataclass(frozen=True)
class Fetched:
    url: str  # after redirects
    content_type: str  # lower-case, without parameters
    charset: str
    body: bytes


def url_refusal(url: str, *, allow_private: bool | None = None) -> str:
    """Why a source may not fetch `url`, or "" (used to validate a source's address too)."""
    if allow_private is None:
        allow_private = bool(settings.KNOWLEDGE_FETCH_ALLOW_PRIVATE_NETWORKS)
    return checked_addresses(url, allow_private=allow_private, allow_http=True, http_refusal="")[1]


class Fetcher:
    """One sync's HTTP client: counts the bytes it read against the sync's limit."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits.from_settings()
        self.bytes_read = 0
        self._http = wall_clock_client(
            limit=self.limits.timeout,
            follow_redirects=False,
            headers={"User-Agent": USER_AGENT},
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._http.close()

    def get(self, url: str, *, accept: frozenset[str]) -> Fetched:
        """GET `url` (following checked redirects); the body if its type is in `accept`.
        Raises FetchError for this page, SyncBudgetExceeded when the sync must stop."""
        release_connection()  # no database connection is held while a site answers
        for _hop in range(MAX_REDIRECTS + 1):
            pinned, refusal = checked_addresses(
                url, allow_private=self.limits.allow_private, allow_http=True, http_refusal=""
            )
            if refusal:
                raise FetchError(_("Refused: %(reason)s") % {"reason": refusal})
            extensions = {CONNECT_TO: pinned[0]} if pinned else {}
            try:
                with self._http.stream("GET", url, extensions=extensions) as response:
                    if response.is_redirect:
                        location = response.headers.get("location", "")
                        if not location:
                            raise FetchError(_("A redirect without a destination."))
                        url = urljoin(url, location)
                        continue
                    return self._read(url, response, accept)
            except deadlines.DeadlineExceeded as exc:
                raise SyncBudgetExceeded(_("The sync's time limit was reached.")) from exc
            except httpx2.TimeoutException as exc:
                if deadlines.remaining() == 0:
                    raise SyncBudgetExceeded(_("The sync's time limit was reached.")) from exc
                raise FetchError(_("The page did not answer in time.")) from exc
            except httpx2.HTTPError as exc:
                message = _("The page could not be fetched (%(error)s).") % {"error": exc}
                raise FetchError(message) from exc
        raise FetchError(_("Too many redirects."))

    def _read(self, url: str, response: httpx2.Response, accept: frozenset[str]) -> Fetched:
        if response.status_code != 200:
            raise FetchError(
                _("The page answered HTTP %(status)s.") % {"status": response.status_code}
            )
        raw_type = response.headers.get("content-type", "")
        content_type = raw_type.split(";")[0].strip().lower()
        if content_type not in accept:
            raise FetchError(
                _("Content type %(type)s is not imported.") % {"type": content_type or "?"}
            )
        limit = self.limits.max_page_bytes
        too_big = FetchError(_("The page is larger than %(limit)s bytes.") % {"limit": limit})
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise too_big
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            self.bytes_read += len(chunk)
            if size > limit:
                raise too_big
            if self.bytes_read > self.limits.max_sync_bytes:
                raise SyncBudgetExceeded(
                    _("The sync read more than %(limit)s bytes.")
                    % {"limit": self.limits.max_sync_bytes}
                )
            chunks.append(chunk)
        charset = response.charset_encoding or ""
        return Fetched(url=url, content_type=content_type, charset=charset, body=b"".join(chunks))
