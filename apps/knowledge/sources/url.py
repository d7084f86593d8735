"""A web page: its one address is fetched and kept as one article, again every
`resync_hours`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.utils.translation import gettext_noop

from apps.knowledge.sources._base import WebSourceKind

if TYPE_CHECKING:
    from apps.knowledge.fetch import Fetcher
    from apps.knowledge.services.sync import SourceImport


class Url(WebSourceKind):
    name = "url"
    label = gettext_noop("A web page")
    rank = 20

    def run(self, sync: SourceImport, fetcher: Fetcher) -> None:
        sync.import_pages(fetcher, [sync.source.url])


KIND = Url()
