"""An uploaded file (Markdown, HTML, PDF, text): read once, kept as one article. A tenant file
cannot carry one (it is uploaded in the admin or the API)."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from apps.knowledge.extract import ExtractError, content_type_for_name, extract
from apps.knowledge.sources._base import SourceKind

if TYPE_CHECKING:
    from apps.knowledge.fetch import Fetcher
    from apps.knowledge.models import KnowledgeSource
    from apps.knowledge.services.sync import SourceImport

# What a file source may be (the sync extracts each of these) and how large.
ALLOWED_FILE_SUFFIXES = (".md", ".markdown", ".html", ".htm", ".pdf", ".txt")
MAX_SOURCE_FILE_BYTES = 20 * 1024 * 1024


class File(SourceKind):
    name = "file"
    label = gettext_noop("An uploaded file (Markdown, HTML, PDF, text)")
    rank = 40
    fields = ("file",)
    syncs = True
    in_tenant_file = False

    def errors(self, source: KnowledgeSource) -> dict[str, str]:
        if not source.file:
            return {"file": _("A file is required for this kind of source.")}
        suffix = PurePosixPath(source.file.name or "").suffix.lower()
        if suffix not in ALLOWED_FILE_SUFFIXES:
            return {
                "file": _("The file must be one of: %(types)s.")
                % {"types": ", ".join(ALLOWED_FILE_SUFFIXES)}
            }
        size = _file_size(source.file)
        if size is not None and size > MAX_SOURCE_FILE_BYTES:
            return {
                "file": _("The file is larger than %(mb)d MB.")
                % {"mb": MAX_SOURCE_FILE_BYTES // (1024 * 1024)}
            }
        return {}

    def sync_problem(self, source: KnowledgeSource) -> str:
        return "" if source.file else _("The source has no file.")

    def run(self, sync: SourceImport, fetcher: Fetcher) -> None:
        source = sync.source
        name = source.file.name or ""
        limit = int(settings.KNOWLEDGE_MAX_PAGE_BYTES)
        sync.report(_("Reading the file."), total=1)
        with source.file.open("rb") as handle:
            data = handle.read(limit + 1)
        sync.progress["bytes"] = len(data)
        if len(data) > limit:
            sync.page_failed(name, _("The file is larger than %(limit)s bytes.") % {"limit": limit})
        else:
            try:
                page = extract(
                    body=data,
                    content_type=content_type_for_name(name),
                    name=name,
                    still_wanted=sync.still_wanted,
                )
            except ExtractError as exc:
                sync.page_failed(name, str(exc))
            else:
                sync.store("", page)
        sync.report(done=1)


def _file_size(file: Any) -> int | None:
    try:
        return int(file.size)
    except (OSError, ValueError, TypeError, AttributeError):
        return None


KIND = File()
