"""The MCP client (apps/tools/mcp_client.py) against a real MCP server (tests/tools/mcp_server.py)
and a tiny OAuth token endpoint."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from apps.core import deadlines
from apps.tools import mcp_client
from apps.tools.mcp_client import (
    McpError,
    mcp_call_tool,
    mcp_list_tools,
    mcp_oauth_token,
)
from tests.support.http_handler import QuietHandler
from tests.tools.mcp_server import INJECTION_DESCRIPTION, PINNED_TEST_HOST, McpTestServer


@pytest.fixture(autouse=True)
def _local_network(settings: Any) -> None:
    settings.TOOL_WEBHOOK_ALLOW_HTTP = True
    settings.TOOL_WEBHOOK_ALLOW_PRIVATE_NETWORKS = True


def _auth(server: McpTestServer) -> dict[str, str]:
    return {"Authorization": f"Bearer {server.token}"}


def _call(
    server: McpTestServer, tool: str, *, timeout: float = 10, **arguments: Any
) -> mcp_client.McpCallResult:
    return mcp_call_tool(
        url=server.url, headers=_auth(server), name=tool, arguments=arguments, timeout=timeout
    )


def _list(server: McpTestServer, url: str | None = None) -> list[mcp_client.McpToolSpec]:
    return mcp_list_tools(url=url or server.url, headers=_auth(server), timeout=10)


def test_lists_tools_with_schemas_and_descriptions(mcp_server: McpTestServer) -> None:
    tools = {t.name: t for t in _list(mcp_server)}

    assert set(tools) == {
        "get_order_status",
        "cancel_order",
        "lookup_customer_orders",
        "shipping_rates",
        "slow_report",
        "huge_report",
    }
    status = tools["get_order_status"]
    assert status.description == "The status of an order."
    assert status.input_schema["type"] == "object"
    assert status.input_schema["required"] == ["order_id"]
    assert status.input_schema["properties"]["order_id"]["type"] == "string"
    cancel = tools["cancel_order"].input_schema
    assert cancel["required"] == ["order_id"]
    assert cancel["properties"]["reason"]["default"] == ""
    # The description is the server's text, passed on as is (the caller decides how to treat it).
    assert tools["shipping_rates"].description == INJECTION_DESCRIPTION
    assert mcp_server.calls == []


def test_read_tool_returns_structured_content(mcp_server: McpTestServer) -> None:
    outcome = _call(mcp_server, "get_order_status", order_id="A-1001")

    assert outcome.is_error is False
    assert outcome.result == {"order_id": "A-1001", "status": "shipped"}
    assert outcome.size == len(json.dumps(outcome.result, separators=(",", ":")).encode())
    assert mcp_server.calls == [("get_order_status", {"order_id": "A-1001"})]


def test_destructive_tool_changes_the_orders(mcp_server: McpTestServer) -> None:
    outcome = _call(mcp_server, "cancel_order", order_id="A-1002", reason="changed my mind")

    assert outcome.result == {"order_id": "A-1002", "status": "cancelled"}
    assert mcp_server.orders["A-1002"] == "cancelled"
    assert mcp_server.orders["A-1001"] == "shipped"
    assert mcp_server.calls == [
        ("cancel_order", {"order_id": "A-1002", "reason": "changed my mind"})
    ]


def test_customer_scoped_tool_gets_the_customer_id(mcp_server: McpTestServer) -> None:
    outcome = _call(mcp_server, "lookup_customer_orders", customer_id="cust-2")

    assert outcome.result == {
        "customer_id": "cust-2",
        "orders": [{"order_id": "B-2001", "status": "delivered"}],
    }


def test_text_result_without_structured_content(mcp_server: McpTestServer) -> None:
    def greet(name: str) -> list[str]:
        return [f"Hello {name}", "Bye"]

    mcp_server.mcp.add_tool(greet, name="greet", structured_output=False)

    outcome = _call(mcp_server, "greet", name="Ann")

    assert outcome.result == {"text": "Hello Ann\nBye"}


def test_tool_error_is_an_error_result(mcp_server: McpTestServer) -> None:
    def broken(order_id: str) -> str:
        raise ToolError(f"order {order_id} is locked")

    mcp_server.add_tool("broken", "Always fails.", broken)

    outcome = _call(mcp_server, "broken", order_id="A-1")

    assert outcome.is_error is True
    assert "order A-1 is locked" in outcome.result["text"]


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong-token-value"}])
def test_missing_or_wrong_token_is_auth(mcp_server: McpTestServer, headers: dict[str, str]) -> None:
    with pytest.raises(McpError) as caught:
        mcp_list_tools(url=mcp_server.url, headers=headers, timeout=10)

    assert caught.value.kind == "auth"
    assert "wrong-token-value" not in str(caught.value)
    assert mcp_server.requests >= 1
    assert mcp_server.calls == []


def test_hanging_tool_times_out(mcp_server: McpTestServer) -> None:
    started = time.monotonic()
    with pytest.raises(McpError) as caught:
        _call(mcp_server, "slow_report", timeout=1.5)

    assert caught.value.kind == "timeout"
    assert time.monotonic() - started < 1.5 + 2
    assert [name for name, _ in mcp_server.calls] == ["slow_report"]


def test_deadline_cuts_the_timeout(mcp_server: McpTestServer) -> None:
    started = time.monotonic()
    with deadlines.deadline_scope(1.0), pytest.raises(McpError) as caught:
        _call(mcp_server, "slow_report", timeout=30)

    assert caught.value.kind == "timeout"
    assert time.monotonic() - started < 1.0 + 2


def test_huge_result_is_too_large(mcp_server: McpTestServer) -> None:
    with pytest.raises(McpError) as caught:
        _call(mcp_server, "huge_report")

    assert caught.value.kind == "too_large"


def test_result_over_max_bytes_is_too_large(mcp_server: McpTestServer) -> None:
    with pytest.raises(McpError) as caught:
        mcp_call_tool(
            url=mcp_server.url,
            headers=_auth(mcp_server),
            name="get_order_status",
            arguments={"order_id": "A-1001"},
            timeout=10,
            max_bytes=20,
        )

    assert caught.value.kind == "too_large"


def test_added_and_removed_tools_show_in_the_next_listing(mcp_server: McpTestServer) -> None:
    def refund_order(order_id: str, amount_cents: int) -> dict[str, Any]:
        return {"order_id": order_id, "refunded": amount_cents}

    mcp_server.add_tool("refund_order", "Refund part of an order.", refund_order)
    mcp_server.remove_tool("shipping_rates")

    tools = {t.name: t for t in _list(mcp_server)}

    assert "shipping_rates" not in tools
    assert tools["refund_order"].description == "Refund part of an order."
    assert tools["refund_order"].input_schema["properties"]["amount_cents"]["type"] == "integer"
    assert _call(mcp_server, "refund_order", order_id="A-1", amount_cents=250).result == {
        "order_id": "A-1",
        "refunded": 250,
    }


def test_private_address_is_refused_before_connecting(
    mcp_server: McpTestServer, settings: Any
) -> None:
    settings.TOOL_WEBHOOK_ALLOW_PRIVATE_NETWORKS = False

    for call in (
        lambda: _list(mcp_server),
        lambda: _call(mcp_server, "cancel_order", order_id="A-1001"),
    ):
        with pytest.raises(McpError) as caught:
            call()
        assert caught.value.kind == "address"

    assert mcp_server.requests == 0
    assert mcp_server.calls == []
    assert mcp_server.orders["A-1001"] == "shipped"


def test_plain_http_is_refused_unless_allowed(mcp_server: McpTestServer, settings: Any) -> None:
    settings.TOOL_WEBHOOK_ALLOW_HTTP = False

    with pytest.raises(McpError) as caught:
        _list(mcp_server)

    assert caught.value.kind == "address"
    assert "https" in caught.value.message
    assert mcp_server.requests == 0


def test_connection_is_pinned_to_the_checked_address(
    mcp_server: McpTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host name is never resolved again after the check: a name that does not resolve at
    all reaches the server at the checked address, and the Host header keeps the name."""
    checked: list[str] = []

    def check(url: str, **_: Any) -> tuple[list[str], str]:
        checked.append(url)
        return ["127.0.0.1"], ""

    monkeypatch.setattr(mcp_client, "checked_addresses", check)
    url = f"http://{PINNED_TEST_HOST}:{mcp_server.port}/mcp"

    tools = _list(mcp_server, url)

    assert checked == [url]
    assert "get_order_status" in {t.name for t in tools}
    assert mcp_server.hosts
    assert set(mcp_server.hosts) == {f"{PINNED_TEST_HOST}:{mcp_server.port}"}


def test_unknown_tool(mcp_server: McpTestServer) -> None:
    with pytest.raises(McpError) as caught:
        _call(mcp_server, "delete_everything")

    assert caught.value.kind == "unknown_tool"
    assert mcp_server.calls == []


def test_not_an_mcp_endpoint_is_protocol(mcp_server: McpTestServer) -> None:
    with pytest.raises(McpError) as caught:
        _list(mcp_server, mcp_server.url.replace("/mcp", "/elsewhere"))

    assert caught.value.kind == "protocol"


def test_closed_port_is_connection(mcp_server: McpTestServer) -> None:
    mcp_server.stop()

    with pytest.raises(McpError) as caught:
        _list(mcp_server)

    assert caught.value.kind == "connection"


def test_no_threads_left_behind(mcp_server: McpTestServer) -> None:
    before = set(threading.enumerate())

    _list(mcp_server)
    with pytest.raises(McpError):
        _call(mcp_server, "slow_report", timeout=1)

    # (The calls above run no sync tool, so the server started no worker thread either.)
    assert set(threading.enumerate()) - before == set()


# --- OAuth client credentials ------------------------------------------------------------------


class _TokenEndpoint:
    """A token endpoint in a thread: accepts one client id and secret, records the forms."""

    CLIENT_ID = "guidedesk"
    CLIENT_SECRET = "s3cret-value"

    def __init__(self) -> None:
        self.forms: list[dict[str, list[str]]] = []
        endpoint = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                form = parse_qs(self.rfile.read(length).decode())
                endpoint.forms.append(form)
                good = (
                    self.headers.get("Content-Type") == "application/x-www-form-urlencoded"
                    and form.get("grant_type") == ["client_credentials"]
                    and form.get("client_id") == [endpoint.CLIENT_ID]
                    and form.get("client_secret") == [endpoint.CLIENT_SECRET]
                )
                if good:
                    status, body = (
                        200,
                        {
                            "access_token": "tok-123",
                            "expires_in": 3600,
                            "token_type": "Bearer",
                        },
                    )
                else:
                    status, body = 401, {"error": "invalid_client"}
                self.answer_json(status, body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/oauth/token"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)


@pytest.fixture
def token_endpoint() -> Iterator[_TokenEndpoint]:
    endpoint = _TokenEndpoint()
    endpoint.thread.start()
    try:
        yield endpoint
    finally:
        endpoint.httpd.shutdown()
        endpoint.httpd.server_close()
        endpoint.thread.join(timeout=5)


def test_oauth_client_credentials(token_endpoint: _TokenEndpoint) -> None:
    token, expires_in = mcp_oauth_token(
        token_url=token_endpoint.url,
        client_id=_TokenEndpoint.CLIENT_ID,
        client_secret=_TokenEndpoint.CLIENT_SECRET,
        scope="orders:read orders:write",
        timeout=5,
    )

    assert (token, expires_in) == ("tok-123", 3600)
    assert token_endpoint.forms == [
        {
            "grant_type": ["client_credentials"],
            "client_id": [_TokenEndpoint.CLIENT_ID],
            "client_secret": [_TokenEndpoint.CLIENT_SECRET],
            "scope": ["orders:read orders:write"],
        }
    ]


def test_oauth_refusal_is_auth(token_endpoint: _TokenEndpoint) -> None:
    with pytest.raises(McpError) as caught:
        mcp_oauth_token(
            token_url=token_endpoint.url,
            client_id=_TokenEndpoint.CLIENT_ID,
            client_secret="wrong-secret",
            scope="",
            timeout=5,
        )

    assert caught.value.kind == "auth"
    assert "wrong-secret" not in str(caught.value)
    assert "scope" not in token_endpoint.forms[0]


def test_oauth_private_endpoint_is_refused(token_endpoint: _TokenEndpoint, settings: Any) -> None:
    settings.TOOL_WEBHOOK_ALLOW_PRIVATE_NETWORKS = False

    with pytest.raises(McpError) as caught:
        mcp_oauth_token(
            token_url=token_endpoint.url,
            client_id="x",
            client_secret="y",
            scope="",
            timeout=5,
        )

    assert caught.value.kind == "address"
    assert token_endpoint.forms == []


def test_server_error_texts_lose_header_values() -> None:
    text = mcp_client._scrub(
        "bad   token Bearer abcdefghijk\n(abcdefghijk)", ["Bearer abcdefghijk", "short"]
    )

    assert "abcdefghijk" not in text
    assert text == "bad token *** (***)"
