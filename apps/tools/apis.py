"""Staff / back-office tool API: the audit trail of tool runs, and switching tools on and off."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.permissions import MANAGE, READ, StaffAPIView
from apps.api.schema import (
    AUTH_ERRORS,
    CLIENT_PARAMETER,
    NamedChoiceField,
    enum_values,
    error_responses,
    invalid_example,
)
from apps.tools.executors import executor_choices
from apps.tools.models import ExecutionStatus, FailureKind, ToolKind
from apps.tools.selectors import tool_execution_audit_list, tool_get_for_path, tool_list
from apps.tools.services import tool_update

EXECUTIONS_TAG = "tool executions"
TOOLS_TAG = "tools"
MAX_DESCRIPTION_CHARS = 2000  # as in the tenant importer: the description goes into prompts

# ---------------------------------------------------------------------------------------------
# Writes
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# Serializers
# ---------------------------------------------------------------------------------------------


class ToolExecutionFilterSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=ExecutionStatus.choices, required=False)
    tool = serializers.CharField(required=False, max_length=64)


class ToolExecutionSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    tool = serializers.CharField(source="tool.name", help_text="The tool's name.")
    kind = NamedChoiceField(choices=ToolKind, enum_name="ToolKind", source="tool.kind")
    params = serializers.JSONField(help_text="The parameters the tool was called with.")
    status = NamedChoiceField(choices=ExecutionStatus, enum_name="ToolExecutionStatus")
    failure_kind = NamedChoiceField(
        choices=[("", "None — the run did not fail"), *FailureKind.choices[1:]],
        enum_name="ToolFailureKind",
        help_text="Empty unless the run failed.",
    )
    error = serializers.CharField()
    attempts = serializers.IntegerField(help_text="Calls made, retries included.")
    latency_ms = serializers.IntegerField()
    idempotency_key = serializers.CharField(
        help_text="Sent as `Idempotency-Key`; one run per key, however often a turn is retried."
    )
    conversation = serializers.UUIDField(
        source="conversation.public_id",
        allow_null=True,
        help_text="The conversation's public id; null when it has been deleted.",
    )
    created_at = serializers.DateTimeField()


class ToolSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField()
    kind = NamedChoiceField(choices=ToolKind, enum_name="ToolKind")
    enabled = serializers.BooleanField()
    executor_type = NamedChoiceField(choices=executor_choices(), enum_name="ToolExecutorType")
    configured = serializers.BooleanField(
        source="is_configured",
        help_text="Whether it can run (webhook URL and secret, or a known built-in). An enabled "
        "tool that is not configured is refused by the guards.",
    )
    parameters = serializers.JSONField(help_text="JSON Schema of the tool's parameters.")


class ToolUpdateSerializer(serializers.Serializer):
    """Only `enabled` and `description` may change; any other key is refused by name."""

    enabled = serializers.BooleanField(required=False)
    description = serializers.CharField(required=False, max_length=MAX_DESCRIPTION_CHARS)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        initial = self.initial_data if isinstance(self.initial_data, dict) else {}
        unknown = sorted(set(initial) - set(self.fields))
        if unknown:
            raise serializers.ValidationError(
                {name: ["This field cannot be changed through the API."] for name in unknown}
            )
        return attrs


# ---------------------------------------------------------------------------------------------
# Views
# ---------------------------------------------------------------------------------------------

EXECUTION_EXAMPLE: dict[str, Any] = {
    "id": 907,
    "tool": "cancel_order",
    "kind": "destructive",
    "params": {"order_id": "TH-12345"},
    "status": "failed",
    "failure_kind": "refused",
    "error": "Order TH-12345 has already shipped.",
    "attempts": 1,
    "latency_ms": 212,
    "idempotency_key": "pa-5f1c2b7e",
    "conversation": "7d0b1c8e-2f0a-4b8e-9a51-3c4f2b9e6d10",
    "created_at": "2026-03-02T09:15:30.000000Z",
}
TOOL_EXAMPLE: dict[str, Any] = {
    "name": "cancel_order",
    "description": "Cancel an order that has not shipped.",
    "kind": "destructive",
    "enabled": True,
    "executor_type": "webhook",
    "configured": True,
    "parameters": {
        "type": "object",
        "properties": {"order_id": {"type": "string", "pattern": "^TH-\\d{5}$"}},
        "required": ["order_id"],
    },
}
TOOL_NAME_PARAMETER = OpenApiParameter(
    "name", OpenApiTypes.STR, OpenApiParameter.PATH, description="The tool's name."
)


class ToolExecutionListApi(StaffAPIView):
    required_roles = {"GET": READ}

    @extend_schema(
        operation_id="tool_executions_list",
        tags=[EXECUTIONS_TAG],
        summary="List tool executions (audit)",
        description="Every tool run, newest first: what was called with which parameters, how "
        "it ended and after how many attempts. Needs the viewer role.",
        parameters=[
            OpenApiParameter(
                "status",
                OpenApiTypes.STR,
                enum=enum_values(ExecutionStatus),
                description="Only runs in this status.",
            ),
            OpenApiParameter("tool", OpenApiTypes.STR, description="Only runs of this tool."),
            CLIENT_PARAMETER,
        ],
        responses={
            200: ToolExecutionSerializer(many=True),
            **error_responses(
                400,
                *AUTH_ERRORS,
                404,
                invalid=invalid_example("status", '"done" is not a valid choice.'),
            ),
        },
        examples=[OpenApiExample("A page", value=EXECUTION_EXAMPLE, response_only=True)],
    )
    def get(self, request: Request) -> Response:
        filters = self.validated_query(ToolExecutionFilterSerializer)
        queryset = tool_execution_audit_list(
            client=self.client,
            status=filters.get("status"),
            tool_name=filters.get("tool"),
        )
        return self.paginated_response(queryset, ToolExecutionSerializer)


class ToolListApi(StaffAPIView):
    required_roles = {"GET": MANAGE}

    @extend_schema(
        operation_id="tools_list",
        tags=[TOOLS_TAG],
        summary="List tools",
        description="The client's tools, enabled or not, by name. Needs the admin role.",
        parameters=[CLIENT_PARAMETER],
        responses={200: ToolSerializer(many=True), **error_responses(*AUTH_ERRORS, 404)},
        examples=[OpenApiExample("A page", value=TOOL_EXAMPLE, response_only=True)],
    )
    def get(self, request: Request) -> Response:
        return self.paginated_response(tool_list(client=self.client), ToolSerializer)


class ToolDetailApi(StaffAPIView):
    required_roles = {"PATCH": MANAGE}

    @extend_schema(
        operation_id="tools_partial_update",
        tags=[TOOLS_TAG],
        summary="Enable / disable a tool or change its description",
        description="Only `enabled` and `description` can change; sending any other field is a "
        "400 naming it. A disabled tool is never called: the guards refuse it and the "
        "assistant answers without it. Needs the admin role.",
        parameters=[TOOL_NAME_PARAMETER, CLIENT_PARAMETER],
        request=ToolUpdateSerializer,
        responses={
            200: ToolSerializer,
            **error_responses(
                400,
                *AUTH_ERRORS,
                404,
                invalid=invalid_example("kind", "This field cannot be changed through the API."),
            ),
        },
        examples=[
            OpenApiExample("Disable", value={"enabled": False}, request_only=True),
            OpenApiExample("Updated", value={**TOOL_EXAMPLE, "enabled": False}, response_only=True),
        ],
    )
    def patch(self, request: Request, name: str) -> Response:
        tool = tool_get_for_path(client=self.client, name=name)
        if tool is None:
            raise exceptions.NotFound()
        body = ToolUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        updated = tool_update(
            client=self.client,
            tool=tool,
            enabled=body.validated_data.get("enabled"),
            description=body.validated_data.get("description"),
        )
        return Response(ToolSerializer(updated).data)
