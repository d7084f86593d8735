from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from apps.api.admin import ClientReportAdmin, PlatformOnlyAdmin, ReadOnlyAuditAdmin
from apps.api.permissions import MANAGE
from apps.billing.charts import mode_colors, stacked_cost_chart, stacked_token_chart
from apps.billing.models import (
    ClientUsage,
    DailyUsage,
    ModelPrice,
    UsageAlert,
    UsageCounter,
    UsageRecord,
    VisitorUsage,
)
from apps.billing.selectors import (
    DELIBERATION_FIELDS,
    EVALUATION_FIELDS,
    UsageFigures,
    UsageOverview,
    usage_overview,
)
from apps.billing.serializers import page_period
from apps.clients import modes
from apps.clients.models import Client
from apps.reasoning.rendering import DELIBERATIVE_CAP_REASONS
from apps.reasoning.selectors import deliberative_downgrades


def client_usage_url(client_id: int) -> str:
    return reverse("admin:billing_client_usage", args=[client_id])


class ReadOnlyAdmin(ReadOnlyAuditAdmin):
    """Usage and billing rows: read-only, for a client's admins and owners (like the billing
    API)."""

    view_need = MANAGE


@admin.register(ModelPrice)
class ModelPriceAdmin(PlatformOnlyAdmin):
    list_display = [
        "model",
        "input_per_million",
        "cached_input_per_million",
        "output_per_million",
        "context_tokens",
        "updated_at",
    ]
    search_fields = ["model"]


@admin.register(UsageRecord)
class UsageRecordAdmin(ReadOnlyAdmin):
    list_display = [
        "created_at",
        "client_usage",
        "purpose",
        "mode",
        "step",
        "model",
        "prompt_tokens",
        "cached_tokens",
        "completion_tokens",
        "cost_usd",
        "multiplier",
        "billed_usd",
        "tokens_estimated",
    ]
    list_filter = [
        ("client", admin.RelatedOnlyFieldListFilter),
        "purpose",
        "mode",
        "step",
        "model",
    ]
    list_select_related = ["client"]
    date_hierarchy = "created_at"
    readonly_fields = [f.name for f in UsageRecord._meta.fields]

    @admin.display(description=_("Client (usage page)"), ordering="client__name")
    def client_usage(self, obj: UsageRecord) -> SafeString:
        return format_html('<a href="{}">{}</a>', client_usage_url(obj.client_id), obj.client)


@admin.register(DailyUsage)
class DailyUsageAdmin(ReadOnlyAdmin):
    list_display = [
        "day",
        "client",
        "grain",
        "mode",
        "model",
        "step",
        "turns",
        "llm_calls",
        "prompt_tokens",
        "completion_tokens",
        "cost_usd",
        "billed_usd",
        "critique_triggered",
    ]
    list_filter = ["grain", "mode", ("client", admin.RelatedOnlyFieldListFilter)]
    list_select_related = ["client"]
    date_hierarchy = "day"


@admin.register(UsageAlert)
class UsageAlertAdmin(ReadOnlyAdmin):
    list_display = ["month", "client", "threshold", "metric", "used", "budget", "emailed_at"]
    list_filter = ["threshold", "metric", ("client", admin.RelatedOnlyFieldListFilter)]
    list_select_related = ["client"]


@admin.register(UsageCounter)
class UsageCounterAdmin(ReadOnlyAdmin):
    list_display = [
        "month",
        "client",
        "tokens_used",
        "tokens_reserved",
        "turns_used",
        "turns_reserved",
        "updated_at",
    ]
    list_select_related = ["client"]


@admin.register(VisitorUsage)
class VisitorUsageAdmin(ReadOnlyAdmin):
    """What each visitor (a keyed hash of their network address, never the address) used per
    day against the plan's daily visitor budget (docs/billing.md)."""

    list_display = ["day", "client", "visitor", "tokens_used", "tokens_reserved", "turns"]
    list_filter = ["day"]
    list_select_related = ["client"]


@admin.register(ClientUsage)
class ClientUsageAdmin(ClientReportAdmin):
    """Billing → usage by client: the clients this user may see, each linking to its usage
    page (daily cost by mode, critique rate, this month's budget). Staff see only the clients
    where they are admins or owners (like the billing API); platform superusers see all."""

    view_need = MANAGE
    report_perms = ("billing.view_clientusage", "billing.view_usagerecord")
    report_url_name = "billing_client_usage"

    list_display = ["name", "plan", "mode", "usage_page"]

    @admin.display(description=_("AI mode"))
    def mode(self, obj: Client) -> str:
        return obj.plan.get_ai_mode_display().split(" —")[0]

    @admin.display(description=_("Usage"))
    def usage_page(self, obj: Client) -> SafeString:
        return format_html(
            '<a href="{}">{}</a>', client_usage_url(obj.pk), _("Daily cost and critique rate")
        )

    def report_view(self, request: HttpRequest, client_id: int) -> HttpResponse:
        client = self.report_client(request, client_id)
        start, end, errors = page_period(request.GET)
        overview = usage_overview(client=client, start=start, end=end)
        chart, chart_tokens = _usage_chart(client, overview)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": _("Usage — %(client)s") % {"client": client.name},
            "client": client,
            "start": start,
            "end": end,
            "errors": errors,
            "chart": chart,
            "chart_tokens": chart_tokens,
            **_usage_figures(client, overview, start=start, end=end),
        }
        return TemplateResponse(request, "admin/billing/usage.html", context)


def _usage_chart(client: Client, overview: UsageOverview) -> tuple[SafeString, bool]:
    """The daily chart by mode, and whether it charts tokens instead of cost: a period whose
    calls cost nothing (the offline demo model, a model without a price) would draw an empty
    cost chart, so it charts its tokens instead, and the page says so."""
    days = list(overview.daily)
    totals = overview.report.totals
    chart_tokens = not totals.billed_usd and bool(totals.prompt_tokens + totals.completion_tokens)
    if chart_tokens:
        chart = stacked_token_chart(
            days=days,
            tokens_by_day_mode={
                day: {
                    mode: figures.prompt_tokens + figures.completion_tokens
                    for mode, figures in row.items()
                }
                for day, row in overview.daily.items()
            },
            title=_("Tokens per day by mode — %(client)s") % {"client": client.name},
        )
    else:
        chart = stacked_cost_chart(
            days=days,
            cost_by_day_mode={
                day: {mode: figures.billed_usd for mode, figures in row.items()}
                for day, row in overview.daily.items()
            },
            title=_("Billed cost per day by mode — %(client)s") % {"client": client.name},
        )
    return chart, chart_tokens


def _usage_figures(
    client: Client, overview: UsageOverview, *, start: date, end: date
) -> dict[str, Any]:
    """The usage page's report, budgets, alerts, evaluations, deliberations and downgrades."""
    plan = client.plan
    counter = overview.counter
    evaluation_days = [
        (day, _day_total(row)) for day, row in overview.daily.items() if _day_total(row).evaluations
    ]
    return {
        "plan": plan,
        "report": overview.report,
        "mode_colors": mode_colors(),
        "counter": counter,
        "token_percent": _percent(counter.tokens_used if counter else 0, plan.monthly_token_budget),
        "turn_percent": _percent(counter.turns_used if counter else 0, plan.monthly_turn_budget),
        "alerts": overview.alerts,
        "simulation_budget": overview.simulation_budget,
        "evaluation_days": evaluation_days,
        # Modes with turns that deliberated, or a mode that deliberates only when needed (the
        # "deliberate when needed" mode): why they deliberated.
        "deliberation": [
            (group, [getattr(group, name) for name in DELIBERATION_FIELDS])
            for group in overview.report.groups
            if group.deliberated or _deliberates_when_needed(group.key)
        ],
        "deliberation_labels": DELIBERATION_LABELS,
        "evaluation_enabled": plan.evaluation_enabled,
        "records_url": reverse("admin:billing_usagerecord_changelist")
        + f"?client__id__exact={client.pk}",
        # Turns a per-conversation or per-visitor limit ran adaptive instead of
        # deliberative, by reason: never a silent downgrade.
        "downgrades": [
            (count, DELIBERATIVE_CAP_REASONS.get(reason, reason))
            for reason, count in deliberative_downgrades(
                client=client, first=start, last=end
            ).items()
        ],
    }


def _deliberates_when_needed(mode: str) -> bool:
    declared = modes.find(mode)
    return declared is not None and declared.deliberates is modes.Deliberation.WHEN_NEEDED


# The usage page's column heads for `DELIBERATION_FIELDS`, in that order.
DELIBERATION_LABELS = (
    _("Low confidence"),
    _("Complaint or dispute"),
    _("Critique would hand over"),
    _("Evaluation questioned"),
)


def _day_total(row: dict[str, UsageFigures]) -> UsageFigures:
    total = UsageFigures()
    for figures in row.values():
        total.turns += figures.turns
        for name in EVALUATION_FIELDS:
            setattr(total, name, getattr(total, name) + getattr(figures, name))
    return total


def _percent(used: int, budget: int) -> Decimal | None:
    if not budget:
        return None
    return (Decimal(used) * 100 / Decimal(budget)).quantize(Decimal("0.1"))
