"""Billing reports for a client's back-office (`Authorization: Api-Key …`) and for staff
sessions; platform superusers pick a client with `?client=<slug>`. Thin: validate the query,
call a selector, serialize."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from apps.accounts.authentication import ApiKeyPrincipal
from apps.api.permissions import MANAGE, StaffAPIView
from apps.api.schema import ErrorSerializer, error_responses
from apps.billing import selectors
from apps.billing.renderers import CSVReportView, UsageCSVRenderer
from apps.billing.serializers import (
    InvoiceQuerySerializer,
    InvoiceSerializer,
    TurnQuerySerializer,
    TurnUsagePageSerializer,
    TurnUsageSerializer,
    UsageQuerySerializer,
    UsageReportSerializer,
)
from apps.reasoning.selectors import turn_usage_list

CLIENT_PARAM = OpenApiParameter(
    "client",
    OpenApiTypes.STR,
    description="Platform superusers (staff session) only: the client's slug. API keys always "
    "report on their own client; naming another client is refused (403).",
)
START_PARAM = OpenApiParameter(
    "start", OpenApiTypes.DATE, description="First day (YYYY-MM-DD); default: 1st of the month."
)
END_PARAM = OpenApiParameter(
    "end", OpenApiTypes.DATE, description="Last day (YYYY-MM-DD), included; default: today."
)
ERRORS = {
    **error_responses(400, 401, 403),
    404: OpenApiResponse(
        ErrorSerializer,
        description="Page out of range.",
    ),
}


class BillingAPIView(StaffAPIView):
    """Billing is for a client's admins and owners (API keys default to the admin role); the
    role is enforced like every staff endpoint's (apps/api/permissions.py)."""

    required_roles = {"GET": MANAGE}

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        wanted = request.query_params.get("client")
        if isinstance(request.user, ApiKeyPrincipal) and wanted and wanted != self.client.slug:
            raise exceptions.PermissionDenied(
                "An API key reports on its own client only; `client` is for platform operators."
            )


class UsageReportApi(CSVReportView, BillingAPIView):
    renderer_classes = [JSONRenderer, BrowsableAPIRenderer, UsageCSVRenderer]

    @extend_schema(
        summary="Usage report",
        description=(
            "Turns, LLM calls, tokens, provider cost, billed amount and critique rate for the "
            "days `start` … `end` (at most 366, in the server's time zone), grouped by `mode`, "
            "`day`, `model`, `step` or `purpose` (customer turns apart from playground runs, "
            "simulations and batch jobs). A turn and its calls count on the day it started. "
            "`totals` count each turn once; with `group_by=model|step` a group's `turns` are the "
            "distinct turns with a call in it. `?format=csv` returns the same figures as CSV "
            "(header row, one row per group, a TOTAL row)."
        ),
        parameters=[
            START_PARAM,
            END_PARAM,
            OpenApiParameter("group_by", OpenApiTypes.STR, enum=selectors.GROUP_BYS),
            OpenApiParameter("format", OpenApiTypes.STR, enum=["json", "csv"]),
            CLIENT_PARAM,
        ],
        responses={
            (200, "application/json"): UsageReportSerializer,
            (200, "text/csv"): OpenApiTypes.STR,
            **ERRORS,
        },
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        params = self.validated_query(UsageQuerySerializer)
        report = selectors.usage_report(client=self.client, **params)
        return Response(UsageReportSerializer(report).data)


class InvoiceApi(BillingAPIView):
    @extend_schema(
        summary="Invoice for a month",
        description=(
            "The plan's monthly fee covers the month's first `included_turns` turns (in the "
            "order they started); every later turn is billed at its billed usage, one line per "
            "mode. `status` is `open` while the month is running. Line amounts are rounded to "
            "cents (half up); `exact_usd` keeps 8 places."
        ),
        parameters=[
            OpenApiParameter("month", OpenApiTypes.STR, description="YYYY-MM; default: now."),
            CLIENT_PARAM,
        ],
        responses={200: InvoiceSerializer, **ERRORS},
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        params = self.validated_query(InvoiceQuerySerializer)
        invoice = selectors.invoice_for_month(client=self.client, month=params["month"])
        return Response(InvoiceSerializer(invoice).data)


class TurnUsageListApi(BillingAPIView):
    @extend_schema(
        summary="Per-turn usage",
        description=(
            "The client's turns from `start` to `end`, newest first: mode, LLM calls, tokens, "
            "cost, billed amount, whether critique triggered (and why), context fetched, "
            "escalated, and timings."
        ),
        parameters=[
            START_PARAM,
            END_PARAM,
            OpenApiParameter("conversation", OpenApiTypes.UUID),
            OpenApiParameter("page", OpenApiTypes.INT),
            OpenApiParameter("page_size", OpenApiTypes.INT, description="At most 200."),
            CLIENT_PARAM,
        ],
        responses={200: TurnUsagePageSerializer, **ERRORS},
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        params = self.validated_query(TurnQuerySerializer)
        turns = turn_usage_list(
            client=self.client,
            start=params["start"],
            end=params["end"],
            conversation=str(params["conversation"]) if params.get("conversation") else None,
        )
        return self.paginated_response(turns, TurnUsageSerializer)
