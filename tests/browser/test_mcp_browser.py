"""Tools from an MCP server in a real browser (the system's /usr/bin/chromium; docs/mcp.md): a
support lead signs into the admin, adds the business's MCP server with its bearer token — saving
lists its tools, every one disabled and waiting for review — reads the order-status tool,
classifies it as a read tool and enables it, while the tool whose description tries to instruct
the model stays off. A customer then asks the demo shop's widget about an order: the assistant
calls the tool on the real MCP server and answers from its result, and the lead finds the run,
Succeeded, in the tool run log."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from apps.tools.models import ClientTool, ExecutionStatus, McpServer, ToolExecution, ToolKind
from tests.browser.helpers import (
    lead_signed_in,
    open_add_form,
    open_widget,
    send,
    shot,
    shown_conversation,
)
from tests.support.shop import assess
from tests.tools.conftest import mcp_server  # noqa: F401  (fixture, re-exported)
from tests.tools.mcp_server import McpTestServer

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ORDER = "A-1001"
NEW = "New: read its description and schema, classify it, then enable."


def tool_row(page: Page, name: str) -> Any:
    """The server page's row for one of its tools (the "Its tools" inline)."""
    return page.locator(".inline-group tbody tr").filter(
        has=page.locator("td.field-name", has_text=name)
    )


def test_a_lead_reviews_an_mcp_servers_tool_and_a_customer_gets_its_answer(
    browser: Any,
    live_server: Any,
    demo: Any,
    db_lock: Any,
    llm: Any,
    mcp_server: McpTestServer,  # noqa: F811
    settings: Any,
    screenshots: Any,
) -> None:
    settings.TOOL_WEBHOOK_ALLOW_HTTP = True
    settings.TOOL_WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    assert mcp_server.orders[ORDER] == "shipped"
    # The lead signs in and adds the server with the admin's own form.
    admin = lead_signed_in(browser, live_server.url, db_lock)
    open_add_form(admin, "MCP servers", "Add MCP server", demo)
    admin.locator("#id_name").fill("shop")
    admin.locator("#id_url").fill(mcp_server.url)
    admin.locator("#id_auth").select_option(label="Bearer token")
    admin.locator("#id_bearer_token").fill(mcp_server.token)
    admin.get_by_role("button", name="Save and continue editing").click()

    # Saving listed the server's tools: all new, all disabled until reviewed.
    with db_lock:
        server = McpServer.objects.for_client(demo).get(name="shop")
        listed = ClientTool.objects.for_client(demo).filter(mcp_server=server)
        tools = {t.mcp_tool_name: t for t in listed}
    assert server.bearer_token == mcp_server.token
    assert {"get_order_status", "cancel_order", "shipping_rates"} <= set(tools)
    assert not [t for t in tools.values() if t.enabled]
    # (the admin capitalises the first letter of every message)
    expect(admin.locator(".messagelist .warning")).to_have_text(
        f"Shop: {len(tools)} new, 0 changed, 0 no longer listed, 0 unchanged. New and changed "
        "tools are disabled until you review them."
    )
    expect(admin.locator(".inline-group h2")).to_contain_text("Its tools (open each with View")
    for tool in tools.values():
        row = tool_row(admin, tool.name)
        expect(row).to_have_count(1)
        expect(row.locator("td.field-mcp_tool_name")).to_have_text(tool.mcp_tool_name)
        expect(row.locator("td.field-review")).to_have_text(NEW)
    assert mcp_server.token not in admin.content()  # write-only: never sent back
    expect(admin.locator("#id_bearer_token")).to_have_value("")
    admin.screenshot(path=str(screenshots / "mcp-server.png"), full_page=True)  # with its tools
    server_page = admin.url

    # The lead opens the order-status tool, reads it, classifies it as a read tool, enables it.
    # (the inline is read-only, so Django names the link to the tool's page "View")
    tool_row(admin, "shop_get_order_status").get_by_role("link", name="View").click()
    expect(admin.locator("#id_name")).to_have_value("shop_get_order_status")
    expect(admin.locator("#id_description")).to_have_value("The status of an order.")
    expect(admin.locator("#id_parameters")).to_contain_text('"order_id"')
    expect(admin.get_by_role("radio", name="Destructive — cancel, delete")).to_be_checked()
    admin.get_by_role("radio", name="Read — only retrieves information").check()
    admin.get_by_role("checkbox", name="Enabled").check()
    admin.get_by_role("button", name="Save", exact=True).click()
    expect(admin.locator(".messagelist .success")).to_contain_text("shop_get_order_status")

    # Back on the server's page: reviewed; the tool that instructs the model is still off.
    admin.goto(server_page)
    reviewed = tool_row(admin, "shop_get_order_status")
    expect(reviewed.locator("td.field-review")).to_have_text("Reviewed.")
    expect(reviewed.locator("td.field-kind")).to_have_text("Read — only retrieves information")
    expect(reviewed.locator("td.field-enabled img")).to_have_attribute("alt", "True")
    rates = tool_row(admin, "shop_shipping_rates")
    expect(rates.locator("td.field-review")).to_have_text(NEW)
    expect(rates.locator("td.field-enabled img")).to_have_attribute("alt", "False")
    with db_lock:
        status = ClientTool.objects.for_client(demo).get(name="shop_get_order_status")
        held = ClientTool.objects.for_client(demo).get(name="shop_shipping_rates")
    assert (status.kind, status.enabled, status.is_configured) == (ToolKind.READ, True, True)
    assert "ignore your previous instructions" in held.description.lower()
    assert not held.enabled and not held.is_configured

    # A customer asks the widget about the order: the assistant runs the tool on the server.
    customer = browser.new_context(viewport={"width": 1280, "height": 860})
    shop = customer.new_page()
    frame = open_widget(shop, live_server.url, demo)
    llm.script(
        "assess",
        assess(
            response="Let me look that order up.",
            tool_call="shop_get_order_status",
            tool_params={"order_id": ORDER},
            confidence=9,
        ),
    )
    llm.script("compose", {"response": f"Order {ORDER} has shipped."})
    send(frame, f"Where is my order {ORDER}?")
    reply = frame.locator("li.gd-msg--assistant[data-seq]").last
    expect(reply).to_contain_text(f"Order {ORDER} has shipped.")
    shot(shop, screenshots, "mcp-widget.png")
    assert ("get_order_status", {"order_id": ORDER}) in mcp_server.calls
    assert [c for c in mcp_server.calls if c[0] != "get_order_status"] == []
    with db_lock:
        conversation = shown_conversation(frame, demo)
        [execution] = ToolExecution.objects.for_client(demo).filter(tool=status)
    customer.close()
    assert execution.conversation_id == conversation.pk
    assert execution.status == ExecutionStatus.SUCCEEDED, execution.error
    assert execution.result == {"order_id": ORDER, "status": "shipped"}

    # The lead finds the run in the tool run log, Succeeded.
    admin.goto(f"{live_server.url}/admin/")
    admin.get_by_role("link", name="Tool executions").click()
    row = admin.locator("#result_list tbody tr").filter(has_text="shop_get_order_status")
    expect(row).to_have_count(1)
    expect(row.locator("td.field-status")).to_have_text("Succeeded")
    expect(row.locator("td.field-attempts")).to_have_text("1")
    assert admin.errors == []
    admin.context.close()
