"""Content negotiation for every API view. Kept in its own module: DRF imports it while
`rest_framework.views` is still loading, so it must not import views itself."""

from __future__ import annotations

from typing import Any

from rest_framework.negotiation import DefaultContentNegotiation


class LenientContentNegotiation(DefaultContentNegotiation):
    """`?format=` picks a renderer where a view offers one (the billing report's `csv`); an
    unknown value is ignored and the Accept header decides. DRF's default answers 404, which is
    not an error a caller can make sense of."""

    def filter_renderers(self, renderers: Any, format: Any) -> Any:
        matching = [renderer for renderer in renderers if renderer.format == format]
        return matching or list(renderers)
