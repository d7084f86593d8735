"""A small synchronous client for a business's MCP servers (Model Context Protocol, streamable
HTTP transport), on the official `mcp` SDK: list the tools, call one, and get an OAuth 2
client-credentials token for servers that want one.

Bounds:
- `timeout` is a hard wall-clock limit for the whole operation (connect, protocol handshake,
  the request and the session's close), cut further by the enclosing deadline
  (`apps.core.deadlines`); when it runs out the work is cancelled and `McpError("timeout")` is
  raised, whatever the server does.
- Bytes read from the server are capped per operation (the transport stops reading), and a tool
  result whose JSON is larger than `max_bytes` is refused (`McpError("too_large")`). Responses
  are asked for uncompressed, so the cap counts what is parsed.
- Redirects are not followed (the SDK follows same-origin ones itself; those reuse the pinned
  address), nor are proxy settings from the environment used.

SSRF rule (the tool webhooks' one, `apps.platform.netguard`): the URL's host is resolved once
and, unless `TOOL_WEBHOOK_ALLOW_PRIVATE_NETWORKS` is on, every address must be public; https is
required unless `TOOL_WEBHOOK_ALLOW_HTTP` is on. The TCP connection is then pinned to the first
checked address (our network backend connects there instead of resolving the host again), so a
DNS rebinding answer cannot redirect it, while the URL keeps the hostname — the Host header, TLS
SNI and certificate verification are those of the hostname.

The functions are synchronous: each runs its own event loop (`anyio.run`) in the calling thread
and closes every connection before it returns. Call them from sync code (worker threads), never
from inside a running event loop. Error messages are short and never contain header values.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpcore2
import httpx2
import mcp_types
from django.conf import settings
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from apps.core import deadlines
from apps.platform.http import CONNECT_TO, wall_clock_client
from apps.platform.netguard import checked_addresses

__all__ = [
    "McpCallResult",
    "McpError",
    "McpToolSpec",
    "mcp_call_tool",
    "mcp_list_tools",
    "mcp_oauth_token",
]

USER_AGENT = "GuideDesk-MCP/1"
# What a tool listing may weigh on the wire, and how many pages we follow.
MAX_LIST_BYTES = 4 * 1024 * 1024
MAX_LIST_PAGES = 20
# Room on the wire beyond a call's `max_bytes`: the protocol envelope, and the text copy of a
# structured result that servers send alongside it.
WIRE_OVERHEAD_BYTES = 256 * 1024
MAX_TOKEN_RESPONSE_BYTES = 64 * 1024
# An OAuth token response without `expires_in`: assume a short life and fetch again soon.
DEFAULT_TOKEN_SECONDS = 300
MAX_MESSAGE_CHARS = 200

ERROR_KINDS = frozenset(
    {"address", "timeout", "connection", "auth", "protocol", "too_large", "unknown_tool"}
)


@dataclass(frozen=True)
class McpToolSpec:
    name: str
    description: str  # "" when the server gives none
    input_schema: dict[str, Any]  # the tool's inputSchema (a JSON Schema object)


@dataclass(frozen=True)
class McpCallResult:
    is_error: bool  # the server's isError
    # structuredContent when the server gives it (a dict), else {"text": <text contents joined>}
    result: dict[str, Any]
    size: int  # bytes of `result` as JSON


class McpError(Exception):
    """Why an MCP operation failed. `kind` is one of `ERROR_KINDS`: "address" (SSRF refusal),
    "timeout", "connection", "auth" (401/403, or an OAuth refusal), "protocol" (a bad answer, or
    not an MCP server), "too_large", "unknown_tool"."""

    def __init__(self, kind: str, message: str) -> None:
        if kind not in ERROR_KINDS:
            raise ValueError(f"unknown McpError kind {kind!r}")
        super().__init__(message)
        self.kind = kind
        self.message = message

    def __repr__(self) -> str:
        return f"McpError({self.kind!r}, {self.message!r})"


# --- the HTTP layer: pinned address, capped reads, the statuses seen -------------------------


@dataclass
class _Exchange:
    """What the transport saw during one operation (read after it fails, to name the cause)."""

    cap: int
    received: int = 0
    too_large: bool = False
    auth_status: int | None = None
    statuses: list[int] = field(default_factory=list)


class _PinnedBackend(httpcore2.AsyncNetworkBackend):
    """Connects every TCP connection to the checked address instead of resolving the host."""

    def __init__(self, inner: httpcore2.AsyncNetworkBackend, address: str) -> None:
        self._inner, self._address = inner, address

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        return await self._inner.connect_tcp(
            self._address, port, timeout, local_address, socket_options
        )

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        raise httpcore2.ConnectError("unix sockets are not allowed")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _CappedBody(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, exchange: _Exchange) -> None:
        self._inner, self._exchange = inner, exchange

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._exchange.received += len(chunk)
            if self._exchange.received > self._exchange.cap:
                self._exchange.too_large = True
                raise httpx2.ReadError("the MCP server sent more than the allowed bytes")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _GuardedTransport(httpx2.AsyncHTTPTransport):
    def __init__(self, *, address: str | None, exchange: _Exchange) -> None:
        super().__init__(retries=0)
        self._exchange = exchange
        if address is not None:
            # httpcore2 asks the pool's backend for each new connection; replacing it after
            # AsyncHTTPTransport built the pool (TLS, limits) is the seam apps.platform.http
            # uses for the sync webhooks too.
            pool: Any = self._pool
            pool._network_backend = _PinnedBackend(pool._network_backend, address)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await super().handle_async_request(request)
        self._exchange.statuses.append(response.status_code)
        if response.status_code in (401, 403):
            self._exchange.auth_status = response.status_code
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        return httpx2.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_CappedBody(response.stream, self._exchange),
            extensions=response.extensions,
        )


def _check_url(url: str, *, http_refusal: str = "MCP servers must use https.") -> str | None:
    """The address to pin the connection to (None: development, unresolvable host allowed),
    or McpError("address")."""
    addresses, refusal = checked_addresses(
        url,
        allow_private=settings.TOOL_WEBHOOK_ALLOW_PRIVATE_NETWORKS,
        allow_http=settings.TOOL_WEBHOOK_ALLOW_HTTP,
        http_refusal=http_refusal,
    )
    if refusal:
        raise McpError("address", refusal)
    return addresses[0] if addresses else None


def _time_allowed(timeout: float) -> float:
    try:
        allowed = deadlines.time_for(timeout)
    except deadlines.DeadlineExceeded:
        raise McpError("timeout", "No time left for the MCP server.") from None
    assert allowed is not None
    if allowed <= 0:
        raise McpError("timeout", "No time left for the MCP server.")
    return allowed


# --- running an operation and naming its failure -----------------------------------------------


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        found: list[BaseException] = []
        for inner in exc.exceptions:
            found.extend(_leaves(inner))
        return found
    return [exc]


def _scrub(text: str, secrets: Iterable[str]) -> str:
    for value in secrets:
        # The whole header value and each of its words ("Bearer <token>" -> the token too).
        for secret in sorted({value, *value.split()}, key=len, reverse=True):
            if len(secret) >= 8:
                text = text.replace(secret, "***")
    text = " ".join(text.split())
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 1] + "…"


def _unknown_tool_error(name: str, error: MCPError) -> bool:
    """Whether a JSON-RPC error answers a call to a tool the server does not have (the
    specification's answer is -32602 Invalid params naming the tool)."""
    if error.code not in (mcp_types.INVALID_PARAMS, mcp_types.METHOD_NOT_FOUND):
        return False
    text = error.message.lower()
    return name.lower() in text and ("unknown tool" in text or "not found" in text)


def _classify(
    exc: BaseException, exchange: _Exchange, secrets: Iterable[str], tool: str | None
) -> McpError:
    leaves = _leaves(exc)
    for leaf in leaves:
        if isinstance(leaf, McpError):
            return leaf
    if exchange.too_large:
        return McpError("too_large", f"The MCP server sent more than {exchange.cap} bytes.")
    if exchange.auth_status is not None:
        return McpError("auth", f"The MCP server refused the credentials ({exchange.auth_status}).")
    for leaf in leaves:
        if isinstance(leaf, TimeoutError | httpx2.TimeoutException):
            return McpError("timeout", "The MCP server did not answer in time.")
    for leaf in leaves:
        if isinstance(leaf, httpx2.TransportError | OSError):
            return McpError("connection", f"Cannot reach the MCP server ({type(leaf).__name__}).")
    for leaf in leaves:
        if isinstance(leaf, MCPError):
            if tool is not None and _unknown_tool_error(tool, leaf):
                return McpError("unknown_tool", f"The MCP server has no tool {tool!r}.")
            if leaf.code == mcp_types.METHOD_NOT_FOUND and 404 in exchange.statuses:
                return McpError("protocol", "No MCP server at this URL (404).")
            if leaf.code == mcp_types.INTERNAL_ERROR and any(s >= 400 for s in exchange.statuses):
                status = [s for s in exchange.statuses if s >= 400][-1]
                return McpError("protocol", f"The MCP server answered HTTP {status}.")
            message = _scrub(leaf.message, secrets)
            return McpError("protocol", f"MCP error {leaf.code}: {message}")
    first = leaves[0] if leaves else exc
    return McpError("protocol", f"Unexpected answer from the MCP server ({type(first).__name__}).")


@asynccontextmanager
async def _connect(
    url: str, headers: Mapping[str, str], address: str | None, exchange: _Exchange, timeout: float
) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(
        transport=_GuardedTransport(address=address, exchange=exchange),
        headers={"User-Agent": USER_AGENT, "Accept-Encoding": "identity", **headers},
        timeout=httpx2.Timeout(timeout),
        follow_redirects=False,
        trust_env=False,
    )
    async with http:
        transport = streamable_http_client(url, http_client=http, max_sse_event_size=exchange.cap)
        async with Client(transport, cache=None) as client:
            yield client


def _run[T](
    *,
    url: str,
    headers: Mapping[str, str],
    timeout: float,
    cap: int,
    tool: str | None,
    work: Callable[[Client], Awaitable[T]],
) -> T:
    address = _check_url(url)
    allowed = _time_allowed(timeout)
    exchange = _Exchange(cap=cap)

    async def operation() -> T:
        with anyio.fail_after(allowed):
            async with _connect(url, headers, address, exchange, allowed) as client:
                return await work(client)

    try:
        return anyio.run(operation)
    except McpError:
        raise
    except Exception as exc:  # every failure below the SDK, named by what the transport saw
        raise _classify(exc, exchange, headers.values(), tool) from None


# --- the operations ---------------------------------------------------------------------------


def mcp_list_tools(*, url: str, headers: Mapping[str, str], timeout: float) -> list[McpToolSpec]:
    """The tools the MCP server at `url` offers (all pages, up to `MAX_LIST_PAGES`)."""

    async def work(client: Client) -> list[McpToolSpec]:
        specs: list[McpToolSpec] = []
        cursor: str | None = None
        for _ in range(MAX_LIST_PAGES):
            page = await client.list_tools(cursor=cursor)
            for tool in page.tools:
                schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
                specs.append(McpToolSpec(tool.name, tool.description or "", dict(schema)))
            cursor = page.next_cursor
            if not cursor:
                break
        return specs

    return _run(url=url, headers=headers, timeout=timeout, cap=MAX_LIST_BYTES, tool=None, work=work)


def _result_of(call: mcp_types.CallToolResult) -> dict[str, Any]:
    if isinstance(call.structured_content, dict):
        return dict(call.structured_content)
    texts = [block.text for block in call.content if isinstance(block, mcp_types.TextContent)]
    return {"text": "\n".join(texts)}


def mcp_call_tool(
    *,
    url: str,
    headers: Mapping[str, str],
    name: str,
    arguments: dict[str, Any],
    timeout: float,
    max_bytes: int = 1024 * 1024,
) -> McpCallResult:
    """Call the tool `name` on the MCP server at `url`. A tool the server does not know is
    `McpError("unknown_tool")` when the server says so distinguishably (a JSON-RPC
    Invalid params / Method not found error naming it, or the SDK servers' isError text
    "Unknown tool: <name>"); any other failure the tool reports is an `is_error` result."""

    async def work(client: Client) -> mcp_types.CallToolResult:
        return await client.call_tool(name, arguments)

    call = _run(
        url=url,
        headers=headers,
        timeout=timeout,
        cap=2 * max_bytes + WIRE_OVERHEAD_BYTES,
        tool=name,
        work=work,
    )
    result = _result_of(call)
    if call.is_error and result == {"text": f"Unknown tool: {name}"}:
        raise McpError("unknown_tool", f"The MCP server has no tool {name!r}.")
    size = len(json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode())
    if size > max_bytes:
        raise McpError("too_large", f"The tool result is larger than {max_bytes} bytes.")
    return McpCallResult(is_error=bool(call.is_error), result=result, size=size)


def mcp_oauth_token(
    *, token_url: str, client_id: str, client_secret: str, scope: str, timeout: float
) -> tuple[str, int]:
    """An access token from an OAuth 2 client-credentials grant (RFC 6749 §4.4), with the client's
    credentials in the form body (client_secret_post): (access_token, expires_in seconds).
    The token endpoint passes the same address check as the MCP server and the connection is
    pinned the same way. A refusal (400/401/403) is `McpError("auth")`."""
    address = _check_url(token_url, http_refusal="OAuth token endpoints must use https.")
    allowed = _time_allowed(timeout)
    form = {"grant_type": "client_credentials", "client_id": client_id}
    form["client_secret"] = client_secret
    if scope:
        form["scope"] = scope
    extensions: dict[str, Any] = {CONNECT_TO: address} if address else {}
    try:
        with wall_clock_client(
            limit=allowed, follow_redirects=False, trust_env=False, timeout=allowed
        ) as http:
            request = http.build_request(
                "POST",
                token_url,
                data=form,
                headers={"Accept": "application/json", "User-Agent": USER_AGENT},
                extensions=extensions,
            )
            response = http.send(request, stream=True)
            try:
                body = b""
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > MAX_TOKEN_RESPONSE_BYTES:
                        raise McpError("too_large", "The token response is too large.")
                status = response.status_code
            finally:
                response.close()
    except httpx2.TimeoutException:
        raise McpError("timeout", "The token endpoint did not answer in time.") from None
    except httpx2.TransportError as exc:
        raise McpError(
            "connection", f"Cannot reach the token endpoint ({type(exc).__name__})."
        ) from None
    if status in (400, 401, 403):
        raise McpError("auth", f"The token endpoint refused the client credentials ({status}).")
    if status != 200:
        raise McpError("protocol", f"The token endpoint answered HTTP {status}.")
    try:
        data = json.loads(body)
    except ValueError:
        raise McpError("protocol", "The token response is not JSON.") from None
    token = data.get("access_token") if isinstance(data, dict) else None
    if not isinstance(token, str) or not token:
        raise McpError("protocol", "The token response has no access_token.")
    token_type = data.get("token_type", "Bearer")
    if not isinstance(token_type, str) or token_type.lower() != "bearer":
        raise McpError("protocol", "The token endpoint did not issue a bearer token.")
    expires_in = data.get("expires_in", DEFAULT_TOKEN_SECONDS)
    if isinstance(expires_in, str) and expires_in.isdigit():
        expires_in = int(expires_in)
    if not isinstance(expires_in, int) or isinstance(expires_in, bool) or expires_in <= 0:
        expires_in = DEFAULT_TOKEN_SECONDS
    return token, expires_in
