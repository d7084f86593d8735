"""CSV for the outcomes report (`?format=csv`): a header row, one row per group, a TOTAL row."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from typing import Any

from rest_framework.renderers import BaseRenderer

from apps.outcomes.serializers import FIGURES

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, Mapping):  # hand-off reasons: "reason:count;…"
        return ";".join(f"{key}:{count}" for key, count in value.items())
    text = str(value)
    return "'" + text if text.startswith(_FORMULA_START) else text


class OutcomesCSVRenderer(BaseRenderer):
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
            raise TypeError("OutcomesCSVRenderer renders outcome reports only")
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\r\n")
        writer.writerow([data["group_by"], *FIGURES])
        for group in data["groups"]:
            writer.writerow([_cell(group["key"]), *(_cell(group[name]) for name in FIGURES)])
        writer.writerow(["TOTAL", *(_cell(data["totals"][name]) for name in FIGURES)])
        response = (renderer_context or {}).get("response")
        if response is not None:
            name = f"outcomes-{data['client']}-{data['start']}-{data['end']}-{data['group_by']}.csv"
            response["Content-Disposition"] = f'attachment; filename="{name}"'
        return out.getvalue().encode(self.charset)
