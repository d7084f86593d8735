"""Staff / back-office escalation API: the queue and handing a conversation back to the AI."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.permissions import READ, SUPPORT, StaffAPIView, acting_user
from apps.core.schema import (
    AUTH_ERRORS,
    CLIENT_PARAMETER,
    NamedChoiceField,
    enum_values,
    error_responses,
    invalid_example,
    public_id_path_parameter,
)
from apps.escalations.models import EscalationReason, EscalationStatus
from apps.escalations.selectors import escalation_get, escalation_list
from apps.reasoning.handback import escalation_hand_back

TAG = "escalations"


class EscalationFilterSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=EscalationStatus.choices, required=False)


class EscalationSerializer(serializers.Serializer):
    id = serializers.UUIDField(
        source="public_id", help_text="The escalation's public id (opaque, not a counter)."
    )
    conversation = serializers.UUIDField(
        source="conversation.public_id", help_text="The conversation's public id."
    )
    reason = NamedChoiceField(choices=EscalationReason, enum_name="EscalationReason")
    status = NamedChoiceField(choices=EscalationStatus, enum_name="EscalationStatus")
    detail = serializers.CharField()
    created_at = serializers.DateTimeField()
    resolved_at = serializers.DateTimeField(allow_null=True)
    assigned_to = serializers.EmailField(
        source="assigned_to.email",
        allow_null=True,
        help_text="E-mail of the staff member who owns it (the first to reply); null if nobody.",
    )


ESCALATION_EXAMPLE: dict[str, Any] = {
    "id": "0b6f3c2e-8d4a-4c1f-9e7b-5a2d1c3b4e6f",
    "conversation": "7d0b1c8e-2f0a-4b8e-9a51-3c4f2b9e6d10",
    "reason": "customer_request",
    "status": "open",
    "detail": "Customer asked for a human.",
    "created_at": "2026-03-02T09:16:40.004000Z",
    "resolved_at": None,
    "assigned_to": "sam@shop.example",
}

ESCALATION_ID_PARAMETER = public_id_path_parameter("escalation_id", "The escalation's public id.")


class EscalationListApi(StaffAPIView):
    required_roles = {"GET": READ}

    @extend_schema(
        operation_id="escalations_list",
        tags=[TAG],
        summary="List escalations",
        description="The client's escalations, newest first, one page at a time. An open "
        "escalation means a person owns the conversation and the AI stays silent. Needs the "
        "viewer role.",
        parameters=[
            OpenApiParameter(
                "status",
                OpenApiTypes.STR,
                enum=enum_values(EscalationStatus),
                description="Only escalations in this status.",
            ),
            CLIENT_PARAMETER,
        ],
        responses={
            200: EscalationSerializer(many=True),
            **error_responses(
                400,
                *AUTH_ERRORS,
                404,
                invalid=invalid_example("status", '"pending" is not a valid choice.'),
            ),
        },
        examples=[OpenApiExample("A page", value=ESCALATION_EXAMPLE, response_only=True)],
    )
    def get(self, request: Request) -> Response:
        filters = self.validated_query(EscalationFilterSerializer)
        queryset = escalation_list(client=self.client, status=filters.get("status"))
        return self.paginated_response(queryset, EscalationSerializer)


class EscalationResolveApi(StaffAPIView):
    required_roles = {"POST": SUPPORT}

    @extend_schema(
        operation_id="escalations_resolve",
        tags=[TAG],
        summary="Resolve an escalation (hand back to the AI)",
        description="Marks the escalation resolved, reopens the conversation for the assistant "
        "and tells the customer. Resolving an already resolved escalation changes nothing and "
        "answers 200 with it as it is. No request body. Needs the agent role.",
        parameters=[ESCALATION_ID_PARAMETER, CLIENT_PARAMETER],
        request=None,
        responses={200: EscalationSerializer, **error_responses(*AUTH_ERRORS, 404)},
        examples=[
            OpenApiExample(
                "Resolved",
                value={
                    **ESCALATION_EXAMPLE,
                    "status": "resolved",
                    "resolved_at": "2026-03-02T09:30:00.000000Z",
                },
                response_only=True,
            )
        ],
    )
    def post(self, request: Request, escalation_id: str) -> Response:
        escalation = escalation_get(client=self.client, escalation_id=escalation_id)
        if escalation is None:
            raise exceptions.NotFound()
        escalation_hand_back(client=self.client, escalation=escalation, actor=acting_user(request))
        resolved = escalation_get(client=self.client, escalation_id=escalation.pk)
        return Response(EscalationSerializer(resolved).data)
