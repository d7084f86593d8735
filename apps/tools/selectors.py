"""Read-side queries for tools, always scoped to one client."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from django.db.models import Prefetch, QuerySet

from apps.clients.models import Client
from apps.core.tenant_sql import model_columns, sql_models
from apps.tools.models import (
    ClientTool,
    McpServer,
    PendingAction,
    PendingActionStatus,
    ToolExecution,
)

if TYPE_CHECKING:
    from apps.conversations.models import Message


def tool_list_enabled(*, client: Client) -> list[ClientTool]:
    """The client's enabled tools, by name (configured or not: the guards report that)."""
    return list(ClientTool.objects.for_client(client).filter(enabled=True).order_by("name"))


def tool_list_for_turn(*, client: Client) -> list[ClientTool]:
    """All the client's tools, enabled or not, by name: what a turn offers and guards. Plain
    SQL: every turn reads them, and the ORM's building of the read cost ≈ 1 ms of CPU."""
    return sql_models(
        "tools.for_turn",
        ClientTool,
        f"SELECT {model_columns(ClientTool)} FROM {ClientTool._meta.db_table}"  # noqa: S608
        " WHERE client_id = %s ORDER BY name",
        [client.pk],
        client_id=client.pk,
    )


def tool_get_by_name(*, client: Client, name: str) -> ClientTool | None:
    """The client's tool called `name`, enabled or not, so callers can tell "unknown" from
    "disabled"."""
    return ClientTool.objects.for_client(client).filter(name=name).first()


def tool_execution_list(*, client: Client) -> QuerySet[ToolExecution]:
    """The client's tool executions, newest first, with their tool loaded."""
    return (
        ToolExecution.objects.for_client(client)
        .select_related("tool")
        .order_by("-created_at", "-pk")
    )


def tool_list(*, client: Client) -> QuerySet[ClientTool]:
    """All the client's tools, enabled or not, by name."""
    return ClientTool.objects.for_client(client).order_by("name", "pk")


def tool_execution_audit_list(
    *, client: Client, status: str | None = None, tool_name: str | None = None
) -> QuerySet[ToolExecution]:
    """The audit trail of tool runs, newest first, with tool and conversation loaded;
    optionally only one status and/or one tool (by name)."""
    queryset = tool_execution_list(client=client).select_related("conversation")
    if status:
        queryset = queryset.filter(status=status)
    if tool_name:
        queryset = queryset.filter(tool__name=tool_name)
    return queryset


# The tool-name rule of the importer and the admin; anything else cannot name a tool.
_TOOL_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]{0,63}\Z")


def tool_get_for_path(*, client: Client, name: str) -> ClientTool | None:
    """The client's tool named by a URL path segment; None for a name no tool can have (so
    stray bytes never reach the database) as for an unknown or another client's tool."""
    if not _TOOL_NAME_RE.match(name):
        return None
    return tool_get_by_name(client=client, name=name)


def mcp_server_list(*, client: Client) -> QuerySet[McpServer]:
    """The client's MCP servers by name, each with its tools (by name) loaded as `tools`."""
    tools = ClientTool.objects.for_client(client).order_by("name", "pk")
    return (
        McpServer.objects.for_client(client)
        .prefetch_related(Prefetch("tools", queryset=tools))
        .order_by("name", "pk")
    )


# A server's name (apps/tools/mcp.py, `mcp_server_clean`); anything else names no server.
_SERVER_NAME_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9_]{0,19}\Z")


def mcp_server_get_for_path(*, client: Client, name: str) -> McpServer | None:
    """The client's MCP server named by a URL path segment, with its tools; None for a name no
    server can have, as for an unknown or another client's server."""
    if not _SERVER_NAME_RE.match(name):
        return None
    return mcp_server_list(client=client).filter(name=name).first()


def pending_declined_by(*, client: Client, user_message: Message) -> PendingAction | None:
    """The confirmation this customer message turned down, if any."""
    return (
        PendingAction.objects.for_client(client)
        .select_related("tool")
        .filter(resolved_by=user_message, status=PendingActionStatus.DECLINED)
        .first()
    )
