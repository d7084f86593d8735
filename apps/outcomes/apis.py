"""GET /api/v1/outcomes/ — the client's outcome figures for a period (docs/outcomes.md).
Thin: validate the query, call the selector, shape the JSON (or CSV)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from apps.accounts.authentication import ApiKeyPrincipal
from apps.api.permissions import MANAGE, READ, StaffAPIView, role_permits
from apps.api.schema import error_responses
from apps.billing.renderers import CSVReportView
from apps.outcomes.renderers import OutcomesCSVRenderer
from apps.outcomes.selectors import GROUP_BYS, outcome_report
from apps.outcomes.serializers import (
    OutcomeQuerySerializer,
    OutcomeReportSerializer,
    report_json,
)


class OutcomesApi(CSVReportView, StaffAPIView):
    """Every role reads outcomes; the money figures (cost and billed amount) are for admins and
    owners only, like the billing reports — for other roles they are null."""

    required_roles = {"GET": READ}
    renderer_classes = [JSONRenderer, BrowsableAPIRenderer, OutcomesCSVRenderer]

    @extend_schema(
        summary="Outcomes report",
        description=(
            "Resolution by the assistant, hand-offs and their reasons, first-response and "
            "resolution times (median, p90), CSAT and cost per resolved conversation of the "
            "conversations started on the days `start` … `end` (server time zone; at most 366 "
            "days), in total and with `group_by=day` per day. Each metric's formula: "
            "docs/outcomes.md. Cost fields are null below the admin role. `?format=csv` returns "
            "the same figures as CSV (header row, one row per group, a TOTAL row)."
        ),
        parameters=[
            OpenApiParameter("start", OpenApiTypes.DATE, description="First day, YYYY-MM-DD."),
            OpenApiParameter("end", OpenApiTypes.DATE, description="Last day (included)."),
            OpenApiParameter("group_by", OpenApiTypes.STR, enum=list(GROUP_BYS)),
            OpenApiParameter("format", OpenApiTypes.STR, enum=["json", "csv"]),
        ],
        responses={
            (200, "application/json"): OutcomeReportSerializer,
            (200, "text/csv"): OpenApiTypes.STR,
            **error_responses(400, 401, 403),
        },
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        wanted = request.query_params.get("client")
        if isinstance(request.user, ApiKeyPrincipal) and wanted and wanted != self.client.slug:
            raise exceptions.PermissionDenied(
                "An API key reports on its own client only; `client` is for platform operators."
            )
        params = self.validated_query(OutcomeQuerySerializer)
        report = outcome_report(client=self.client, **params)
        return Response(report_json(report, money=role_permits(self.role, MANAGE)))
