"""The settings of a client's MCP server, checked the same way wherever they come from (the
admin's `McpServerForm`, the tenant file's `mcp_servers`), and the listing of its tools queued
after an import (docs/mcp.md, docs/tenant-import.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction

from apps.clients.models import Client
from apps.tools.mcp import (
    SyncReport,
    mcp_server_defaults,
    mcp_server_rule_problems,
    mcp_server_sync,
)
from apps.tools.models import McpAuth, McpServer

# What each kind of authentication needs (McpServer columns).
NEEDED_FOR: dict[str, tuple[str, ...]] = {
    McpAuth.BEARER: ("bearer_token",),
    McpAuth.OAUTH: ("oauth_token_url", "oauth_client_id", "oauth_client_secret"),
}


def mcp_server_problems(values: Mapping[str, Any]) -> dict[str, str]:
    """What is wrong with these McpServer column values (column -> the first message); {} when
    nothing. The rules are `apps.tools.mcp.mcp_server_rule_problems` (the admin's and the
    API's); only the columns in `values` are judged (the file's reader checks a field at a
    time), and with `auth` the credentials it needs must be there — pass the stored secret for
    one the caller keeps."""
    data = {**mcp_server_defaults(), **values}
    if "url" not in values:
        data["url"] = "https://mcp.invalid/"  # not judged here: never resolved (not changed)
    given = set(values)
    problems: dict[str, str] = {}
    for column, message in mcp_server_rule_problems(data, changed=given):
        judged = column in given or (column in NEEDED_FOR.get(str(values.get("auth")), ()))
        if judged and column not in problems:
            problems[column] = message
    return problems


def mcp_server_sync_on_commit(*, client: Client, server: McpServer) -> None:
    """Once the current transaction commits, list the server's tools in the background
    (`tools.mcp_sync_server`): whoever saved it never waits on, nor fails with, the server."""
    from apps.tools.tasks import mcp_sync_server

    server_id, client_id = server.pk, client.pk
    transaction.on_commit(
        lambda: mcp_sync_server.apply_async(kwargs={"server_id": server_id, "client_id": client_id})
    )


def mcp_server_sync_queued(*, client_id: int, server_id: int) -> SyncReport | None:
    """The queued listing: the server's tools, if it still exists and is enabled (else None).
    New tools arrive disabled, as with every listing (apps/tools/mcp.py)."""
    client = Client.objects.filter(pk=client_id).first()
    if client is None:
        return None
    server = McpServer.objects.for_client(client).filter(pk=server_id, enabled=True).first()
    if server is None:
        return None
    return mcp_server_sync(client=client, server=server)
