"""GuideDesk's own executors against the retail server: the tenant file imports, and the
imported webhook tools (and GuideDesk's MCP client) act on the served world."""

from __future__ import annotations

import pytest

from apps.certify.retail.server import RetailServer, tenant_file
from apps.certify.retail.tools import TOOLS
from apps.clients.models import Client
from apps.provisioning.services import tenant_import
from apps.tools.executors.webhook import run_webhook
from apps.tools.mcp_client import mcp_call_tool, mcp_list_tools
from apps.tools.models import ClientTool
from tests.certify.conftest import pending_order


@pytest.mark.django_db
def test_imported_webhook_tools_act_on_the_served_world(server: RetailServer) -> None:
    [imported] = tenant_import(
        data=tenant_file(webhook_url=server.webhook_url, webhook_secret=server.webhook_secret)
    )
    client = Client.objects.get(slug=imported.slug)
    tools = {
        t.name: t
        for t in ClientTool.objects.unscoped("test reads what the import stored").filter(
            client=client
        )
    }
    assert sorted(tools) == sorted(TOOLS)
    assert {n for n, t in tools.items() if t.kind == "destructive"} == {
        n for n, spec in TOOLS.items() if spec.destructive
    }
    order = pending_order(server)
    params = {"order_id": order.order_id, "reason": "no longer needed"}

    outcome = run_webhook(
        tool=tools["cancel_pending_order"],
        params=params,
        conversation_id="c-1",
        idempotency_key="turn-1:cancel",
    )
    assert outcome.ok, outcome.error
    assert outcome.result is not None and outcome.result["status"] == "cancelled"
    assert server.runtime.snapshot().orders[order.order_id].status == "cancelled"

    refused = run_webhook(
        tool=tools["cancel_pending_order"],
        params=params,
        conversation_id="c-1",
        idempotency_key="turn-2:cancel",
    )
    assert not refused.ok
    assert refused.refused
    assert refused.error_code == "order_not_pending"


def test_guidedesks_mcp_client_lists_and_calls_the_tools(server: RetailServer) -> None:
    headers = {"Authorization": f"Bearer {server.token}"}
    listed = {t.name: t for t in mcp_list_tools(url=server.mcp_url, headers=headers, timeout=10)}
    assert sorted(listed) == sorted(TOOLS)
    order = pending_order(server)
    outcome = mcp_call_tool(
        url=server.mcp_url,
        headers=headers,
        name="get_order_details",
        arguments={"order_id": order.order_id},
        timeout=10,
    )
    assert not outcome.is_error
    assert order.order_id in str(outcome.result)
