"""The retail world served for real: the webhook through signed HTTP calls (and a bad
signature), the MCP server listed and called through the official `mcp` client."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from datetime import UTC, datetime
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from standardwebhooks.webhooks import Webhook

from apps.certify.retail.grade import grade
from apps.certify.retail.server import RetailServer, tenant_file
from apps.certify.retail.tasks import Action, load_tasks
from apps.certify.retail.tools import TOOLS
from apps.certify.retail.world import Order, World, from_dict
from tests.certify.conftest import pending_order


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _signed(secret: str, payload: dict[str, Any], key: str) -> tuple[bytes, dict[str, str]]:
    """What GuideDesk's webhook executor sends (docs/webhooks.md)."""
    body = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()
    now = datetime.now(tz=UTC)
    signature = Webhook(secret).sign(msg_id=key, timestamp=now, data=body.decode())
    return body, {
        "Content-Type": "application/json",
        "Idempotency-Key": key,
        "webhook-id": key,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": signature,
    }


def _cancel_payload(order: Order, key: str) -> dict[str, Any]:
    return {
        "tool": "cancel_pending_order",
        "params": {"order_id": order.order_id, "reason": "ordered by mistake"},
        "conversation_id": "c-1",
        "idempotency_key": key,
    }


def test_a_signed_webhook_call_runs_the_tool_once(server: RetailServer) -> None:
    order = pending_order(server)
    body, headers = _signed(server.webhook_secret, _cancel_payload(order, "key-1"), "key-1")
    status, reply = _post(server.webhook_url, body, headers)
    assert status == 200
    assert reply["ok"] is True
    assert reply["result"]["status"] == "cancelled"
    assert server.runtime.snapshot().orders[order.order_id].status == "cancelled"
    after_first = server.runtime.snapshot().digest()

    # A retry with the same idempotency key gets the same reply and refunds nothing twice.
    body, headers = _signed(server.webhook_secret, _cancel_payload(order, "key-1"), "key-1")
    assert _post(server.webhook_url, body, headers) == (200, reply)
    assert server.runtime.snapshot().digest() == after_first

    # A new call on the cancelled order is refused, with a code.
    body, headers = _signed(server.webhook_secret, _cancel_payload(order, "key-2"), "key-2")
    status, refused = _post(server.webhook_url, body, headers)
    assert status == 200
    assert refused["ok"] is False
    assert refused["code"] == "order_not_pending"
    assert refused["error"]


def test_a_bad_signature_is_refused_and_changes_nothing(server: RetailServer) -> None:
    order = pending_order(server)
    before = server.runtime.snapshot().digest()
    body, headers = _signed(server.webhook_secret, _cancel_payload(order, "key-3"), "key-3")
    # Signed with another secret.
    _, forged = _signed(
        "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=", _cancel_payload(order, "key-3"), "key-3"
    )
    assert _post(server.webhook_url, body, forged)[0] == 401
    # The right signature over another body (a different order).
    tampered = body.replace(order.order_id.encode(), b"#W0000000")
    assert _post(server.webhook_url, tampered, headers)[0] == 401
    # No signature at all.
    status, reply = _post(server.webhook_url, body, {"Content-Type": "application/json"})
    assert status == 401
    assert reply["ok"] is False
    assert server.runtime.snapshot().digest() == before
    assert server.runtime.calls == []


def test_reset_and_state_need_the_token_and_restore_the_seed_world(server: RetailServer) -> None:
    order = pending_order(server)
    body, headers = _signed(server.webhook_secret, _cancel_payload(order, "key-4"), "key-4")
    assert _post(server.webhook_url, body, headers)[1]["ok"] is True
    assert _post(f"{server.base_url}/reset", b"", {})[0] == 401
    assert server.runtime.snapshot().orders[order.order_id].status == "cancelled"

    auth = {"Authorization": f"Bearer {server.token}"}
    status, reply = _post(f"{server.base_url}/reset", b"", auth)
    assert status == 200
    assert reply["digest"] == server.runtime.initial.digest()
    request = urllib.request.Request(f"{server.base_url}/state", headers=auth)
    with urllib.request.urlopen(request, timeout=10) as response:
        state = json.loads(response.read())
    assert state["digest"] == server.runtime.initial.digest()
    assert state["world"]["orders"][order.order_id]["status"] == "pending"


def _mcp(server: RetailServer, token: str, job: Any) -> Any:
    async def run() -> Any:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=10)
        async with http:
            transport = streamable_http_client(server.mcp_url, http_client=http)
            async with Client(transport) as client:
                return await job(client)

    return anyio.run(run)


def test_mcp_lists_the_same_tools_and_schemas(server: RetailServer) -> None:
    async def job(client: Client) -> Any:
        return (await client.list_tools()).tools

    listed = {tool.name: tool for tool in _mcp(server, server.token, job)}
    assert sorted(listed) == sorted(TOOLS)
    for name, spec in TOOLS.items():
        assert listed[name].input_schema == spec.parameters
        assert listed[name].description == spec.description
        assert listed[name].annotations is not None
        assert bool(listed[name].annotations.destructive_hint) == spec.destructive
        assert bool(listed[name].annotations.read_only_hint) == (spec.kind == "read")


def test_mcp_calls_change_the_same_world(server: RetailServer) -> None:
    order = pending_order(server)
    user = server.runtime.initial.users[order.user_id]

    async def job(client: Client) -> Any:
        found = await client.call_tool("get_user_details", {"email": user.email})
        cancelled = await client.call_tool(
            "cancel_pending_order", {"order_id": order.order_id, "reason": "no longer needed"}
        )
        again = await client.call_tool(
            "cancel_pending_order", {"order_id": order.order_id, "reason": "no longer needed"}
        )
        return found, cancelled, again

    found, cancelled, again = _mcp(server, server.token, job)
    assert not found.is_error
    assert found.structured_content["user_id"] == user.user_id
    assert order.order_id in found.structured_content["orders"]
    assert not cancelled.is_error
    assert cancelled.structured_content["status"] == "cancelled"
    assert server.runtime.snapshot().orders[order.order_id].status == "cancelled"
    assert again.is_error
    assert json.loads(again.content[0].text)["code"] == "order_not_pending"


def test_mcp_without_the_token_is_refused(server: RetailServer) -> None:
    async def job(client: Client) -> Any:
        return await client.list_tools()

    with pytest.raises(Exception):  # noqa: B017, PT011 (the SDK wraps the 401 its own way)
        _mcp(server, "wrong-token", job)
    assert _post(server.mcp_url, b"{}", {"Content-Type": "application/json"})[0] == 401
    assert server.runtime.calls == []


def test_the_tenant_file_registers_the_tools_as_webhooks() -> None:
    document = tenant_file(webhook_url="https://retail.example/webhook", webhook_secret="whsec_x")
    tools = document["clients"][0]["tools"]
    assert [t["name"] for t in tools] == list(TOOLS)
    assert {t["kind"] for t in tools if t["name"].startswith("cancel")} == {"destructive"}
    assert all(t["executor"]["url"] == "https://retail.example/webhook" for t in tools)
    with_mcp = tenant_file(
        webhook_url="", webhook_secret="", mcp_url="https://retail.example/mcp", mcp_token="t"
    )
    assert with_mcp["clients"][0]["mcp_servers"][0]["url"] == "https://retail.example/mcp"
    assert "tools" not in with_mcp["clients"][0]


def _served_world(server: RetailServer) -> World:
    request = urllib.request.Request(
        f"{server.base_url}/state", headers={"Authorization": f"Bearer {server.token}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return from_dict(json.loads(response.read())["world"])


def test_a_task_done_over_mcp_is_graded_from_the_served_state(server: RetailServer) -> None:
    """The loop the certificate runs: an agent acts through MCP, the grader reads /state."""
    seed, _, tasks = load_tasks()
    assert seed == server.runtime.seed
    task = next(t for t in tasks if "two_orders" in t.tags and len(t.actions) == 2)
    said = "Refunds: " + ", ".join(task.outputs)

    def act(actions: list[Action]) -> None:
        async def job(client: Client) -> None:
            for action in actions:
                reply = await client.call_tool(action.name, action.params)
                assert not reply.is_error, reply.content

        _mcp(server, server.token, job)

    act(task.actions)
    right = grade(server.runtime.initial, _served_world(server), said, task)
    assert right.passed, right.reasons

    # The same run with only the first of the two requests done fails, naming the order.
    _post(f"{server.base_url}/reset", b"", {"Authorization": f"Bearer {server.token}"})
    act(task.actions[:1])
    half = grade(server.runtime.initial, _served_world(server), said, task)
    assert not half.passed
    assert any(task.actions[1].params["order_id"] in r for r in half.reasons)
