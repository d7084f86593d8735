"""/console/outcomes/ — how the assistant is doing for this client: resolution by the
assistant, hand-offs and their reasons, response and resolution times, CSAT and cost per
resolved conversation, for a period (docs/outcomes.md). Read-only: every role sees it; the money
figures are for admins and owners, like the billing reports."""

from __future__ import annotations

from decimal import Decimal
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.formats import number_format
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET

from apps.api.permissions import MANAGE, READ, role_permits
from apps.billing.serializers import page_period
from apps.console.access import ConsoleAccess, console_view
from apps.outcomes.selectors import OutcomeFigures, handoff_reason_rows, outcome_report


def _percent(share: float | None) -> str:
    return "—" if share is None else f"{number_format(round(share * 100, 1))} %"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 90:
        return _("%(n)s s") % {"n": number_format(round(seconds))}
    if seconds < 90 * 60:
        return _("%(n)s min") % {"n": number_format(round(seconds / 60, 1))}
    return _("%(n)s h") % {"n": number_format(round(seconds / 3600, 1))}


def _money(amount: Decimal | None) -> str:
    return "—" if amount is None else f"${number_format(amount.quantize(Decimal('0.0001')))}"


def _cards(figures: OutcomeFigures, *, money: bool) -> list[dict[str, str]]:
    cards = [
        {
            "name": "resolution_rate",
            "label": _("Resolved by the assistant"),
            "value": _percent(figures.resolution_rate),
            "detail": _("%(resolved)s of %(ended)s ended conversations")
            % {"resolved": figures.resolved, "ended": figures.ended},
        },
        {
            "name": "handoff_rate",
            "label": _("Handed off to a person"),
            "value": _percent(figures.handoff_rate),
            "detail": _("%(n)s of %(total)s conversations")
            % {"n": figures.handed_off, "total": figures.conversations},
        },
        {
            "name": "csat",
            "label": _("CSAT (rated 4 or 5)"),
            "value": _percent(figures.csat),
            "detail": _("%(n)s ratings, average %(avg)s")
            % {
                "n": figures.ratings,
                "avg": "—" if figures.rating_average is None else figures.rating_average,
            },
        },
        {
            "name": "first_response",
            "label": _("First response (median / p90)"),
            "value": _duration(figures.first_response_median_seconds),
            "detail": _duration(figures.first_response_p90_seconds),
        },
        {
            "name": "resolution_time",
            "label": _("Resolution time (median / p90)"),
            "value": _duration(figures.resolution_median_seconds),
            "detail": _duration(figures.resolution_p90_seconds),
        },
    ]
    if money:
        cards.append(
            {
                "name": "cost_per_resolved",
                "label": _("Cost per resolved conversation"),
                "value": _money(figures.cost_per_resolved_usd),
                "detail": _("billed %(billed)s; provider cost %(cost)s in total")
                % {
                    "billed": _money(figures.billed_per_resolved_usd),
                    "cost": _money(figures.cost_usd),
                },
            }
        )
    return cards


@require_GET
@console_view(READ)
def outcomes_page(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    start, end, field_errors = page_period(request.GET)
    errors = {name: " ".join(str(e) for e in errs) for name, errs in field_errors.items()}
    report = outcome_report(client=access.client, start=start, end=end, group_by="day")
    money = role_permits(access.role, MANAGE)
    csv_query = urlencode(
        {
            "client": access.client.slug,
            "start": start.isoformat(),
            "end": end.isoformat(),
            "group_by": "day",
            "format": "csv",
        }
    )
    return render(
        request,
        "console/outcomes.html",
        {
            "access": access,
            "report": report,
            "start": start,
            "end": end,
            "errors": errors,
            "money": money,
            "cards": _cards(report.totals, money=money),
            "reasons": handoff_reason_rows(report.totals),
            "days": [
                {
                    "day": key,
                    "conversations": figures.conversations,
                    "resolved": figures.resolved,
                    "resolution_rate": _percent(figures.resolution_rate),
                    "handoff_rate": _percent(figures.handoff_rate),
                    "csat": _percent(figures.csat),
                    "ratings": figures.ratings,
                }
                for key, figures in report.groups
            ],
            "csv_url": reverse("api-outcomes") + "?" + csv_query,
        },
    )
