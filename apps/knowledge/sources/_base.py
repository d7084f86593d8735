"""What a knowledge source kind is (`SourceKind`) and the checks its modules share."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit

from django.utils.translation import gettext as _

from apps.knowledge.fetch import url_refusal

if TYPE_CHECKING:
    from apps.knowledge.fetch import Fetcher
    from apps.knowledge.models import KnowledgeSource
    from apps.knowledge.services.sync import SourceImport

# A kind's name is stored in `KnowledgeSource.kind`.
MAX_NAME_CHARS = 10
MAX_URL_CHARS = 2000


class SourceKindError(ValueError):
    """A kind module is incomplete, or two kinds share a name."""


class SourceKind:
    """One kind of knowledge source: what it stores, how it is checked and how it is imported.

    A kind module declares `KIND = <Subclass>()`; the registry (`apps.knowledge.sources`)
    discovers it. Everything that used to branch on the kind — validation, the sync, the
    re-sync schedule, the admin, the API, the tenant file and its export — asks the kind."""

    name: ClassVar[str]  # the value of KnowledgeSource.kind (≤ 10 characters)
    label: ClassVar[str]  # the choice's label (marked with gettext_noop; shown translated)
    rank: ClassVar[int] = 100  # where the admin and the API list it (lowest first)
    # The KnowledgeSource columns this kind reads (`url`, `file`): a change to one starts a
    # new sync in the admin, and the tenant file carries them.
    fields: ClassVar[tuple[str, ...]] = ()
    # Whether the sync imports anything (`run`), and whether the beat syncs it again every
    # `resync_hours`.
    syncs: ClassVar[bool] = False
    resyncs: ClassVar[bool] = False
    # Whether a tenant file may declare such a source (an uploaded file cannot be).
    in_tenant_file: ClassVar[bool] = True

    def reads(self, column: str) -> bool:
        """Whether this kind reads the KnowledgeSource column `column` (`url`, `file`)."""
        return column in self.fields

    def prepare(self, source: KnowledgeSource) -> None:
        """Normalise the source before it is validated and saved (nothing by default)."""

    def errors(self, source: KnowledgeSource) -> dict[str, str]:
        """Field → message for each kind-specific problem (none by default)."""
        return {}

    def sync_problem(self, source: KnowledgeSource) -> str:
        """Why `source` cannot be synced now, or ""."""
        return "" if self.syncs else _("A source typed in by staff has nothing to import.")

    def run(self, sync: SourceImport, fetcher: Fetcher) -> None:
        """Import the source's pages through `sync` (store, report, page_failed)."""
        raise NotImplementedError(f"a {self.name} source has nothing to import")

    def tenant_file_entry(self, source: KnowledgeSource) -> dict[str, Any]:
        """The kind-specific keys of the source's tenant file entry (its set columns)."""
        return {name: getattr(source, name) for name in self.fields if getattr(source, name)}

    def check(self) -> None:
        """Raise SourceKindError unless the declaration is complete."""
        name = getattr(self, "name", "")
        if not isinstance(name, str) or not name or len(name) > MAX_NAME_CHARS:
            raise SourceKindError(
                f"{type(self).__name__}: name must be 1 to {MAX_NAME_CHARS} characters"
            )
        if not getattr(self, "label", ""):
            raise SourceKindError(f"source kind {name!r} does not set label")
        if self.resyncs and not self.syncs:
            raise SourceKindError(f"source kind {name!r} re-syncs but does not sync")
        if self.syncs and type(self).run is SourceKind.run:
            raise SourceKindError(f"source kind {name!r} syncs but defines no run()")


def is_http_url(value: str) -> bool:
    parts = urlsplit(value or "")
    return parts.scheme in {"http", "https"} and bool(parts.hostname)


class WebSourceKind(SourceKind):
    """A kind whose source is one address on the web (a page, a sitemap)."""

    fields = ("url",)
    syncs = True
    resyncs = True

    def errors(self, source: KnowledgeSource) -> dict[str, str]:
        if not source.url:
            return {"url": _("A web address is required for this kind of source.")}
        if not is_http_url(source.url):
            return {"url": _("An http:// or https:// address.")}
        if len(source.url) > MAX_URL_CHARS:
            return {"url": _("At most %(n)d characters.") % {"n": MAX_URL_CHARS}}
        return {}

    def sync_problem(self, source: KnowledgeSource) -> str:
        if not source.url:
            return _("The source has no address.")
        refusal = url_refusal(source.url)
        return _("The address is refused: %(reason)s") % {"reason": refusal} if refusal else ""
