"""Billing API input validation and output shapes. Money leaves the API as strings with fixed
decimals (8 places for usage, 2 for invoice amounts); rates as numbers."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date, timedelta
from typing import Any

from rest_framework import serializers

from apps.billing import periods
from apps.billing.selectors import GROUP_BYS, MAX_REPORT_DAYS


def _usd(places: int = 8, **kwargs: Any) -> serializers.DecimalField:
    return serializers.DecimalField(
        max_digits=24, decimal_places=places, coerce_to_string=True, read_only=True, **kwargs
    )


def _count(help_text: str | None = None) -> serializers.IntegerField:
    return serializers.IntegerField(read_only=True, help_text=help_text)


def _ratio(help_text: str) -> serializers.DecimalField:
    """A share (0–1, four places), null when there is nothing to divide by."""
    return serializers.DecimalField(
        max_digits=6,
        decimal_places=4,
        coerce_to_string=False,
        read_only=True,
        allow_null=True,
        help_text=help_text,
    )


# ---------------------------------------------------------------------------------------------
# Query parameters
# ---------------------------------------------------------------------------------------------


class UsageQuerySerializer(serializers.Serializer):
    """`start`/`end` default to the first day of the current month and today."""

    start = serializers.DateField(required=False, help_text="First day, YYYY-MM-DD (included).")
    end = serializers.DateField(required=False, help_text="Last day, YYYY-MM-DD (included).")
    group_by = serializers.ChoiceField(choices=GROUP_BYS, default="mode")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        end: date = attrs.get("end") or periods.today()
        start: date = attrs.get("start") or periods.month_start(end)
        for name, day in (("start", start), ("end", end)):
            if not EARLIEST <= day <= LATEST:
                raise serializers.ValidationError(
                    {name: [f"Must be between {EARLIEST} and {LATEST}."]}
                )
        if start > end:
            raise serializers.ValidationError({"start": [f"start ({start}) is after end ({end})."]})
        span = (end - start).days + 1
        if span > MAX_REPORT_DAYS:
            raise serializers.ValidationError(
                {"end": [f"The range may span at most {MAX_REPORT_DAYS} days; it spans {span}."]}
            )
        return {**attrs, "start": start, "end": end}


# A report page (admin usage and outcomes, console outcomes) shows this many days by default.
PAGE_DAYS = 30


def page_period(params: Mapping[str, Any]) -> tuple[date, date, dict[str, Any]]:
    """The period a report page shows: `start` and `end` from its query string; the last
    PAGE_DAYS days by default, and when they are not valid (then with the errors by field)."""
    today = periods.today()
    default_start = today - timedelta(days=PAGE_DAYS - 1)
    query = UsageQuerySerializer(
        data={"start": params.get("start") or default_start, "end": params.get("end") or today}
    )
    if query.is_valid():
        return query.validated_data["start"], query.validated_data["end"], {}
    return default_start, today, dict(query.errors)


class TurnQuerySerializer(UsageQuerySerializer):
    group_by = None  # type: ignore[assignment]
    conversation = serializers.UUIDField(
        required=False, help_text="Only the turns of this conversation (its id)."
    )


_MONTH = re.compile(r"^(\d{4})-(\d{2})$")


# Dates outside this range would overflow date arithmetic (a day after 9999-12-31) and are
# never a real billing period.
EARLIEST = date(2000, 1, 1)
LATEST = date(9998, 12, 31)


class InvoiceQuerySerializer(serializers.Serializer):
    month = serializers.CharField(
        required=False, help_text="YYYY-MM; defaults to the current month."
    )

    def validate_month(self, value: str) -> date:
        match = _MONTH.match(value.strip())
        if not match or not 1 <= int(match.group(2)) <= 12:
            raise serializers.ValidationError("Enter a month as YYYY-MM, e.g. 2026-11.")
        month = (
            date(int(match.group(1)), int(match.group(2)), 1) if match.group(1) != "0000" else None
        )
        if month is None or not EARLIEST <= month <= LATEST:
            raise serializers.ValidationError(f"Enter a month between {EARLIEST:%Y-%m} and now.")
        if month > periods.month_start(periods.today()):
            raise serializers.ValidationError(f"{value} is in the future.")
        return month

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        return {"month": attrs.get("month") or periods.month_start(periods.today())}


# ---------------------------------------------------------------------------------------------
# Reports
# ---------------------------------------------------------------------------------------------


class UsageFiguresSerializer(serializers.Serializer):
    turns = _count("Turns with at least one call.")
    llm_calls = _count()
    prompt_tokens = _count()
    completion_tokens = _count()
    cost_usd = _usd(help_text="Provider cost, USD.")
    billed_usd = _usd(help_text="Billed amount, USD (cost × the plan's mode multiplier).")
    critique_triggered = _count()
    critique_rate = _ratio(
        "critique_triggered / turns: how often critique triggers (null: no turns)."
    )
    evaluation_validated = _count("Turns whose answer the evaluation step validated.")
    evaluation_questioned = _count("Turns whose answer it questioned (confidence − 30 %).")
    evaluation_improved = _count("Turns whose answer it replaced with a better one.")
    evaluation_kept = _count("Turns where it could not decide (the answer was kept).")
    evaluation_failed = _count("Turns where the evaluation call failed (answer sent as is).")
    cached_tokens = _count("Of the prompt tokens, those the provider served from its cache.")
    cached_share = _ratio("cached_tokens / prompt_tokens (null: no prompt tokens).")
    deliberated = _count(
        '"Deliberate when needed" turns that deliberated (the sum of the four below).'
    )
    deliberated_low_confidence = _count(
        "… because adaptive's confidence was below the plan's threshold."
    )
    deliberated_complaint = _count("… because the model flagged a complaint or dispute.")
    deliberated_critique_escalate = _count("… because the critique would have handed over.")
    deliberated_evaluation_questioned = _count(
        "… because the evaluation questioned adaptive's draft."
    )


class UsageGroupSerializer(UsageFiguresSerializer):
    key = serializers.CharField(
        read_only=True,
        help_text="The mode (or `simulation` for simulations' calls), day (YYYY-MM-DD), model, "
        "step or purpose.",
    )

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        return {"key": fields.pop("key"), **fields}


class UsageReportSerializer(serializers.Serializer):
    client = serializers.CharField(source="client.slug", read_only=True)
    start = serializers.DateField(read_only=True)
    end = serializers.DateField(read_only=True)
    group_by = serializers.CharField(read_only=True)
    totals = UsageFiguresSerializer(read_only=True)
    groups = UsageGroupSerializer(many=True, read_only=True)
    simulations = UsageFiguresSerializer(
        read_only=True,
        help_text="Of the totals, what simulations used (their own line: with group_by=mode "
        "they are the `simulation` group, never in a mode's row). Simulations have their own "
        "monthly token budget and never use the live one.",
    )


class InvoiceLineSerializer(serializers.Serializer):
    description = serializers.CharField(read_only=True)
    quantity = _count()
    amount_usd = _usd(2)
    exact_usd = _usd(8, help_text="The amount before rounding to cents.")


class InvoicePlanSerializer(serializers.Serializer):
    slug = serializers.CharField(read_only=True)
    name = serializers.CharField(read_only=True)
    monthly_fee = _usd(2)
    included_turns = _count()


class InvoiceSerializer(serializers.Serializer):
    client = serializers.CharField(source="client.slug", read_only=True)
    month = serializers.SerializerMethodField()
    status = serializers.SerializerMethodField(
        help_text="open while the month is running, final once it is over."
    )
    currency = serializers.SerializerMethodField()
    plan = InvoicePlanSerializer(source="client.plan", read_only=True)
    turns = _count()
    included_turns = _count()
    turns_beyond_included = _count()
    usage_billed_usd = _usd(help_text="Billed usage of every turn, covered by the fee or not.")
    overage_usd = _usd(help_text="Billed usage of the turns beyond the included ones.")
    lines = InvoiceLineSerializer(many=True, read_only=True)
    total_usd = _usd(2, help_text="The sum of the lines (each rounded to cents).")

    def get_month(self, obj: Any) -> str:
        return f"{obj.month:%Y-%m}"

    def get_status(self, obj: Any) -> str:
        return "final" if obj.is_final else "open"

    def get_currency(self, obj: Any) -> str:
        return "USD"


class TurnUsageSerializer(serializers.Serializer):
    """One turn's summary, from its ReasoningTrace and its usage records."""

    id = _count()
    conversation = serializers.UUIDField(source="conversation.public_id", read_only=True)
    created_at = serializers.DateTimeField(read_only=True)
    mode = serializers.CharField(read_only=True)
    model = serializers.CharField(read_only=True)
    status = serializers.CharField(read_only=True)
    llm_calls = _count()
    prompt_tokens = _count()
    completion_tokens = _count()
    cost_usd = _usd(source="usage_cost_usd")
    billed_usd = _usd(source="usage_billed_usd")
    critique_triggered = serializers.BooleanField(read_only=True)
    critique_reasons = serializers.ListField(child=serializers.CharField(), read_only=True)
    context_fetched = serializers.ListField(child=serializers.CharField(), read_only=True)
    escalated = serializers.BooleanField(read_only=True)
    evaluation_outcome = serializers.CharField(
        read_only=True,
        help_text="What the evaluation step made of the answer: validated, questioned, "
        "improved, kept or failed; empty when it was not evaluated.",
    )
    deliberation_trigger = serializers.CharField(
        read_only=True,
        help_text='Why a "deliberate when needed" turn deliberated: low_confidence, complaint, '
        "critique_escalate or evaluation_questioned; empty when it did not.",
    )
    duration_ms = _count()
    llm_wait_ms = _count()


class TurnUsagePageSerializer(serializers.Serializer):
    """One page of turns (the project's pagination envelope)."""

    count = _count()
    next = serializers.URLField(read_only=True, allow_null=True)
    previous = serializers.URLField(read_only=True, allow_null=True)
    results = TurnUsageSerializer(many=True, read_only=True)
