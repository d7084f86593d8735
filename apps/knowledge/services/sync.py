"""Importing a source: fetch its page(s) or read its file, extract the text, and keep one
article per page (docs/knowledge.md, "Importing"). What is imported is the source's kind's
(`apps/knowledge/sources/`: `kind.run(sync, fetcher)`); the claim, the progress, the storing
of pages and the schedule are here, the same for every kind.

- `source_sync_start` queues a sync (status `queued`; the Celery task runs after the commit).
  A source already queued or syncing is left alone, so one source never syncs twice at once.
- `source_sync` does the work. It claims the source with a compare-and-set of its status
  (queued/new/synced/failed → syncing; a sync whose worker died is taken over once it has not
  reported for KNOWLEDGE_SYNC_SECONDS + STALE_GRACE), writes its progress to `source.progress`
  after every page, and ends `synced` (some pages may have failed: counted, and listed in
  `progress["errors"]`) or `failed` (nothing could be imported), with `last_synced_at` set.
- A page whose title and text hash the same as when it was last imported leaves its article
  alone (not saved, not indexed again, staff edits kept); a page no longer in the sitemap is
  switched off, not deleted, and switched on again when it comes back.
- `resync_due` starts the syncs of web sources whose `resync_hours` have passed (the beat)."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, F, Q
from django.utils import timezone
from django.utils.translation import gettext as _

from apps.clients.models import Client
from apps.core import deadlines
from apps.core.exceptions import ApplicationError
from apps.knowledge import sources
from apps.knowledge.extract import PAGE_TYPES, ExtractError, Page, extract
from apps.knowledge.fetch import Fetcher, FetchError, SyncBudgetExceeded
from apps.knowledge.models import (
    Article,
    ArticleKind,
    ArticleStatus,
    KnowledgeSource,
    SourceStatus,
)
from apps.knowledge.sandbox import ExtractionStopped
from apps.knowledge.services.articles import article_save

logger = logging.getLogger(__name__)

STALE_GRACE = timedelta(minutes=2)
# Page errors kept in the progress (the counts hold all of them).
MAX_ERRORS_SHOWN = 20
# URLs of pages a sync switched off, remembered so they are switched on again if they return.
MAX_SWITCHED_OFF_KEPT = 1000
BUSY = (SourceStatus.QUEUED, SourceStatus.SYNCING)


def _stale_before(now: datetime) -> datetime:
    return now - timedelta(seconds=int(settings.KNOWLEDGE_SYNC_SECONDS)) - STALE_GRACE


def empty_progress(message: str = "") -> dict[str, Any]:
    return {
        "done": 0,
        "total": 0,
        "bytes": 0,
        "created": 0,
        "updated": 0,
        "unchanged": 0,
        "failed": 0,
        "switched_off": 0,
        "message": message,
        "errors": [],
    }


def source_problem(source: KnowledgeSource) -> str:
    """Why `source` cannot be synced, or "" (its kind decides)."""
    return sources.kind_of(source.kind).sync_problem(source)


def source_sync_start(
    *, source: KnowledgeSource, user: Any = None, countdown: float = 0.0
) -> KnowledgeSource:
    """Queue a sync of `source` (the task runs once the transaction commits, `countdown`
    seconds later) and return the source as it now is. Already queued or syncing: nothing more
    is queued."""
    problem = source_problem(source)
    if problem:
        raise ApplicationError(problem)
    now = timezone.now()
    rows = KnowledgeSource.objects.for_client(source.client).filter(pk=source.pk)
    queued = rows.filter(~Q(status__in=BUSY) | Q(updated_at__lt=_stale_before(now))).update(
        status=SourceStatus.QUEUED,
        progress=empty_progress(_("Waiting to sync.")) | _kept(source),
        updated_at=now,
    )
    if queued:
        from apps.knowledge.tasks import sync_source

        source_id, client_id = source.pk, source.client_id
        transaction.on_commit(
            lambda: sync_source.apply_async(
                kwargs={"client_id": client_id, "source_id": source_id},
                countdown=countdown or None,
            )
        )
        logger.info(
            "knowledge sync queued",
            extra={"source": source_id, "user": getattr(user, "pk", None)},
        )
    source.refresh_from_db()
    return source


def _kept(source: KnowledgeSource) -> dict[str, Any]:
    """What a new sync carries over from the last one's progress."""
    urls = (source.progress or {}).get("switched_off_urls") or []
    return {"switched_off_urls": [u for u in urls if isinstance(u, str)]}


def source_sync(*, source: KnowledgeSource) -> dict[str, Any]:
    """Sync `source` now and return its final progress. When another sync holds the source,
    returns `{"skipped": True, ...}` and changes nothing. When its client already runs
    KNOWLEDGE_SYNCS_PER_CLIENT syncs, returns `{"waiting": True, ...}`: the source stays queued
    (its progress says why) and the caller tries again later."""
    now = timezone.now()
    rows = KnowledgeSource.objects.for_client(source.client).filter(pk=source.pk)
    claimable = ~Q(status=SourceStatus.SYNCING) | Q(updated_at__lt=_stale_before(now))
    with transaction.atomic():
        # one claim per client at a time, so the cap on its concurrent syncs holds
        Client.objects.select_for_update().filter(pk=source.client_id).first()
        source.refresh_from_db()
        if syncs_running(client=source.client, now=now, besides=source.pk) >= _syncs_cap():
            message = _("Waiting: this client's other syncs run first.")
            rows.exclude(status=SourceStatus.SYNCING).update(
                status=SourceStatus.QUEUED,
                progress=empty_progress(message) | _kept(source),
                updated_at=now,
            )
            return {"waiting": True, "message": message}
        progress = empty_progress(_("Starting.")) | _kept(source)
        if not rows.filter(claimable).update(
            status=SourceStatus.SYNCING, error="", progress=progress, updated_at=now
        ):
            return {"skipped": True, "message": _("Another sync of this source is running.")}
    source.refresh_from_db()
    return SourceImport(source).run()


def source_sync_wait(*, source: KnowledgeSource) -> None:
    """Keep a sync that may not run yet queued, with its progress saying so (and fresh, so the
    beat does not take it for a lost one)."""
    KnowledgeSource.objects.for_client(source.client).filter(
        pk=source.pk, status=SourceStatus.QUEUED
    ).update(
        progress=empty_progress(_("Waiting for a free worker.")) | _kept(source),
        updated_at=timezone.now(),
    )


def _syncs_cap() -> int:
    cap = int(settings.KNOWLEDGE_SYNCS_PER_CLIENT)
    return cap if cap > 0 else 1_000_000


def syncs_running(*, client: Client, now: datetime | None = None, besides: int = 0) -> int:
    """How many of `client`'s sources sync now (a sync whose worker stopped reporting for longer
    than a sync may take no longer counts)."""
    return (
        KnowledgeSource.objects.for_client(client)
        .filter(status=SourceStatus.SYNCING, updated_at__gte=_stale_before(now or timezone.now()))
        .exclude(pk=besides)
        .count()
    )


class SourceImport:
    """One sync of one source: its progress, and the storing of what its kind imports (the
    kind calls `report`, `page_failed`, `store`, `import_pages`, `switch_off_missing`)."""

    def __init__(self, source: KnowledgeSource) -> None:
        self.source = source
        self.client = source.client
        self.rows = KnowledgeSource.objects.for_client(self.client).filter(pk=source.pk)
        self.progress: dict[str, Any] = dict(source.progress)
        self.switched_off_urls: set[str] = set(self.progress.pop("switched_off_urls", []))
        self.max_pages = int(settings.KNOWLEDGE_MAX_PAGES)
        self.stopped = ""  # why the sync stopped before the end
        self.cancelled = False  # the source changed under the sync
        # What this sync imports: while a child process reads a document, the sync stops when
        # the source is deleted or these change (`still_wanted`).
        self.imports = {"kind": source.kind, "url": source.url, "file": source.file.name or ""}

    # --- bookkeeping ----------------------------------------------------------------------

    def report(self, message: str | None = None, **fields: Any) -> None:
        if message is not None:
            self.progress["message"] = message
        self.progress.update(fields)
        self.rows.update(progress=self._stored_progress(), updated_at=timezone.now())

    def _stored_progress(self) -> dict[str, Any]:
        kept = sorted(self.switched_off_urls)[:MAX_SWITCHED_OFF_KEPT]
        return self.progress | {"switched_off_urls": kept}

    def page_failed(self, name: str, reason: str) -> None:
        self.progress["failed"] += 1
        if len(self.progress["errors"]) < MAX_ERRORS_SHOWN:
            self.progress["errors"].append({"page": name, "error": reason})

    def still_wanted(self) -> bool:
        """The source is still there and still names what this sync is importing."""
        return self.rows.filter(**self.imports).exists()

    # --- the run --------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        error = ""
        try:
            seconds = float(settings.KNOWLEDGE_SYNC_SECONDS)
            with deadlines.deadline_scope(seconds), Fetcher() as fetcher:
                sources.kind_of(self.source.kind).run(self, fetcher)
                self.progress["bytes"] = max(self.progress["bytes"], fetcher.bytes_read)
        except (FetchError, ExtractError) as exc:  # the source itself (its sitemap) failed
            error = str(exc)
        except ExtractionStopped:  # deleted or changed while a document was read: stop quietly
            if not self.rows.exists():
                logger.info(
                    "knowledge sync stopped: source deleted", extra={"source": self.source.pk}
                )
                return dict(self.progress, stopped=True)
            self.cancelled = True
            self.stopped = _("the source was changed while it was being read; sync it again.")
        except Exception as exc:  # nothing lost: the source says what went wrong
            logger.exception("knowledge sync failed", extra={"source": self.source.pk})
            error = _("The sync failed unexpectedly (%(error)s).") % {
                "error": exc.__class__.__name__
            }
        return self.finish(error)

    def finish(self, error: str) -> dict[str, Any]:
        p = self.progress
        imported = p["created"] + p["updated"] + p["unchanged"]
        if not error and p["total"] and not imported and not self.cancelled:
            # One page (a file, a web page): its own reason is the source's.
            single = p["total"] == 1 and p["errors"]
            error = p["errors"][0]["error"] if single else _("No page could be imported.")
        status = SourceStatus.FAILED if error else SourceStatus.SYNCED
        summary = _(
            "%(done)s of %(total)s pages: %(created)s new, %(updated)s updated, "
            "%(unchanged)s unchanged, %(failed)s failed, %(off)s switched off."
        ) % {
            "done": p["done"],
            "total": p["total"],
            "created": p["created"],
            "updated": p["updated"],
            "unchanged": p["unchanged"],
            "failed": p["failed"],
            "off": p["switched_off"],
        }
        if error:
            summary = f"{error} {summary}"
        elif self.stopped:
            summary = _("Stopped early: %(reason)s") % {"reason": self.stopped} + " " + summary
        p["message"] = summary
        now = timezone.now()
        self.rows.update(
            status=status,
            error=error or self.stopped,
            last_synced_at=now,
            progress=self._stored_progress(),
            updated_at=now,
        )
        self.source.refresh_from_db()
        return dict(p)

    def import_pages(self, fetcher: Fetcher, listed: list[str]) -> None:
        """Fetch the pages at `listed` (at most KNOWLEDGE_MAX_PAGES of them, within the sync's
        time) and store each as one article."""
        pages = listed[: self.max_pages]
        if len(listed) > len(pages):
            self.stopped = _(
                "the sitemap lists %(listed)s pages; at most %(max)s are imported."
            ) % {
                "listed": len(listed),
                "max": self.max_pages,
            }
        self.report(_("Fetching %(total)s pages.") % {"total": len(pages)}, total=len(pages))
        for url in pages:
            if deadlines.remaining() == 0:
                self.stopped = _("the sync's time limit was reached.")
                break
            try:
                fetched = fetcher.get(url, accept=PAGE_TYPES)
                page = extract(
                    body=fetched.body,
                    content_type=fetched.content_type,
                    name=url,
                    charset=fetched.charset,
                    still_wanted=self.still_wanted,
                )
            except SyncBudgetExceeded as exc:
                self.stopped = str(exc)
                self.page_failed(url, str(exc))
                break
            except (FetchError, ExtractError) as exc:
                self.page_failed(url, str(exc))
            else:
                self.store(url, page)
            self.report(
                _("Fetched %(done)s of %(total)s pages.")
                % {"done": self.progress["done"] + 1, "total": len(pages)},
                done=self.progress["done"] + 1,
                bytes=fetcher.bytes_read,
            )

    # --- articles -------------------------------------------------------------------------

    def _articles(self) -> Any:
        return Article.objects.for_client(self.client).filter(source=self.source)

    def store(self, url: str, page: Page) -> None:
        """Create or update the article of `url`. The page is compared with what was imported
        last (`imported_hash`), so a page that did not change leaves the article alone — and
        with it any edit staff made; a page that changed replaces the article's text."""
        article = self._articles().filter(source_url=url).order_by("pk").first()
        probe = Article(title=page.title, body=page.body)
        new_hash = probe.refresh_hash()
        if article is None:
            article = Article(
                client=self.client,
                source=self.source,
                source_url=url,
                kind=ArticleKind.ARTICLE,
                status=ArticleStatus.PUBLISHED,
            )
            counter, same_page = "created", False
        else:
            counter = "updated"
            same_page = new_hash in (article.imported_hash, article.content_hash)
        came_back = url in self.switched_off_urls and not article.enabled
        if same_page and not came_back:
            self.progress["unchanged"] += 1
            if article.imported_hash != new_hash:  # imported before the hash was kept
                self._articles().filter(pk=article.pk).update(imported_hash=new_hash)
            return
        if came_back:
            article.enabled = True
        if not same_page:
            article.title, article.body = probe.title, probe.body
            if self.source.language:
                article.language = self.source.language
        article.imported_hash = new_hash
        try:
            article_save(article=article)
        except ValidationError as exc:
            self.page_failed(url or self.source.file.name or "", "; ".join(exc.messages))
            return
        self.switched_off_urls.discard(url)
        self.progress[counter] += 1

    def switch_off_missing(self, listed: set[str]) -> None:
        """Switch off this source's articles whose page the sitemap no longer lists."""
        gone = [
            (pk, url)
            for pk, url in self._articles()
            .filter(enabled=True)
            .exclude(source_url="")
            .values_list("pk", "source_url")
            if url not in listed
        ]
        if gone:
            self._articles().filter(pk__in=[pk for pk, _url in gone]).update(enabled=False)
            self.switched_off_urls.update(url for _pk, url in gone)
        self.progress["switched_off"] = len(gone)


# --- the schedule ---------------------------------------------------------------------------


# A source is due a little before its `resync_hours` have passed: up to this share of the
# period earlier, by its id, so sources synced together (a sitemap import of many sources) drift
# apart instead of falling due in the same beat run forever.
RESYNC_JITTER = 0.25


def _jitter(source_id: int) -> float:
    """A fraction in [0, RESYNC_JITTER), the same for a source on every run."""
    return ((source_id * 0.6180339887498949) % 1.0) * RESYNC_JITTER


def resync_at(source: KnowledgeSource) -> datetime | None:
    """When `source` is next due for a re-sync (None: never by the schedule)."""
    if source.resync_hours <= 0 or source.last_synced_at is None:
        return None
    period = timedelta(hours=source.resync_hours)
    return source.last_synced_at + period * (1.0 - _jitter(source.pk))


def sources_due(*, now: datetime | None = None, limit: int) -> list[KnowledgeSource]:
    """Web sources (any client) whose `resync_hours` have passed since their last sync (less
    the source's jitter; or that never synced), oldest first, and queued or syncing ones whose
    worker has not reported for longer than a sync may take (a lost task message, a killed
    worker) — at most `limit`, and per client no more than KNOWLEDGE_SYNCS_PER_CLIENT less the
    syncs it has queued or running already."""
    now = now or timezone.now()
    soonest = timedelta(hours=1) * (1.0 - RESYNC_JITTER)
    idle_and_old = Q(
        status__in=(SourceStatus.NEW, SourceStatus.SYNCED, SourceStatus.FAILED),
        resync_hours__gt=0,
    ) & (Q(last_synced_at__isnull=True) | Q(last_synced_at__lte=now - soonest))
    stuck = Q(status__in=BUSY, updated_at__lt=_stale_before(now))
    web = (
        KnowledgeSource.objects.unscoped("beat: the re-syncs due across clients")
        .select_related("client")
        .filter(
            client__is_active=True,
            enabled=True,
            kind__in=sources.names(resyncs=True),
        )
    )
    candidates = web.filter(idle_and_old | stuck).order_by(
        F("last_synced_at").asc(nulls_first=True), "pk"
    )
    busy: dict[int, int] = dict(
        KnowledgeSource.objects.unscoped("beat: each client's syncs in flight")
        .filter(status__in=BUSY, updated_at__gte=_stale_before(now))
        .values("client_id")
        .annotate(n=Count("pk"))
        .values_list("client_id", "n")
    )
    cap = _syncs_cap()
    due: list[KnowledgeSource] = []
    for source in candidates[: limit * 20]:
        if busy.get(source.client_id, 0) >= cap:
            continue
        at = resync_at(source)
        if source.status in BUSY or at is None or at <= now:
            due.append(source)
            busy[source.client_id] = busy.get(source.client_id, 0) + 1
            if len(due) >= limit:
                break
    return due


def resync_due(*, limit: int | None = None) -> int:
    """Queue the syncs that are due (at most KNOWLEDGE_RESYNC_BATCH, and a client's share,
    `sources_due`), spaced KNOWLEDGE_RESYNC_SPACING_SECONDS apart rather than all at once;
    returns how many."""
    started = 0
    spacing = float(settings.KNOWLEDGE_RESYNC_SPACING_SECONDS)
    for source in sources_due(limit=limit or int(settings.KNOWLEDGE_RESYNC_BATCH)):
        try:
            with transaction.atomic():
                source_sync_start(source=source, countdown=started * spacing)
        except ApplicationError as exc:
            KnowledgeSource.objects.for_client(source.client).filter(pk=source.pk).update(
                status=SourceStatus.FAILED, error=str(exc), last_synced_at=timezone.now()
            )
        else:
            started += 1
    return started
