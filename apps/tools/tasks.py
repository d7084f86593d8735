"""The tools beat task (the `background` queue): list every enabled MCP server's tools, so a
tool added or changed on a server is found and held for review (apps/tools/mcp.py)."""

from celery import shared_task

from apps.tools.mcp import mcp_servers_sync_all


@shared_task(name="tools.mcp_sync", ignore_result=True)
def mcp_sync() -> None:
    """Beat: list the MCP servers' tools."""
    mcp_servers_sync_all()
