"""Staff / back-office tool API: the audit trail of tool runs, switching tools on and off, and
the client's MCP servers (docs/mcp.md), whose tools arrive disabled until staff review them."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.permissions import MANAGE, READ, StaffAPIView
from apps.api.schema import (
    AUTH_ERRORS,
    CLIENT_PARAMETER,
    NamedChoiceField,
    ResourceSchema,
    choice_parameter,
    conflict_response,
    error_responses,
    found_or_404,
    invalid_example,
    page_schema,
)
from apps.api.serializers import (
    RefusesUnknownFields,
    SecretIsSetField,
    WriteOnlySecretField,
    validated_body,
)
from apps.tools.executors import executor_choices
from apps.tools.mcp import (
    REVIEW_STATES,
    SyncReport,
    mcp_server_create,
    mcp_server_delete,
    mcp_server_sync,
    mcp_server_update,
    mcp_tool_review_state,
)
from apps.tools.models import ClientTool, ExecutionStatus, FailureKind, McpAuth, McpServer, ToolKind
from apps.tools.selectors import (
    mcp_server_get_for_path,
    mcp_server_list,
    tool_execution_audit_list,
    tool_get_for_path,
    tool_list,
)
from apps.tools.services import tool_update

EXECUTIONS_TAG = "tool executions"
TOOLS_TAG = "tools"
MCP_TAG = "MCP servers"
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


class ToolUpdateSerializer(RefusesUnknownFields):
    """Only `enabled` and `description` may change; any other key is refused by name."""

    unknown_field_message = "This field cannot be changed through the API."

    enabled = serializers.BooleanField(required=False)
    description = serializers.CharField(required=False, max_length=MAX_DESCRIPTION_CHARS)


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
            choice_parameter("status", ExecutionStatus, "Only runs in this status."),
            OpenApiParameter("tool", OpenApiTypes.STR, description="Only runs of this tool."),
            CLIENT_PARAMETER,
        ],
        **page_schema(
            ToolExecutionSerializer,
            EXECUTION_EXAMPLE,
            invalid=invalid_example("status", '"done" is not a valid choice.'),
        ),
    )
    def get(self, request: Request) -> Response:
        filters = self.validated_query(ToolExecutionFilterSerializer)
        queryset = tool_execution_audit_list(
            client=self.client,
            status=filters.get("status"),
            tool_name=filters.get("tool"),
        )
        return self.paginated_response(queryset, ToolExecutionSerializer)


TOOLS = ResourceSchema("tools", TOOLS_TAG, TOOL_NAME_PARAMETER)


class ToolListApi(StaffAPIView):
    required_roles = {"GET": MANAGE}

    @TOOLS.list_page(
        "List tools",
        "The client's tools, enabled or not, by name. Needs the admin role.",
        serializer=ToolSerializer,
        example=TOOL_EXAMPLE,
    )
    def get(self, request: Request) -> Response:
        return self.list_response(tool_list, ToolSerializer)


class ToolDetailApi(StaffAPIView):
    required_roles = {"PATCH": MANAGE}

    @TOOLS.update(
        "Enable / disable a tool or change its description",
        "Only `enabled` and `description` can change; sending any other field is a "
        "400 naming it. A disabled tool is never called: the guards refuse it and the "
        "assistant answers without it. Needs the admin role.",
        request=ToolUpdateSerializer,
        body=ToolSerializer,
        invalid=("kind", "This field cannot be changed through the API."),
        requests={"Disable": {"enabled": False}},
        updated={**TOOL_EXAMPLE, "enabled": False},
    )
    def patch(self, request: Request, name: str) -> Response:
        tool = found_or_404(tool_get_for_path(client=self.client, name=name))
        body = validated_body(ToolUpdateSerializer, request)
        updated = tool_update(
            client=self.client,
            tool=tool,
            enabled=body.get("enabled"),
            description=body.get("description"),
        )
        return Response(ToolSerializer(updated).data)


# ---------------------------------------------------------------------------------------------
# MCP servers
# ---------------------------------------------------------------------------------------------


class McpServerToolSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="The GuideDesk tool's name (`<server>_<tool>`).")
    mcp_tool = serializers.CharField(
        source="mcp_tool_name", help_text="The tool's name on the server."
    )
    kind = NamedChoiceField(choices=ToolKind, enum_name="ToolKind")
    enabled = serializers.BooleanField()
    review = serializers.SerializerMethodField(
        help_text="`reviewed`: the definition staff enabled; `new`: never reviewed; `changed`: "
        "changed on the server since it was reviewed (disabled until enabled again); "
        "`removed`: the server no longer lists it."
    )

    @extend_schema_field(
        NamedChoiceField(choices=[(s, s) for s in REVIEW_STATES], enum_name="McpToolReview")
    )
    def get_review(self, tool: ClientTool) -> str:
        return mcp_tool_review_state(tool)


class McpServerSerializer(serializers.Serializer):
    """What is read back: never the bearer token or the OAuth client secret."""

    name = serializers.CharField()
    url = serializers.CharField()
    auth = NamedChoiceField(choices=McpAuth, enum_name="McpAuth")
    oauth_token_url = serializers.CharField()
    oauth_client_id = serializers.CharField()
    oauth_scope = serializers.CharField()
    timeout_seconds = serializers.FloatField()
    customer_argument = serializers.CharField()
    customer_header = serializers.CharField()
    enabled = serializers.BooleanField()
    last_synced_at = serializers.DateTimeField(
        allow_null=True, help_text="When its tools were last listed."
    )
    last_error = serializers.CharField(
        help_text="Why the last listing failed; empty if it did not."
    )
    has_bearer_token = SecretIsSetField(source="bearer_token")
    has_oauth_client_secret = SecretIsSetField(source="oauth_client_secret")
    tools = McpServerToolSerializer(many=True, help_text="Its GuideDesk tools, by name.")


class McpServerWriteSerializer(RefusesUnknownFields):
    """The settings a request may give; the rules (name, address, timeout, credentials) are
    `mcp_server_clean`'s, shared with the admin. Any other key is refused by name."""

    name = serializers.CharField(
        max_length=20,
        help_text="Letters, digits and underscores, starting with a letter: the start of its "
        "tools' names.",
    )
    url = serializers.URLField(
        max_length=500, help_text="The streamable HTTP endpoint; https, public address."
    )
    auth = NamedChoiceField(choices=McpAuth, enum_name="McpAuth", required=False)
    bearer_token = WriteOnlySecretField(max_length=2000)
    oauth_token_url = serializers.URLField(max_length=500, required=False, allow_blank=True)
    oauth_client_id = serializers.CharField(max_length=200, required=False, allow_blank=True)
    oauth_client_secret = WriteOnlySecretField()
    oauth_scope = serializers.CharField(max_length=500, required=False, allow_blank=True)
    timeout_seconds = serializers.FloatField(
        required=False, help_text="Each listing or call ends within it: more than 0, at most 60."
    )
    customer_argument = serializers.CharField(max_length=64, required=False, allow_blank=True)
    customer_header = serializers.CharField(max_length=64, required=False, allow_blank=True)
    enabled = serializers.BooleanField(required=False)


class McpSyncSerializer(serializers.Serializer):
    added = serializers.ListField(
        child=serializers.CharField(), help_text="New tools, added disabled."
    )
    changed = serializers.ListField(
        child=serializers.CharField(), help_text="Tools changed on the server, now disabled."
    )
    removed = serializers.ListField(
        child=serializers.CharField(), help_text="Tools the server no longer lists, disabled."
    )
    unchanged = serializers.IntegerField()
    error = serializers.CharField(help_text="Why the listing failed; empty when it did not.")


class McpServerCreatedSerializer(McpServerSerializer):
    sync = McpSyncSerializer(
        allow_null=True,
        help_text="The listing of its tools right after saving; null for a disabled server.",
    )


MCP_TOOL_EXAMPLE: dict[str, Any] = {
    "name": "crm_cancel_order",
    "mcp_tool": "cancel_order",
    "kind": "destructive",
    "enabled": False,
    "review": "new",
}
MCP_SERVER_EXAMPLE: dict[str, Any] = {
    "name": "crm",
    "url": "https://mcp.example.com/mcp",
    "auth": "bearer",
    "oauth_token_url": "",
    "oauth_client_id": "",
    "oauth_scope": "",
    "timeout_seconds": 10.0,
    "customer_argument": "customer_id",
    "customer_header": "",
    "enabled": True,
    "last_synced_at": "2026-03-02T09:15:30.000000Z",
    "last_error": "",
    "has_bearer_token": True,
    "has_oauth_client_secret": False,
    "tools": [MCP_TOOL_EXAMPLE],
}
MCP_SYNC_EXAMPLE: dict[str, Any] = {
    "added": ["crm_cancel_order"],
    "changed": [],
    "removed": [],
    "unchanged": 0,
    "error": "",
}
SERVER_NAME_PARAMETER = OpenApiParameter(
    "server_name", OpenApiTypes.STR, OpenApiParameter.PATH, description="The server's name."
)
SERVER_IN_USE = conflict_response(
    "One of its tools has run: the runs are kept for the audit trail, so the server stays. "
    "Disable it instead.",
    (
        "In use",
        "in_use",
        "Its tools have run, and their runs are kept for the audit trail: disable the server "
        "instead.",
    ),
)


def _server_or_404(view: StaffAPIView, name: str) -> McpServer:
    return found_or_404(mcp_server_get_for_path(client=view.client, name=name))


def _sync_data(report: SyncReport) -> dict[str, Any]:
    return dict(McpSyncSerializer(report).data)


SERVERS = ResourceSchema(
    "mcp_servers",
    MCP_TAG,
    SERVER_NAME_PARAMETER,
    serializer=McpServerSerializer,
    example=MCP_SERVER_EXAMPLE,
    example_name="A server",
)


class McpServerListApi(StaffAPIView):
    required_roles = {"GET": MANAGE, "POST": MANAGE}

    @SERVERS.list_page(
        "List MCP servers",
        "The client's MCP servers by name, each with its tools and their review "
        "state. Secrets are never returned: `has_bearer_token` and `has_oauth_client_secret` "
        "say whether one is saved. Needs the admin role.",
    )
    def get(self, request: Request) -> Response:
        return self.list_response(mcp_server_list, McpServerSerializer)

    @SERVERS.create(
        "Add an MCP server",
        "Saves the server, then lists its tools at once (an enabled server): each "
        "new tool is added **disabled** until staff enable it (`PATCH /api/v1/tools/<name>/`). "
        "`sync` reports the listing; a server that cannot be reached is still saved, with "
        "`sync.error` saying why. The URL must be https and reach a public address. Needs the "
        "admin role.",
        request=McpServerWriteSerializer,
        invalid=("bearer_token", "A bearer token is needed for this choice."),
        body=McpServerCreatedSerializer,
        requests={
            "Add": {
                "name": "crm",
                "url": "https://mcp.example.com/mcp",
                "auth": "bearer",
                "bearer_token": "s3cr3t-token",
                "customer_argument": "customer_id",
            }
        },
        created={**MCP_SERVER_EXAMPLE, "sync": MCP_SYNC_EXAMPLE},
    )
    def post(self, request: Request) -> Response:
        body = validated_body(McpServerWriteSerializer, request)
        server = mcp_server_create(client=self.client, **body)
        report = mcp_server_sync(client=self.client, server=server) if server.enabled else None
        server = _server_or_404(self, server.name)
        data = dict(McpServerSerializer(server).data)
        data["sync"] = _sync_data(report) if report is not None else None
        return Response(data, status=status.HTTP_201_CREATED)


class McpServerDetailApi(StaffAPIView):
    required_roles = {"GET": MANAGE, "PATCH": MANAGE, "DELETE": MANAGE}

    @SERVERS.retrieve(
        "Read an MCP server", "The server, its tools and their review state. Needs the admin role."
    )
    def get(self, request: Request, server_name: str) -> Response:
        return Response(McpServerSerializer(_server_or_404(self, server_name)).data)

    @SERVERS.update(
        "Change an MCP server",
        "Changes the given settings, checked as on create. An empty or absent "
        "secret keeps the saved one. Its tools are not listed again: `POST …/sync` does that. "
        "Needs the admin role.",
        request=McpServerWriteSerializer(partial=True),
        invalid=("timeout_seconds", "From more than 0 to 60 seconds."),
        requests={"Disable": {"enabled": False}},
        updated={**MCP_SERVER_EXAMPLE, "enabled": False},
        updated_name="Changed",
    )
    def patch(self, request: Request, server_name: str) -> Response:
        server = _server_or_404(self, server_name)
        body = validated_body(McpServerWriteSerializer, request, partial=True)
        updated = mcp_server_update(client=self.client, server=server, **body)
        return Response(McpServerSerializer(_server_or_404(self, updated.name)).data)

    @SERVERS.operation(
        "destroy",
        "Delete an MCP server",
        "Deletes the server and its tools. A server one of whose tools has run "
        "answers 409 (the runs are kept for the audit trail): disable it instead. Needs the "
        "admin role.",
        responses={204: None, **error_responses(*AUTH_ERRORS, 404), **SERVER_IN_USE},
    )
    def delete(self, request: Request, server_name: str) -> Response:
        mcp_server_delete(client=self.client, server=_server_or_404(self, server_name))
        return Response(status=status.HTTP_204_NO_CONTENT)


class McpServerSyncApi(StaffAPIView):
    required_roles = {"POST": MANAGE}

    @SERVERS.action(
        "sync",
        "List an MCP server's tools now",
        "Lists the server's tools now (as the beat task does every few minutes): "
        "new tools are added disabled, tools changed on the server are disabled until enabled "
        "again, tools it no longer lists are disabled. A server that cannot be reached answers "
        "200 with `error` saying why. No request body. Needs the admin role.",
        body=McpSyncSerializer,
        answer=MCP_SYNC_EXAMPLE,
        answer_name="Listed",
    )
    def post(self, request: Request, server_name: str) -> Response:
        server = _server_or_404(self, server_name)
        return Response(_sync_data(mcp_server_sync(client=self.client, server=server)))
