"""CSV for the usage report (`?format=csv`). DRF reserves the `format` query parameter for
choosing a renderer, so CSV is a renderer with format `csv`, not a view option."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from typing import Any

from rest_framework.renderers import BaseRenderer

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


def _cell(value: Any) -> str:
    if value is None:
        return ""
    text = str(value)
    # A group key (a model name) must never run as a spreadsheet formula.
    return "'" + text if text.startswith(_FORMULA_START) else text


class UsageCSVRenderer(BaseRenderer):
    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        if not isinstance(data, Mapping) or "groups" not in data:
            raise TypeError("UsageCSVRenderer renders usage reports only")
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\r\n")
        writer.writerow([data["group_by"], *FIGURES])
        for group in data["groups"]:
            writer.writerow([_cell(group["key"]), *(_cell(group[name]) for name in FIGURES)])
        writer.writerow(["TOTAL", *(_cell(data["totals"][name]) for name in FIGURES)])
        response = (renderer_context or {}).get("response")
        if response is not None:
            name = f"usage-{data['client']}-{data['start']}-{data['end']}-{data['group_by']}.csv"
            response["Content-Disposition"] = f'attachment; filename="{name}"'
        return out.getvalue().encode(self.charset)
