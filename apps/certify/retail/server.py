"""Serve one run's retail world to agents: as GuideDesk webhook tools and as an MCP server.

Both surfaces act on the same `RetailRuntime` (one world per run, resettable to the seed), so
GuideDesk (through its webhook or MCP executor) and a baseline agent (through any MCP client)
call exactly the same tools with the same schemas and rules.

- `POST /webhook` — the tool webhook protocol of docs/webhooks.md: body `{"tool", "params",
  "conversation_id", "idempotency_key"}` signed per Standard Webhooks (`webhook-id`,
  `webhook-timestamp`, `webhook-signature`); a missing or bad signature is answered 401 and
  runs nothing. Replies `{"ok": true, "result": {...}}` or `{"ok": false, "code", "error"}`. A
  retry with the same idempotency key gets the first reply again, and changes nothing twice.
- `/mcp` — the official `mcp` SDK's low-level server over streamable HTTP, the tools listed
  with the same JSON Schemas (and read-only / destructive hints). Bearer token required.
- `POST /reset`, `GET /state` — the harness's own: back to the seed world, and the world now
  (`{"digest", "world"}`). Bearer token required.

`tenant_file(...)` writes the tenant file that registers these tools for a GuideDesk client.

    python -m apps.certify.retail.server --seed 42 --port 8765   # prints its URLs and secrets
"""

from __future__ import annotations

import argparse
import base64
import json
import secrets
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Self

import mcp_types
from mcp.server.lowlevel import Server
from mcp.server.transport_security import TransportSecuritySettings
from standardwebhooks.webhooks import Webhook, WebhookVerificationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from apps.certify.retail.tools import TOOLS, Reply, call
from apps.certify.retail.world import World, generate
from apps.platform.local_server import LOCALHOST, Serving, UvicornThread

POLICY_FILE = Path(__file__).with_name("policy.md")
SECRET_PREFIX = "whsec_"  # noqa: S105 (the Standard Webhooks prefix, not a secret)
MAX_BODY_BYTES = 256 * 1024


def new_webhook_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def _verifier(secret: str) -> Webhook:
    """GuideDesk's key rule (docs/webhooks.md): the base64 part of a `whsec_` secret, else the
    secret's own bytes."""
    return Webhook(secret if secret.startswith(SECRET_PREFIX) else secret.encode())


class RetailRuntime:
    """One run's world: the seed's world, changed by tool calls, reset to the seed on demand."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.initial = generate(seed)
        self.lock = threading.Lock()
        self.world: World = self.initial.copy()
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._replies: dict[str, Reply] = {}

    def reset(self) -> None:
        with self.lock:
            self.world = self.initial.copy()
            self.calls = []
            self._replies = {}

    def call(self, name: str, params: dict[str, Any], idempotency_key: str = "") -> Reply:
        with self.lock:
            if idempotency_key and idempotency_key in self._replies:
                return self._replies[idempotency_key]
            self.calls.append((name, params))
            reply = call(self.world, name, params)
            if idempotency_key:
                self._replies[idempotency_key] = reply
            return reply

    def snapshot(self) -> World:
        with self.lock:
            return self.world.copy()


# --- the webhook --------------------------------------------------------------------------------


def _webhook_endpoint(
    runtime: RetailRuntime, secret: str
) -> Callable[[Request], Awaitable[Response]]:
    verifier = _verifier(secret)

    async def webhook(request: Request) -> Response:
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            return JSONResponse(
                {"ok": False, "error": "The request is too large."}, status_code=413
            )
        try:
            verifier.verify(body, dict(request.headers))
        except WebhookVerificationError:
            return JSONResponse({"ok": False, "error": "Invalid signature."}, status_code=401)
        try:
            data = json.loads(body)
        except ValueError:
            return JSONResponse({"ok": False, "error": "The body is not JSON."}, status_code=400)
        if not isinstance(data, dict) or not isinstance(data.get("tool"), str):
            return JSONResponse({"ok": False, "error": 'No "tool" named.'}, status_code=400)
        params = data.get("params")
        params = params if isinstance(params, dict) else {}
        key = str(data.get("idempotency_key") or request.headers.get("webhook-id", ""))
        return JSONResponse(runtime.call(data["tool"], params, key))

    return webhook


def _admin_endpoints(runtime: RetailRuntime) -> list[Route]:
    async def reset(request: Request) -> Response:
        runtime.reset()
        return JSONResponse({"ok": True, "digest": runtime.snapshot().digest()})

    async def state(request: Request) -> Response:
        world = runtime.snapshot()
        return JSONResponse({"digest": world.digest(), "world": world.to_dict()})

    return [Route("/reset", reset, methods=["POST"]), Route("/state", state, methods=["GET"])]


# --- MCP ----------------------------------------------------------------------------------------


def mcp_tools() -> list[mcp_types.Tool]:
    return [
        mcp_types.Tool(
            name=spec.name,
            description=spec.description,
            input_schema=spec.parameters,
            annotations=mcp_types.ToolAnnotations(
                read_only_hint=spec.kind == "read",
                destructive_hint=spec.destructive,
                open_world_hint=False,
            ),
        )
        for spec in TOOLS.values()
    ]


def mcp_server(runtime: RetailRuntime) -> Server[Any]:
    async def list_tools(ctx: Any, params: Any) -> mcp_types.ListToolsResult:
        return mcp_types.ListToolsResult(tools=mcp_tools())

    async def call_tool(
        ctx: Any, params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult:
        reply = runtime.call(params.name, dict(params.arguments or {}))
        if reply["ok"]:
            text = json.dumps(reply["result"], sort_keys=True)
            return mcp_types.CallToolResult(
                content=[mcp_types.TextContent(type="text", text=text)],
                structured_content=reply["result"],
            )
        if reply["code"] == "unknown_tool":
            # The SDK servers' wording, which MCP clients (GuideDesk's too) recognise.
            text = f"Unknown tool: {params.name}"
        else:
            text = json.dumps({"code": reply["code"], "error": reply["error"]})
        return mcp_types.CallToolResult(
            content=[mcp_types.TextContent(type="text", text=text)], is_error=True
        )

    def input_schema(name: str) -> dict[str, Any] | None:
        spec = TOOLS.get(name)
        return spec.parameters if spec else None

    return Server(
        "guidedesk-retail",
        instructions=POLICY_FILE.read_text(encoding="utf-8"),
        get_tool_input_schema=input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


class _BearerFor:
    """401 for a request under one of `prefixes` without the expected bearer token."""

    def __init__(self, app: ASGIApp, token: str, prefixes: tuple[str, ...]) -> None:
        self.app, self.expected, self.prefixes = app, f"Bearer {token}".encode(), prefixes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        guarded = scope["type"] == "http" and scope["path"].startswith(self.prefixes)
        if guarded and dict(scope["headers"]).get(b"authorization", b"") != self.expected:
            refusal = JSONResponse({"ok": False, "error": "Unauthorized."}, status_code=401)
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)


def retail_app(runtime: RetailRuntime, *, webhook_secret: str, token: str) -> ASGIApp:
    """The ASGI app: the webhook, the MCP endpoint and the harness's reset and state."""
    routes = [
        Route("/webhook", _webhook_endpoint(runtime, webhook_secret), methods=["POST"]),
        *_admin_endpoints(runtime),
    ]
    security = TransportSecuritySettings(allowed_hosts=["127.0.0.1:*", "localhost:*"])
    app = mcp_server(runtime).streamable_http_app(
        transport_security=security, custom_starlette_routes=routes
    )
    return _BearerFor(app, token, ("/mcp", "/reset", "/state"))


class RetailServer(Serving):
    """The retail app served by uvicorn in a background thread on 127.0.0.1."""

    def __init__(
        self,
        seed: int,
        *,
        port: int = 0,
        webhook_secret: str = "",
        token: str = "",
    ) -> None:
        self.runtime = RetailRuntime(seed)
        self.webhook_secret = webhook_secret or new_webhook_secret()
        self.token = token or secrets.token_urlsafe(24)
        app = retail_app(self.runtime, webhook_secret=self.webhook_secret, token=self.token)
        self.serving = UvicornThread(app, name="retail server", port=port)
        self.port = self.serving.port
        self.base_url = f"http://{LOCALHOST}:{self.port}"
        self.webhook_url = f"{self.base_url}/webhook"
        self.mcp_url = f"{self.base_url}/mcp"

    def start(self) -> Self:
        self.serving.start()
        return self

    def stop(self) -> None:
        self.serving.stop()


# --- the tenant file ----------------------------------------------------------------------------


def tenant_file(
    *,
    webhook_url: str,
    webhook_secret: str,
    mcp_url: str = "",
    mcp_token: str = "",
    slug: str = "retail-bench",
) -> dict[str, Any]:
    """A tenant file (docs/tenant-import.md) with one client whose tools are the retail tools:
    as webhook tools, or — with `mcp_url` — as the tools of an MCP server named `retail` (listed
    after the import, disabled until staff enable them, as for any MCP server)."""
    client: dict[str, Any] = {
        "slug": slug,
        "name": "Retail back office (certificate)",
        "plan": "certify",
        "language": "en",
        "business_info": {
            "about": {"description": "An outdoor-gear shop's back office for the certificate."},
            "ai_instructions": POLICY_FILE.read_text(encoding="utf-8"),
        },
    }
    if mcp_url:
        client["mcp_servers"] = [
            {"name": "retail", "url": mcp_url, "auth": {"type": "bearer", "token": mcp_token}}
        ]
    else:
        client["tools"] = [
            {
                "name": spec.name,
                "description": spec.description,
                "kind": spec.kind,
                "enabled": True,
                "parameters": spec.parameters,
                "executor": {
                    "type": "webhook",
                    "url": webhook_url,
                    "secret": webhook_secret,
                    "timeout": 10,
                    "retries": 2,
                },
            }
            for spec in TOOLS.values()
        ]
    return {
        "plans": [{"slug": "certify", "name": "Certificate", "ai_mode": "adaptive"}],
        "clients": [client],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve the retail world (webhook and MCP).")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--tenant-file", type=Path, help="also write the tenant file here")
    args = parser.parse_args()
    server = RetailServer(args.seed, port=args.port)
    urls = {
        "webhook_url": server.webhook_url,
        "webhook_secret": server.webhook_secret,
        "mcp_url": server.mcp_url,
        "token": server.token,
    }
    if args.tenant_file:
        document = tenant_file(webhook_url=server.webhook_url, webhook_secret=server.webhook_secret)
        args.tenant_file.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(urls, indent=1), flush=True)  # noqa: T201 (the command's output)
    server.start()
    try:
        server.serving.wait()
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
