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
from django.db import IntegrityError, transaction
from django.db.models import ProtectedError, RestrictedError
from django.utils import timezone
from django.utils.translation import gettext
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from apps.clients.models import Client
from apps.core.exceptions import ApplicationError
from apps.core.settings_checks import column_defaults, raise_field_problems, settings_applied
from apps.tools.executors.webhook import destination_refusal
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


# The review state of a server's tool (the admin's "Review" column, the API's `review`).
REVIEWED, NEW, CHANGED, REMOVED = "reviewed", "new", "changed", "removed"
REVIEW_STATES = (REVIEWED, NEW, CHANGED, REMOVED)


def mcp_tool_review_state(tool: ClientTool) -> str:
    """`removed` (the server no longer lists it), `reviewed` (its definition is the one staff
    enabled), `changed` (reviewed once, changed on the server since) or `new`."""
    if not tool.mcp_fingerprint:
        return REMOVED
    if mcp_tool_reviewed(tool):
        return REVIEWED
    if tool.mcp_reviewed_fingerprint:
        return CHANGED
    return NEW


# --- the server's settings: one set of rules for the admin and the API --------------------------

SERVER_FIELDS = (
    "name",
    "url",
    "auth",
    "bearer_token",
    "oauth_token_url",
    "oauth_client_id",
    "oauth_client_secret",
    "oauth_scope",
    "timeout_seconds",
    "customer_argument",
    "customer_header",
    "enabled",
)
SECRET_FIELDS = ("bearer_token", "oauth_client_secret")
_SERVER_NAME = re.compile(r"[a-zA-Z][a-zA-Z0-9_]{0,19}")
_HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}")
# Headers GuideDesk or the protocol set itself: a customer id must never replace them.
_RESERVED_HEADERS = frozenset(
    {"authorization", "host", "content-type", "content-length", "transfer-encoding", "accept"}
)


def mcp_server_defaults() -> dict[str, Any]:
    return column_defaults(McpServer, SERVER_FIELDS)


def mcp_server_clean(
    *, client: Client | None, values: dict[str, Any], server: McpServer | None = None
) -> dict[str, Any]:
    """The server's settings once `values` are applied (to `server`, or to a new one), checked.

    Secrets are write-only: an empty or absent one keeps the saved one. Raises ApplicationError
    naming every bad field (`{"fields": {field: [message]}}`). The admin form and the API both
    come here, so their rules cannot drift."""
    data = settings_applied(
        McpServer, SERVER_FIELDS, saved=server, values=values, secrets=SECRET_FIELDS
    )
    # Addresses are checked when they change (the check resolves them; every call checks again).
    changed = {n for n in SERVER_FIELDS if server is None or getattr(server, n) != data[n]}
    raise_field_problems(
        mcp_server_rule_problems(data, client=client, server=server, changed=changed)
    )
    data["timeout_seconds"] = _timeout(data)
    data["enabled"] = bool(data.get("enabled"))
    return data


def _timeout(data: dict[str, Any]) -> float:
    try:
        return float(data.get("timeout_seconds") or 0)
    except (TypeError, ValueError):
        return 0.0


def mcp_server_rule_problems(
    data: dict[str, Any],
    *,
    client: Client | None = None,
    server: McpServer | None = None,
    changed: set[str] | None = None,
) -> list[tuple[str, str]]:
    """Every rule of a server's settings `data` (all its columns), as (field, message): the
    name, the addresses (those in `changed`), the header, the credentials and the timeout. The
    one place the admin form, the API and the tenant import take them from."""
    changed = set(SERVER_FIELDS) if changed is None else changed
    problems = [
        *_name_problems(client, server, data, changed),
        *_address_problems(data, changed),
        *_credential_problems(data),
    ]
    if not 0 < _timeout(data) <= MAX_TIMEOUT_SECONDS:
        problems.append(("timeout_seconds", gettext("From more than 0 to 60 seconds.")))
    return problems


def _name_problems(
    client: Client | None, server: McpServer | None, data: dict[str, Any], changed: set[str]
) -> list[tuple[str, str]]:
    name = str(data.get("name") or "")
    if not _SERVER_NAME.fullmatch(name):
        message = gettext("Letters, digits and underscores, starting with a letter (at most 20).")
        return [("name", message)]
    if client is not None and "name" in changed:
        others = McpServer.objects.for_client(client).filter(name=name)
        if server is not None:
            others = others.exclude(pk=server.pk)
        if others.exists():
            return [("name", gettext("This client already has an MCP server with this name."))]
    return []


def _address_problems(data: dict[str, Any], changed: set[str]) -> list[tuple[str, str]]:
    problems = []
    url = str(data.get("url") or "")
    if "url" in changed or not url:
        refusal = destination_refusal(url)
        if refusal:
            problems.append(("url", refusal))
    token_url = str(data.get("oauth_token_url") or "")
    if data.get("auth") == McpAuth.OAUTH and token_url and "oauth_token_url" in changed:
        refusal = destination_refusal(token_url)
        if refusal:
            problems.append(("oauth_token_url", refusal))
    header = str(data.get("customer_header") or "")
    if header and (not _HEADER_NAME.fullmatch(header) or header.lower() in _RESERVED_HEADERS):
        message = gettext("An HTTP header name of your own (letters, digits and hyphens).")
        problems.append(("customer_header", message))
    return problems


def _credential_problems(data: dict[str, Any]) -> list[tuple[str, str]]:
    auth = data.get("auth")
    if auth not in McpAuth.values:
        return [("auth", gettext("Choose none, bearer or oauth."))]
    if auth == McpAuth.BEARER and not data.get("bearer_token"):
        return [("bearer_token", gettext("A bearer token is needed for this choice."))]
    if auth == McpAuth.OAUTH:
        needed = ("oauth_token_url", "oauth_client_id", "oauth_client_secret")
        message = gettext("Needed for OAuth client credentials.")
        return [(name, message) for name in needed if not data.get(name)]
    return []


def _name_taken() -> ApplicationError:
    message = gettext("This client already has an MCP server with this name.")
    return ApplicationError(f"name: {message}", {"fields": {"name": [message]}}, code="invalid")


def mcp_server_create(*, client: Client, **values: Any) -> McpServer:
    """A new MCP server of the client's, checked by `mcp_server_clean`. Its tools are listed
    by `mcp_server_sync`, which the caller runs next."""
    data = mcp_server_clean(client=client, values=values)
    try:
        with transaction.atomic():
            return McpServer.objects.create(client=client, **data)
    except IntegrityError:  # the same name, saved between the check and the insert
        raise _name_taken() from None


def mcp_server_update(*, client: Client, server: McpServer, **values: Any) -> McpServer:
    """Change the given settings (checked by `mcp_server_clean`; an empty secret keeps the
    saved one)."""
    if server.client_id != client.pk:
        raise ValueError("server belongs to another client")
    try:
        with transaction.atomic():
            locked = McpServer.objects.for_client(client).select_for_update().get(pk=server.pk)
            data = mcp_server_clean(client=client, values=values, server=locked)
            for name, value in data.items():
                setattr(locked, name, value)
            locked.save()
    except IntegrityError:
        raise _name_taken() from None
    return locked


def mcp_server_delete(*, client: Client, server: McpServer) -> None:
    """Delete the server and its tools. A tool that has run keeps its runs for the audit trail,
    so such a server cannot be deleted (409): disable it instead."""
    try:
        with transaction.atomic():
            McpServer.objects.for_client(client).filter(pk=server.pk).delete()
    except (ProtectedError, RestrictedError):
        message = gettext(
            "Its tools have run, and their runs are kept for the audit trail: disable the "
            "server instead."
        )
        raise ApplicationError(message, status=409, code="in_use") from None


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
