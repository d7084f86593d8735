"""Tools from the client's MCP servers (docs/mcp.md): a server's tool list becomes GuideDesk
tools, and nothing it lists can widen what the assistant may do without staff.

- **Listing** (`mcp_server_sync`: on save in the admin, "List tools now", and the beat task every
  `MCP_SYNC_SECONDS`). A new tool is added **disabled**, classified *destructive* (the strictest
  kind) until staff classify it; a tool whose description or schema changed on the server goes
  back to disabled; a tool the server no longer lists is disabled. Each tool keeps the
  fingerprint of its definition as listed and as staff reviewed it (enabling it reviews it).
- **Running** (`apps/tools/executors/mcp.py`): only while the listed and the reviewed fingerprint
  are the same, with every gate of a webhook tool in front (enabled set, JSON Schema, the
  customer's confirmation of exact parameters, critique, approval rules, customer scope).
- **The verified customer.** When the server declares an argument (`customer_argument`) or a
  header (`customer_header`) for the customer's id, GuideDesk fills it in from the verified
  customer and the tool is customer scoped; the argument is taken out of the schema the model
  sees, so the model can never choose whose data a call is about.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from django.core.cache import cache
from django.db import transaction
from django.utils import timezone
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from apps.clients.models import Client
from apps.tools.mcp_client import McpError, McpToolSpec, mcp_list_tools, mcp_oauth_token
from apps.tools.models import ClientTool, ExecutorType, McpAuth, McpServer, ToolKind

logger = logging.getLogger(__name__)

# What a listed description may hold: the rest is cut (it goes into every prompt the tool is in).
MAX_DESCRIPTION_CHARS = 2000
MAX_TOOLS_PER_SERVER = 100
MAX_TIMEOUT_SECONDS = 60.0
_NOT_NAME = re.compile(r"[^A-Za-z0-9_]+")


@dataclass
class SyncReport:
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    error: str = ""

    @property
    def needs_review(self) -> list[str]:
        return [*self.added, *self.changed]


def fingerprint(spec: McpToolSpec) -> str:
    """The definition the assistant would be given: its description and input schema."""
    body = json.dumps(
        {"description": spec.description, "input_schema": spec.input_schema},
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(body.encode()).hexdigest()


def tool_name_for(server: McpServer, mcp_name: str, taken: set[str]) -> str:
    """`<server>_<tool>` in GuideDesk's tool-name alphabet, at most 64 characters, unique."""
    base = f"{server.name}_{_NOT_NAME.sub('_', mcp_name).strip('_') or 'tool'}"[:64]
    name, n = base, 2
    while name in taken:
        suffix = f"_{n}"
        name, n = base[: 64 - len(suffix)] + suffix, n + 1
    return name


def model_schema(server: McpServer, spec: McpToolSpec) -> tuple[dict[str, Any], bool]:
    """(the schema the model sees, whether the tool takes the verified customer): the server's
    input schema without the customer argument GuideDesk fills in."""
    schema = dict(spec.input_schema or {"type": "object", "properties": {}})
    properties = dict(schema.get("properties") or {})
    takes_customer = bool(server.customer_argument) and server.customer_argument in properties
    if takes_customer:
        properties.pop(server.customer_argument)
        schema["properties"] = properties
        required = [r for r in schema.get("required", []) if r != server.customer_argument]
        if required:
            schema["required"] = required
        else:
            schema.pop("required", None)
    return schema, takes_customer or bool(server.customer_header)


def server_headers(server: McpServer, *, customer_id: str = "") -> dict[str, str]:
    """The headers every request to the server carries: its credentials and, for a customer-
    scoped call, the verified customer's id in the header the server declared."""
    headers: dict[str, str] = {}
    if server.auth == McpAuth.BEARER and server.bearer_token:
        headers["Authorization"] = f"Bearer {server.bearer_token}"
    elif server.auth == McpAuth.OAUTH:
        headers["Authorization"] = f"Bearer {_oauth_token(server)}"
    if customer_id and server.customer_header:
        headers[server.customer_header] = customer_id
    return headers


def _oauth_token(server: McpServer) -> str:
    """A client-credentials access token, cached until shortly before it expires."""
    secret = hashlib.sha256(server.oauth_client_secret.encode()).hexdigest()[:16]
    key = f"mcp:oauth:{server.pk}:{secret}"  # a new secret: a new token
    token = cache.get(key)
    if token:
        return str(token)
    token, expires_in = mcp_oauth_token(
        token_url=server.oauth_token_url,
        client_id=server.oauth_client_id,
        client_secret=server.oauth_client_secret,
        scope=server.oauth_scope,
        timeout=server_timeout(server),
    )
    cache.set(key, token, max(0, min(int(expires_in), 3600) - 60))
    return token


def server_timeout(server: McpServer) -> float:
    return max(0.5, min(float(server.timeout_seconds or 10.0), MAX_TIMEOUT_SECONDS))


def _schema_problem(schema: dict[str, Any]) -> str:
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return exc.message[:200]
    return "" if schema.get("type", "object") == "object" else "the input schema is not an object"


def mcp_server_sync(*, client: Client, server: McpServer) -> SyncReport:
    """List the server's tools and bring its GuideDesk tools in line (see the module)."""
    report = SyncReport()
    try:
        specs = mcp_list_tools(
            url=server.url, headers=server_headers(server), timeout=server_timeout(server)
        )
    except McpError as exc:
        report.error = str(exc)[:500]
        McpServer.objects.for_client(client).filter(pk=server.pk).update(
            last_error=report.error, updated_at=timezone.now()
        )
        return report
    with transaction.atomic():
        _apply_listing(
            client=client, server=server, specs=specs[:MAX_TOOLS_PER_SERVER], report=report
        )
        if len(specs) > MAX_TOOLS_PER_SERVER:
            report.error = (
                f"the server lists {len(specs)} tools; the first {MAX_TOOLS_PER_SERVER} were taken"
            )
        McpServer.objects.for_client(client).filter(pk=server.pk).update(
            last_synced_at=timezone.now(), last_error=report.error, updated_at=timezone.now()
        )
    if report.needs_review or report.removed:
        logger.info(
            "mcp tools changed",
            extra={
                "server": server.pk,
                "added": report.added,
                "changed": report.changed,
                "removed": report.removed,
            },
        )
    return report


def _apply_listing(
    *, client: Client, server: McpServer, specs: list[McpToolSpec], report: SyncReport
) -> None:
    tools = ClientTool.objects.for_client(client).select_for_update()
    mine = {t.mcp_tool_name: t for t in tools.filter(mcp_server=server)}
    taken = set(tools.values_list("name", flat=True))
    listed: set[str] = set()
    for spec in specs:
        if spec.name in listed:
            continue
        listed.add(spec.name)
        spec = McpToolSpec(
            name=spec.name,
            description=spec.description[:MAX_DESCRIPTION_CHARS],
            input_schema=spec.input_schema,
        )
        schema, takes_customer = model_schema(server, spec)
        if _schema_problem(schema):
            continue  # never offered: its arguments could not be checked
        listed_print = fingerprint(spec)
        tool = mine.get(spec.name)
        if tool is None:
            name = tool_name_for(server, spec.name, taken)
            taken.add(name)
            ClientTool.objects.create(
                client=client,
                name=name,
                description=spec.description or spec.name,
                kind=ToolKind.DESTRUCTIVE,
                parameters=schema,
                executor_type=ExecutorType.MCP,
                mcp_server=server,
                mcp_tool_name=spec.name,
                mcp_fingerprint=listed_print,
                timeout_seconds=server_timeout(server),
                customer_scoped=takes_customer,
                enabled=False,
            )
            report.added.append(name)
        elif tool.mcp_fingerprint != listed_print:
            tool.description = spec.description or spec.name
            tool.parameters = schema
            tool.mcp_fingerprint = listed_print
            tool.customer_scoped = tool.customer_scoped or takes_customer
            tool.enabled = False
            tool.save(
                update_fields=[
                    "description",
                    "parameters",
                    "mcp_fingerprint",
                    "customer_scoped",
                    "enabled",
                    "updated_at",
                ]
            )
            report.changed.append(tool.name)
        else:
            report.unchanged += 1
    for mcp_name, tool in mine.items():
        if mcp_name not in listed and (tool.enabled or tool.mcp_fingerprint):
            tool.enabled = False
            tool.mcp_fingerprint = ""
            tool.save(update_fields=["enabled", "mcp_fingerprint", "updated_at"])
            report.removed.append(tool.name)


def mcp_tool_review(*, tool: ClientTool) -> None:
    """Staff enabled the tool as it is now listed: that definition is the reviewed one."""
    if tool.executor_type == ExecutorType.MCP and tool.enabled and tool.mcp_fingerprint:
        tool.mcp_reviewed_fingerprint = tool.mcp_fingerprint


def mcp_tool_reviewed(tool: ClientTool) -> bool:
    """The tool's definition on the server is the one staff reviewed."""
    return bool(tool.mcp_fingerprint) and tool.mcp_fingerprint == tool.mcp_reviewed_fingerprint


def mcp_servers_sync_all() -> int:
    """Beat: list every enabled server's tools. Returns how many servers were listed."""
    listed = 0
    for server in (
        McpServer.objects.unscoped("the beat lists every client's MCP servers")
        .filter(enabled=True)
        .select_related("client")
    ):
        mcp_server_sync(client=server.client, server=server)
        listed += 1
    return listed
