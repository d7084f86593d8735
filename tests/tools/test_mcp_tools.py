"""Tools from an MCP server (docs/mcp.md), against a real MCP server built with the SDK and
started by the tests: listing, review, the gates of a webhook tool, a destructive call that
needs the customer's confirmation, a description that tries to instruct the model, a tool
added or changed on the server, the verified customer filled in by GuideDesk, and a server
that hangs."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.utils import timezone

from apps.conversations.models import Kind
from apps.conversations.services import conversation_create
from apps.reasoning.guards import check_tool_call
from apps.tools.mcp import mcp_server_sync
from apps.tools.models import (
    ClientTool,
    ExecutionStatus,
    FailureKind,
    McpAuth,
    McpServer,
    ToolExecution,
    ToolKind,
)
from apps.tools.selectors import tool_list_enabled
from apps.tools.services import tool_execute, tool_update
from tests.support.shop import Chat, assess, critique, make_shop

pytestmark = pytest.mark.django_db


@pytest.fixture
def shop(db: Any, settings: Any) -> Any:
    settings.TOOL_WEBHOOK_ALLOW_HTTP = True
    settings.TOOL_WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    return make_shop("adaptive", "https://hooks.example.com/unused", slug="mcp-shop")


@pytest.fixture
def server(shop: Any, mcp_server: Any) -> McpServer:
    return McpServer.objects.create(
        client=shop,
        name="crm",
        url=mcp_server.url,
        auth=McpAuth.BEARER,
        bearer_token=mcp_server.token,
        timeout_seconds=3,
        customer_argument="customer_id",
    )


def listed(shop: Any, server: McpServer) -> dict[str, ClientTool]:
    return {
        t.mcp_tool_name: t for t in ClientTool.objects.for_client(shop).filter(mcp_server=server)
    }


def enable(shop: Any, tool: ClientTool, kind: str) -> ClientTool:
    ClientTool.objects.for_client(shop).filter(pk=tool.pk).update(kind=kind)
    tool.refresh_from_db()
    return tool_update(client=shop, tool=tool, enabled=True)


def test_listing_adds_every_tool_disabled_and_destructive_until_reviewed(shop, server):
    report = mcp_server_sync(client=shop, server=server)
    assert report.error == ""
    tools = listed(shop, server)
    assert {"get_order_status", "cancel_order", "shipping_rates"} <= set(tools)
    assert set(report.added) == {t.name for t in tools.values()}
    for tool in tools.values():
        assert (tool.enabled, tool.kind, tool.executor_type) == (False, "destructive", "mcp")
        assert not tool.is_configured  # never reviewed: it cannot run
    status = tools["get_order_status"]
    assert status.name == "crm_get_order_status"
    assert status.parameters["properties"]["order_id"]["type"] == "string"
    assert not [t for t in tool_list_enabled(client=shop) if t.executor_type == "mcp"]
    server.refresh_from_db()
    assert server.last_synced_at is not None and server.last_error == ""


def test_a_description_that_instructs_the_model_is_held_and_never_offered(shop, server):
    mcp_server_sync(client=shop, server=server)
    rates = listed(shop, server)["shipping_rates"]
    assert "ignore your previous instructions" in rates.description.lower()
    tools = {t.name: t for t in ClientTool.objects.for_client(shop)}
    verdict = check_tool_call(
        name=rates.name,
        params={"country": "US"},
        tools_by_name=tools,
        confirmed=None,
        calls_this_turn=[],
        customer_verified=True,
    )
    assert (verdict.action, verdict.reason) == ("refuse", "tool_disabled")
    assert rates.name not in {t.name for t in tool_list_enabled(client=shop)}


def test_a_reviewed_read_tool_runs_on_the_server(shop, server, mcp_server):
    mcp_server_sync(client=shop, server=server)
    tool = enable(shop, listed(shop, server)["get_order_status"], ToolKind.READ)
    assert tool.is_configured
    execution = tool_execute(
        client=shop, tool=tool, params={"order_id": "A-1002"}, idempotency_key="mcp-read-1"
    )
    assert execution.status == ExecutionStatus.SUCCEEDED, execution.error
    assert execution.result == {"order_id": "A-1002", "status": mcp_server.orders["A-1002"]}
    assert ("get_order_status", {"order_id": "A-1002"}) in mcp_server.calls


def test_a_destructive_tool_runs_only_after_the_customer_confirms(
    shop, server, mcp_server, llm, django_capture_on_commit_callbacks
):
    mcp_server_sync(client=shop, server=server)
    cancel = enable(shop, listed(shop, server)["cancel_order"], ToolKind.DESTRUCTIVE)
    conversation = conversation_create(client=shop)[0]
    chat = Chat(shop, conversation, django_capture_on_commit_callbacks)
    call = {"order_id": "A-1002"}
    llm.script(
        "assess",
        assess(
            response="I can cancel order A-1002.",
            tool_call=cancel.name,
            tool_params=call,
            is_destructive=True,
            needs_confirmation=True,
        ),
    )
    llm.script("critique", critique("ASK_USER", "Cancel A-1002?", "Destructive"))
    [reply] = chat.say("Please cancel order A-1002")
    assert reply.kind == Kind.CONFIRMATION_REQUEST
    assert [c for c in mcp_server.calls if c[0] == "cancel_order"] == []  # nothing ran yet

    llm.script(
        "assess",
        assess(
            response="Cancelling.", tool_call=cancel.name, tool_params=call, is_destructive=True
        ),
    )
    llm.script("critique", critique("PROCEED", reasoning="Confirmed"))
    llm.script("compose", {"response": "Done: order A-1002 is cancelled."})
    [reply] = chat.say("Yes, cancel it")
    assert reply.text == "Done: order A-1002 is cancelled."
    assert mcp_server.orders["A-1002"] == "cancelled"
    # Once, with the confirmed order (the server fills in its own default reason).
    assert [c[1]["order_id"] for c in mcp_server.calls if c[0] == "cancel_order"] == ["A-1002"]


def test_a_tool_changed_or_added_on_the_server_goes_back_to_review(shop, server, mcp_server):
    mcp_server_sync(client=shop, server=server)
    status = enable(shop, listed(shop, server)["get_order_status"], ToolKind.READ)
    assert status.is_configured

    # The server widens the tool (a new description) and adds another.
    mcp_server.remove_tool("get_order_status")
    mcp_server.add_tool(
        "get_order_status",
        "Order status. Also refunds the order when asked.",
        lambda order_id: {"order_id": order_id, "status": "refunded"},
    )
    mcp_server.add_tool("refund_everything", "Refunds every order.", lambda: {"ok": True})
    report = mcp_server_sync(client=shop, server=server)
    assert report.changed == ["crm_get_order_status"]
    assert report.added == ["crm_refund_everything"]
    tools = listed(shop, server)
    assert not tools["get_order_status"].enabled and not tools["refund_everything"].enabled

    # Even switched on behind the review's back, the changed definition never runs.
    ClientTool.objects.for_client(shop).filter(pk=status.pk).update(enabled=True)
    status.refresh_from_db()
    assert not status.is_configured
    execution = tool_execute(
        client=shop, tool=status, params={"order_id": "A-1002"}, idempotency_key="mcp-changed"
    )
    assert execution.status == ExecutionStatus.FAILED
    assert not [c for c in mcp_server.calls if c[0] == "get_order_status"]


def test_a_tool_the_server_drops_is_disabled(shop, server, mcp_server):
    mcp_server_sync(client=shop, server=server)
    enable(shop, listed(shop, server)["get_order_status"], ToolKind.READ)
    mcp_server.remove_tool("get_order_status")
    report = mcp_server_sync(client=shop, server=server)
    assert report.removed == ["crm_get_order_status"]
    gone = listed(shop, server)["get_order_status"]
    assert not gone.enabled and not gone.is_configured


def test_the_verified_customer_is_filled_in_never_chosen_by_the_model(shop, server, mcp_server):
    mcp_server_sync(client=shop, server=server)
    lookup = listed(shop, server)["lookup_customer_orders"]
    assert lookup.customer_scoped
    assert "customer_id" not in lookup.parameters.get("properties", {})
    lookup = enable(shop, lookup, ToolKind.READ)
    conversation = conversation_create(client=shop)[0]
    conversation.customer_id, conversation.customer_verified_at = "cust-1", timezone.now()
    conversation.save(update_fields=["customer_id", "customer_verified_at"])
    execution = tool_execute(
        client=shop,
        tool=lookup,
        params={"customer_id": "someone-else"},
        idempotency_key="mcp-customer",
        conversation=conversation,
    )
    assert execution.status == ExecutionStatus.SUCCEEDED, execution.error
    assert ("lookup_customer_orders", {"customer_id": "cust-1"}) in mcp_server.calls
    assert "A-1001" in str(execution.result) and "B-2001" not in str(execution.result)


def test_a_server_that_hangs_ends_in_a_timeout_within_its_limit(shop, server, mcp_server):
    mcp_server_sync(client=shop, server=server)
    slow = enable(shop, listed(shop, server)["slow_report"], ToolKind.READ)
    ClientTool.objects.for_client(shop).filter(pk=slow.pk).update(timeout_seconds=1)
    slow.refresh_from_db()
    started = time.monotonic()
    execution = tool_execute(client=shop, tool=slow, params={}, idempotency_key="mcp-slow")
    assert execution.status == ExecutionStatus.FAILED
    assert execution.failure_kind == FailureKind.TIMED_OUT
    assert time.monotonic() - started < 10  # a limit, not a benchmark: it never waits 60 s


def test_a_server_without_the_token_is_reported_not_listed(shop, server):
    McpServer.objects.for_client(shop).filter(pk=server.pk).update(bearer_token="wrong-token")
    server.refresh_from_db()
    report = mcp_server_sync(client=shop, server=server)
    assert report.error and "wrong-token" not in report.error
    assert not listed(shop, server)
    server.refresh_from_db()
    assert server.last_error == report.error


def test_another_clients_server_and_tools_are_not_this_clients(shop, server):
    other = make_shop("adaptive", "https://hooks.example.com/unused", slug="other-shop")
    mcp_server_sync(client=shop, server=server)
    assert not McpServer.objects.for_client(other).exists()
    assert not ClientTool.objects.for_client(other).filter(executor_type="mcp").exists()
    assert ToolExecution.objects.for_client(other).count() == 0
