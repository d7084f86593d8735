"""The tools tasks (the `background` queue): list every enabled MCP server's tools (the beat), so
a tool added or changed on a server is found and held for review (apps/tools/mcp.py), and list
one server's tools after a tenant import saved it (apps/tools/mcp_settings.py)."""

from celery import shared_task

from apps.core.tasks import TenantTask
from apps.tools.mcp import mcp_servers_sync_all
from apps.tools.mcp_settings import mcp_server_sync_queued


@shared_task(name="tools.mcp_sync", ignore_result=True)
def mcp_sync() -> None:
    """Beat: list the MCP servers' tools."""
    mcp_servers_sync_all()


@shared_task(name="tools.mcp_sync_server", base=TenantTask, ignore_result=True)
def mcp_sync_server(server_id: int, client_id: int) -> None:
    """List one server's tools (queued after an import commits). Safe to run twice: a listing
    only brings the server's tools in line with what it lists."""
    mcp_server_sync_queued(client_id=client_id, server_id=server_id)
