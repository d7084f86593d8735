"""The outcomes report's query and JSON shape (docs/outcomes.md, docs/api.md)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from apps.billing.serializers import UsageQuerySerializer
from apps.outcomes.selectors import GROUP_BYS, OutcomeFigures, OutcomeReport

# Rates are shares (0–1), times are seconds, money is USD with 8 places as text.
FIGURES = (
    "conversations",
    "ended",
    "resolved",
    "resolution_rate",
    "handed_off",
    "handoff_rate",
    "handoff_reasons",
    "first_response_median_seconds",
    "first_response_p90_seconds",
    "resolution_median_seconds",
    "resolution_p90_seconds",
    "ratings",
    "positive_ratings",
    "csat",
    "rating_average",
    "cost_usd",
    "billed_usd",
    "cost_per_resolved_usd",
    "billed_per_resolved_usd",
)
MONEY = frozenset({"cost_usd", "billed_usd", "cost_per_resolved_usd", "billed_per_resolved_usd"})


class OutcomeQuerySerializer(UsageQuerySerializer):
    """`start`/`end` default to the first day of the current month and today (at most 366 days,
    like the usage report)."""

    group_by = serializers.ChoiceField(choices=GROUP_BYS, default="total")


def figures_json(figures: OutcomeFigures, *, money: bool) -> dict[str, Any]:
    """The figures as JSON; without `money` (roles below admin) the cost fields are null."""
    out: dict[str, Any] = {}
    for name in FIGURES:
        value = getattr(figures, name)
        if name in MONEY:
            value = (str(value) if value is not None else None) if money else None
        out[name] = value
    return out


def report_json(report: OutcomeReport, *, money: bool) -> dict[str, Any]:
    return {
        "client": report.client.slug,
        "start": report.start.isoformat(),
        "end": report.end.isoformat(),
        "group_by": report.group_by,
        "window_hours": report.window_hours,
        "money_shown": money,
        "totals": figures_json(report.totals, money=money),
        "groups": [
            {"key": key, **figures_json(figures, money=money)} for key, figures in report.groups
        ],
    }


class OutcomeFiguresSerializer(serializers.Serializer):
    """Documentation of one set of figures (the view builds the JSON with `figures_json`)."""

    conversations = serializers.IntegerField()
    ended = serializers.IntegerField()
    resolved = serializers.IntegerField()
    resolution_rate = serializers.FloatField(allow_null=True)
    handed_off = serializers.IntegerField()
    handoff_rate = serializers.FloatField(allow_null=True)
    handoff_reasons = serializers.DictField(child=serializers.IntegerField())
    first_response_median_seconds = serializers.FloatField(allow_null=True)
    first_response_p90_seconds = serializers.FloatField(allow_null=True)
    resolution_median_seconds = serializers.FloatField(allow_null=True)
    resolution_p90_seconds = serializers.FloatField(allow_null=True)
    ratings = serializers.IntegerField()
    positive_ratings = serializers.IntegerField()
    csat = serializers.FloatField(allow_null=True)
    rating_average = serializers.FloatField(allow_null=True)
    cost_usd = serializers.CharField(allow_null=True)
    billed_usd = serializers.CharField(allow_null=True)
    cost_per_resolved_usd = serializers.CharField(allow_null=True)
    billed_per_resolved_usd = serializers.CharField(allow_null=True)


class OutcomeGroupSerializer(OutcomeFiguresSerializer):
    key = serializers.CharField()


class OutcomeReportSerializer(serializers.Serializer):
    client = serializers.CharField()
    start = serializers.DateField()
    end = serializers.DateField()
    group_by = serializers.ChoiceField(choices=GROUP_BYS)
    window_hours = serializers.IntegerField()
    money_shown = serializers.BooleanField()
    totals = OutcomeFiguresSerializer()
    groups = OutcomeGroupSerializer(many=True)
