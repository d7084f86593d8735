"""The settings of a client's MCP server, checked the same way wherever they come from (the
admin's `McpServerForm`, the tenant file's `mcp_servers`), and the listing of its tools queued
after an import (docs/mcp.md, docs/tenant-import.md)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from django.db import transaction
from django.utils.translation import gettext

from apps.clients.models import Client
from apps.tools.executors import webhook as webhook_executor
from apps.tools.mcp import SyncReport, mcp_server_sync
from apps.tools.models import McpAuth, McpServer

NAME = re.compile(r"[a-zA-Z][a-zA-Z0-9_]{0,19}")
MAX_TIMEOUT_SECONDS = 60.0
# What each kind of authentication needs (McpServer columns).
NEEDED_FOR: dict[str, tuple[str, ...]] = {
    McpAuth.BEARER: ("bearer_token",),
    McpAuth.OAUTH: ("oauth_token_url", "oauth_client_id", "oauth_client_secret"),
}


def mcp_server_problems(values: Mapping[str, Any]) -> dict[str, str]:
    """What is wrong with these McpServer column values (column -> message); {} when nothing.

    `name`, `url` and `timeout_seconds` are checked when present (a form field that failed its
    own check is absent); with `auth`, the columns that kind needs must be non-empty, so pass
    the stored secret for one the caller keeps. The URL must be one GuideDesk may call, by the
    webhook executor's rules (https, a public address: `destination_refusal`)."""
    problems: dict[str, str] = {}
    if "name" in values and not NAME.fullmatch(str(values["name"] or "")):
        problems["name"] = gettext(
            "Letters, digits and underscores, starting with a letter (at most 20)."
        )
    if "url" in values:
        reason = webhook_executor.destination_refusal(str(values["url"] or ""))
        if reason:
            problems["url"] = reason
    if "timeout_seconds" in values:
        try:
            timeout = float(values["timeout_seconds"] or 0)
        except (TypeError, ValueError):
            timeout = 0.0
        if not 0 < timeout <= MAX_TIMEOUT_SECONDS:
            problems["timeout_seconds"] = gettext("From more than 0 to 60 seconds.")
    auth = str(values.get("auth") or "")
    for needed in NEEDED_FOR.get(auth, ()):
        if not values.get(needed):
            problems[needed] = (
                gettext("A bearer token is needed for this choice.")
                if auth == McpAuth.BEARER
                else gettext("Needed for OAuth client credentials.")
            )
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
