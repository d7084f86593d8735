"""CSV for the usage report (`?format=csv`). DRF reserves the `format` query parameter for
choosing a renderer, so CSV is a renderer with format `csv`, not a view option."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from typing import Any

from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

FIGURES = (
    "turns",
    "llm_calls",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "billed_usd",
    "critique_triggered",
    "critique_rate",
    "evaluation_validated",
    "evaluation_questioned",
    "evaluation_improved",
    "evaluation_kept",
    "evaluation_failed",
    "cached_tokens",
    "cached_share",
    "deliberated",
    "deliberated_low_confidence",
    "deliberated_complaint",
    "deliberated_critique_escalate",
    "deliberated_evaluation_questioned",
)
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> str:
    """One CSV cell: empty for None, `key:count;…` for a mapping (e.g. hand-off reasons), and
    a text that a spreadsheet would run as a formula quoted with a leading apostrophe."""
    if value is None:
        return ""
    if isinstance(value, Mapping):
        return ";".join(f"{key}:{count}" for key, count in value.items())
    text = str(value)
    return "'" + text if text.startswith(_FORMULA_START) else text


class ReportCSVRenderer(BaseRenderer):
    """A report (`{"client", "start", "end", "group_by", "groups": […], "totals": {…}}`) as
    CSV: a header row, one row per group, a TOTAL row (and, when simulations made calls, a
    SIMULATIONS row: their share of the total), downloaded as
    `<name>-<client>-<start>-<end>-<group_by>.csv`. Subclasses name the report and its figures."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"
    name = "usage"
    figures: tuple[str, ...] = FIGURES

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        if not isinstance(data, Mapping) or "groups" not in data:
            raise TypeError(f"{type(self).__name__} renders {self.name} reports only")
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\r\n")
        writer.writerow([data["group_by"], *self.figures])
        for group in data["groups"]:
            writer.writerow([csv_cell(group["key"]), *(csv_cell(group[f]) for f in self.figures)])
        writer.writerow(["TOTAL", *(csv_cell(data["totals"][f]) for f in self.figures)])
        simulations = data.get("simulations")
        if isinstance(simulations, Mapping) and simulations.get("llm_calls"):
            # Of the total, simulations' calls (their own budget; never a mode's row).
            writer.writerow(["SIMULATIONS", *(csv_cell(simulations[f]) for f in self.figures)])
        response = (renderer_context or {}).get("response")
        if response is not None:
            name = f"{self.name}-{data['client']}-{data['start']}-{data['end']}-{data['group_by']}"
            response["Content-Disposition"] = f'attachment; filename="{name}.csv"'
        return out.getvalue().encode(self.charset)


class UsageCSVRenderer(ReportCSVRenderer):
    """The usage report (`/api/v1/billing/usage/?format=csv`)."""


class CSVReportView(APIView):
    """A report endpoint with a CSV form (a `ReportCSVRenderer` among its renderers): only the
    report itself is written as CSV; errors (and OPTIONS metadata) stay JSON even when CSV was
    asked for."""

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        is_report = isinstance(response.data, dict) and "groups" in response.data
        if not is_report and isinstance(
            getattr(request, "accepted_renderer", None), ReportCSVRenderer
        ):
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)
