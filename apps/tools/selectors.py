"""Read-side queries for tools, always scoped to one client."""

from __future__ import annotations

from django.db.models import QuerySet

from apps.clients.models import Client
from apps.tools.models import ClientTool, ToolExecution


def tool_list_enabled(*, client: Client) -> list[ClientTool]:
    """The client's enabled tools, by name (configured or not: the guards report that)."""
    return list(ClientTool.objects.for_client(client).filter(enabled=True).order_by("name"))


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
