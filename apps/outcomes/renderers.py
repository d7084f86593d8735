"""CSV for the outcomes report (`?format=csv`): the usage report's CSV layout (a header row,
one row per group, a TOTAL row) with the outcome figures."""

from __future__ import annotations

from apps.billing.renderers import ReportCSVRenderer
from apps.outcomes.serializers import FIGURES


class OutcomesCSVRenderer(ReportCSVRenderer):
    name = "outcomes"
    figures = FIGURES
