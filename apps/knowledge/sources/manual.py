"""A source typed in by staff: its articles are written by hand, nothing is imported."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.utils.translation import gettext_noop

from apps.knowledge.sources._base import SourceKind

if TYPE_CHECKING:
    from apps.knowledge.models import KnowledgeSource


class Manual(SourceKind):
    name = "manual"
    label = gettext_noop("Typed in by staff")
    rank = 10

    def prepare(self, source: KnowledgeSource) -> None:
        source.url = ""  # an address would never be fetched


KIND = Manual()
