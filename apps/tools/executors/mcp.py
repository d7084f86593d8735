"""The MCP executor: a `tools/call` to the client's MCP server (docs/mcp.md).

Runs only a tool whose definition on the server is the one staff reviewed (apps/tools/mcp.py),
on an enabled server, within the tool's time limit and the turn's deadline, with a bounded
result. One attempt: an MCP call carries no idempotency key, so a destructive call is never
sent twice. The result is data like a webhook's (`ToolExecution.result`), never instructions.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from django.utils.translation import gettext_noop

from apps.core import deadlines
from apps.tools.executors import (
    MAX_ERROR_CHARS,
    TIMEOUT_SETTING,
    Executor,
    ExecutorOutcome,
    elapsed_ms,
)
from apps.tools.mcp import mcp_tool_reviewed, server_headers, server_timeout
from apps.tools.mcp_client import McpError, mcp_call_tool
from apps.tools.models import McpServer

if TYPE_CHECKING:
    from apps.clients.models import Client
    from apps.tools.models import ClientTool, ToolExecution

# A tool result ends up in prompts and the database (as for webhooks).
MAX_RESULT_BYTES = 1024 * 1024
_RETRYABLE = frozenset({"timeout", "connection"})


def _failed(error: str, started: float, *, attempts: int = 0, **flags: Any) -> ExecutorOutcome:
    return ExecutorOutcome(
        ok=False,
        result=None,
        error=error[:MAX_ERROR_CHARS],
        attempts=attempts,
        latency_ms=elapsed_ms(started),
        **flags,
    )


class McpExecutor(Executor):
    type = "mcp"
    label = gettext_noop("MCP server tool (listed from the client's MCP server)")

    def settings_schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {
                "tool": {
                    "type": "string",
                    "maxLength": 200,
                    "title": gettext_noop("MCP tool"),
                    "description": gettext_noop(
                        "Only for MCP tools: the tool's name on its server (filled in when the "
                        "server's tools are listed)."
                    ),
                    "x-column": "mcp_tool_name",
                },
                "timeout": TIMEOUT_SETTING,
            },
            "required": ["tool"],
        }

    def configured(self, tool: ClientTool) -> bool:
        return bool(tool.mcp_server_id and tool.mcp_tool_name) and mcp_tool_reviewed(tool)

    def run(self, *, client: Client, tool: ClientTool, execution: ToolExecution) -> ExecutorOutcome:
        started = time.monotonic()
        server = (
            McpServer.objects.for_client(client).filter(pk=tool.mcp_server_id).first()
            if tool.mcp_server_id is not None
            else None
        )
        if server is None or not server.enabled:
            return _failed(f"The MCP server of {tool.name!r} is missing or disabled.", started)
        if not mcp_tool_reviewed(tool):
            return _failed(
                f"{tool.name!r} changed on its MCP server since staff reviewed it.", started
            )
        arguments = dict(execution.params)
        customer_id = ""
        if tool.customer_scoped:
            conversation = execution.conversation if execution.conversation_id else None
            customer_id = conversation.customer_id if conversation is not None else ""
            if server.customer_argument:
                arguments[server.customer_argument] = customer_id
        try:
            limit = deadlines.time_for(min(float(tool.timeout_seconds), server_timeout(server)))
            headers = server_headers(server, customer_id=customer_id)
            answer = mcp_call_tool(
                url=server.url,
                headers=headers,
                name=tool.mcp_tool_name,
                arguments=arguments,
                timeout=limit if limit is not None else server_timeout(server),
                max_bytes=MAX_RESULT_BYTES,
            )
        except deadlines.DeadlineExceeded:
            return _failed("The turn's time ran out.", started, timed_out=True)
        except McpError as exc:
            return _failed(
                f"MCP server: {exc}",
                started,
                attempts=1,
                retryable_failure=exc.kind in _RETRYABLE,
                timed_out=exc.kind == "timeout",
            )
        if answer.is_error:
            text = answer.result.get("text") if isinstance(answer.result, dict) else None
            return _failed(
                f"The MCP tool reported an error: {text or answer.result}", started, attempts=1
            )
        return ExecutorOutcome(
            ok=True,
            result=answer.result,
            error="",
            attempts=1,
            latency_ms=elapsed_ms(started),
        )


EXECUTOR = McpExecutor()
