"""Admin → Outcomes by client: each client the user may see, linking to its outcomes page
(the same figures as the console page and GET /api/v1/outcomes/; docs/outcomes.md)."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from apps.api.admin import ClientReportAdmin
from apps.api.permissions import MANAGE, READ
from apps.billing.serializers import page_period
from apps.clients.models import Client
from apps.outcomes.models import ClientOutcomes
from apps.outcomes.selectors import handoff_reason_rows, outcome_report
from apps.outcomes.serializers import figures_json


def client_outcomes_url(client_id: int) -> str:
    return reverse("admin:outcomes_client_outcomes", args=[client_id])


@admin.register(ClientOutcomes)
class ClientOutcomesAdmin(ClientReportAdmin):
    """Every member reads outcomes; the money figures are for admins and owners (as in the
    billing reports)."""

    view_need = READ
    report_perms = ("outcomes.view_clientoutcomes",)
    report_url_name = "outcomes_client_outcomes"

    list_display = ["name", "plan", "outcomes_page"]

    @admin.display(description=_("Outcomes"))
    def outcomes_page(self, obj: Client) -> SafeString:
        return format_html(
            '<a href="{}">{}</a>',
            client_outcomes_url(obj.pk),
            _("Resolution rate, hand-offs and CSAT"),
        )

    def report_view(self, request: HttpRequest, client_id: int) -> HttpResponse:
        client = self.report_client(request, client_id)
        start, end, errors = page_period(request.GET)
        report = outcome_report(client=client, start=start, end=end, group_by="day")
        money = self.role_permits_on(request, client, MANAGE)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": _("Outcomes — %(client)s") % {"client": client.name},
            "client": client,
            "start": start,
            "end": end,
            "errors": errors,
            "money": money,
            "report": report,
            "totals": figures_json(report.totals, money=money),
            "reasons": handoff_reason_rows(report.totals),
            "days": [
                {"key": key, **figures_json(figures, money=money)} for key, figures in report.groups
            ],
            "console_url": reverse("console-outcomes") + f"?client={client.slug}",
            "csv_url": reverse("api-outcomes")
            + f"?client={client.slug}&start={start}&end={end}&group_by=day&format=csv",
        }
        return TemplateResponse(request, "admin/outcomes/outcomes.html", context)
