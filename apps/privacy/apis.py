"""Data-subject requests over the REST API (docs/api.md "Privacy", docs/privacy.md): export
or erase what the client holds about one customer, and read the record of past requests.
Client-scoped like every staff endpoint, and for admins only."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.permissions import MANAGE, StaffAPIView, acting_user
from apps.api.schema import AUTH_ERRORS, ResourceSchema, error_responses, found_or_404
from apps.api.serializers import validated_body
from apps.privacy.downloads import export_download
from apps.privacy.models import RequestChannel, RequestKind
from apps.privacy.selectors import SubjectMatch, privacy_request_get, privacy_requests
from apps.privacy.serializers import (
    PrivacyDryRunSerializer,
    PrivacyErasedSerializer,
    PrivacyRequestCreateSerializer,
    PrivacyRequestSerializer,
    UnconfirmedOnlySerializer,
)
from apps.privacy.services import (
    UnconfirmedOnly,
    subject_erase,
    subject_export,
)

TAG = "privacy"


def _requester(request: Request) -> tuple[Any, str]:
    user = acting_user(request)
    if user is not None:
        return user, ""
    key = request.auth
    name = getattr(key, "name", "") or "API key"
    prefix = getattr(key, "prefix", "")
    return None, f"API key {name} ({prefix})" if prefix else f"API key {name}"


REQUEST_ID_PARAMETER = OpenApiParameter(
    "request_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The record's id."
)


REQUESTS = ResourceSchema(
    "privacy_requests", TAG, REQUEST_ID_PARAMETER, serializer=PrivacyRequestSerializer
)


class PrivacyRequestListCreateApi(StaffAPIView):
    required_roles = {"GET": MANAGE, "POST": MANAGE}

    @REQUESTS.operation(
        "list",
        "The record of exports and erasures",
        "Every export, erasure and retention run of the client, newest first: who "
        "asked, when, how the customer was found (a keyed digest, never the address), and how "
        "many rows of each kind went. Kept PRIVACY_RECORD_KEEP_DAYS. Needs the admin role.",
        member=False,
        # 404: a page past the last one.
        responses={
            200: PrivacyRequestSerializer(many=True),
            **error_responses(*AUTH_ERRORS, 404),
        },
    )
    def get(self, request: Request) -> Response:
        return self.list_response(privacy_requests, PrivacyRequestSerializer)

    @REQUESTS.operation(
        "create",
        "Export or erase a customer's data",
        "Find the customer by exactly one of `email` (the address they left in "
        "the chat), `conversation` (a conversation id), `visitor` (the visitor id your site "
        "gave the widget) or `customer` (a verified customer id: conversations whose customer "
        "your site signed), in this client's conversations only.\n\n"
        "By e-mail, only conversations whose address is the customer's own match: confirmed "
        "with the e-mailed link, or the verified customer's e-mail. The others (anyone can type "
        "an address) are listed apart in `unconfirmed` (ids and times, no content) and left "
        "alone unless you include them by id in `include_unconfirmed`; when only such "
        "conversations match, the answer is 409 `unconfirmed_only` with the list.\n\n"
        "`kind: export` answers with everything held about them as one JSON file "
        "(`format: html`: the same as a readable page); `kind: erase` erases it "
        "(docs/privacy.md says what goes and what stays) and answers 201 with the record. "
        "`dry_run: true` changes and records nothing and answers with the counts that would "
        "go. No matching conversation: 404. Needs the admin role.",
        member=False,
        request=PrivacyRequestCreateSerializer,
        responses={
            200: OpenApiResponse(
                OpenApiTypes.OBJECT, description="The export (or a dry run's counts)."
            ),
            201: PrivacyErasedSerializer,
            409: OpenApiResponse(
                UnconfirmedOnlySerializer,
                description="By e-mail, only conversations whose address was never confirmed "
                "match: check them (`unconfirmed`) and include the customer's own by id.",
            ),
            **error_responses(400, *AUTH_ERRORS, 404),
        },
        examples=[
            OpenApiExample(
                "Erase by e-mail",
                value={"kind": "erase", "email": "ana@example.com"},
                request_only=True,
            ),
            OpenApiExample(
                "What an export would hold",
                value={"kind": "export", "conversation": "3f0c…", "dry_run": True},
                request_only=True,
            ),
        ],
    )
    def post(self, request: Request) -> Response | HttpResponse:
        data = validated_body(PrivacyRequestCreateSerializer, request)
        match = SubjectMatch(data["match_kind"], data["match_value"])
        user, label = _requester(request)
        common: dict[str, Any] = {
            "client": self.client,
            "match": match,
            "channel": RequestChannel.API,
            "requested_by": user,
            "requested_by_label": label,
            "dry_run": data["dry_run"],
            "include_unconfirmed": [str(i) for i in data["include_unconfirmed"]],
        }
        try:
            if data["kind"] == RequestKind.ERASE:
                erased = subject_erase(**common, identifiers=data["identifiers"])
            else:
                exported = subject_export(**common)
        except UnconfirmedOnly as exc:
            return Response(
                UnconfirmedOnlySerializer(
                    {
                        "error": {"code": exc.code, "message": exc.message},
                        "unconfirmed": exc.unconfirmed,
                    }
                ).data,
                status=exc.status,
            )
        if data["kind"] == RequestKind.ERASE:
            if erased.request is None:
                return Response(
                    PrivacyDryRunSerializer(
                        {
                            "dry_run": True,
                            "kind": RequestKind.ERASE,
                            "conversations": erased.conversations,
                            "counts": erased.counts,
                            "unconfirmed": erased.unconfirmed,
                            "not_erased": erased.not_erased,
                        }
                    ).data
                )
            return Response(
                PrivacyErasedSerializer(
                    erased.request, context={"unconfirmed": erased.unconfirmed}
                ).data,
                status=status.HTTP_201_CREATED,
            )
        if exported.request is None:
            return Response(
                PrivacyDryRunSerializer(
                    {
                        "dry_run": True,
                        "kind": RequestKind.EXPORT,
                        "conversations": exported.counts["conversations"],
                        "counts": exported.counts,
                        "unconfirmed": exported.unconfirmed,
                    }
                ).data
            )
        return export_download(client=self.client, result=exported, fmt=data["format"])


class PrivacyRequestDetailApi(StaffAPIView):
    required_roles = {"GET": MANAGE}

    @REQUESTS.retrieve("One record of an export or erasure", "Needs the admin role.")
    def get(self, request: Request, request_id: str) -> Response:
        record = found_or_404(privacy_request_get(client=self.client, public_id=request_id))
        return Response(PrivacyRequestSerializer(record).data)
