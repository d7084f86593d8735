"""A reply template whose variable has no verified value, in a real headless Chromium: the agent
inserts it, the console names the variable next to the reply box and will not send until the
agent fills it in."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from apps.conversations.models import Message, Role
from apps.conversations.services import conversation_create, message_append
from apps.escalations.reply_templates import reply_template_create
from apps.tools.models import ClientTool, ExecutionStatus, ToolExecution
from tests.browser.helpers import agent_page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def staff_lines(conversation: Any) -> list[str]:
    return list(
        Message.objects.for_client(conversation.client)
        .filter(conversation=conversation, role=Role.STAFF)
        .values_list("text", flat=True)
    )


def test_an_unfillable_variable_blocks_sending_until_the_agent_fills_it(
    sam_page, live_server, client_a
):
    page = sam_page
    conversation, _ = conversation_create(client=client_a)
    # The customer typed a name, but nobody verified it: {customer_name} has no value.
    conversation.customer_name = "Ana"
    conversation.save(update_fields=["customer_name"])
    message_append(client=client_a, conversation=conversation, role=Role.USER, text="Hello?")
    reply_template_create(
        client=client_a,
        name="Greeting",
        shortcut="hi",
        body="Hi {customer_name}, thanks for waiting. — {agent_name}",
    )
    page.goto(f"{live_server.url}/console/conversations/{conversation.public_id}/")
    box = page.get_by_label("Reply to the customer")
    box.click()
    box.press_sequentially("/hi")
    expect(page.locator("[data-reply-templates]").get_by_role("option")).to_have_count(1)
    box.press("Enter")
    expect(box).to_have_value("Hi {customer_name}, thanks for waiting. — Sam")
    unfilled = page.locator("[data-template-unfilled]")
    expect(unfilled).to_be_visible()
    expect(unfilled).to_contain_text("{customer_name}")

    # Sending is refused in the page: no request, the variable is named and selected.
    page.evaluate("window.gdStillHere = true")
    page.get_by_role("button", name="Send reply").click()
    expect(unfilled).to_have_attribute("data-refused", "1")
    expect(unfilled).to_contain_text("Fill in {customer_name} before sending")
    assert page.evaluate("window.gdStillHere === true")  # the form did not navigate
    selected = page.evaluate(
        "(b => b.value.slice(b.selectionStart, b.selectionEnd))", box.element_handle()
    )
    assert selected == "{customer_name}"
    assert staff_lines(conversation) == []

    # Filled in, the warning goes and the reply is sent.
    box.press_sequentially("Ana")
    expect(box).to_have_value("Hi Ana, thanks for waiting. — Sam")
    expect(unfilled).to_be_hidden()
    page.get_by_role("button", name="Send reply").click()
    page.get_by_text("Reply sent.").wait_for()
    assert staff_lines(conversation) == ["Hi Ana, thanks for waiting. — Sam"]
    assert page.errors == []


def test_the_demo_ships_templates_and_slash_fills_the_order_a_tool_acted_on(
    browser, live_server, demo, db_lock, monkeypatch
):
    """The README's step: in a demo conversation, "/" lists the demo's templates, and the
    cancellation one comes filled with the order the cancel tool ran on — not the order the
    customer mentioned afterwards."""
    with db_lock:
        conversation, _ = conversation_create(client=demo)
        message_append(client=demo, conversation=conversation, role=Role.USER, text="Cancel 12345")
        cancel = ClientTool.objects.for_client(demo).get(name="cancel_order")
        ToolExecution.objects.create(
            client=demo,
            conversation=conversation,
            tool=cancel,
            params={"order_id": "TH-12345"},
            idempotency_key=f"readme-{conversation.pk}",
            status=ExecutionStatus.SUCCEEDED,
            result={"status": "cancelled"},
        )
        message_append(
            client=demo, conversation=conversation, role=Role.USER, text="And where is TH-10042?"
        )
    page = agent_page(browser, live_server, demo, monkeypatch, first_name="Sam")
    page.goto(f"{live_server.url}/console/conversations/{conversation.public_id}/")
    box = page.get_by_label("Reply to the customer")
    box.click()
    box.press_sequentially("/")
    options = page.locator("[data-reply-templates]").get_by_role("option")
    expect(options).to_have_count(5)
    box.press_sequentially("cancelled")
    expect(options).to_have_count(1)
    box.press("Enter")
    expected = (
        "Order TH-12345 is cancelled and you won't be charged for it; a confirmation e-mail "
        "is on its way. — Sam"
    )
    expect(box).to_have_value(expected)
    expect(page.locator("[data-template-unfilled]")).to_be_hidden()
    page.get_by_role("button", name="Send reply").click()
    page.get_by_text("Reply sent.").wait_for()
    with db_lock:
        assert staff_lines(conversation) == [expected]
    assert page.errors == []
    page.context.close()
