"""A teammate's approval in a real headless Chromium: a refund above the demo shop's threshold
waits after the customer's Yes, an agent approves it in the console, and the customer's open
widget shows the result — once. Screenshots land in ci-artifacts/screenshots/."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from apps.conversations.models import Message
from apps.tools.models import ApprovalRequest, ApprovalStatus, ClientTool, ToolExecution
from tests.browser.conftest import SCREENSHOTS
from tests.browser.helpers import open_widget, send, shown_conversation
from tests.browser.test_console_browser import agent_page
from tests.reasoning.conftest import assess, critique

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ALL = "test checks the database directly"
ORDER = "TH-10042"
PARAMS = {"order_id": ORDER, "amount": 150, "reason": "damaged item"}


def test_a_refund_above_the_threshold_waits_for_a_teammate_and_runs_once(
    browser: Any, live_server: Any, demo: Any, db_lock: Any, llm: Any, monkeypatch: Any
) -> None:
    with db_lock:
        ClientTool.objects.for_client(demo).filter(name="request_refund").update(
            approval_rule={"param": "amount", "above": 100}
        )
    customer = browser.new_page(viewport={"width": 1280, "height": 860})
    frame = open_widget(customer, live_server.url, demo)

    # The customer asks for a refund of 150: the assistant puts it to them (destructive).
    llm.script(
        "assess",
        assess(
            response=f"I can request a refund of $150 for {ORDER}.",
            tool_call="request_refund",
            tool_params=PARAMS,
            is_destructive=True,
            needs_confirmation=True,
        ),
    )
    llm.script("critique", critique("ASK_USER", "Shall I request the refund?", "Confirm first"))
    send(frame, f"My order {ORDER} arrived damaged, please refund $150")
    confirmation = frame.locator("li.gd-kind--confirmation_request")
    expect(confirmation).to_contain_text(ORDER)
    # An agent watches the conversation in the console meanwhile.
    with db_lock:
        conversation = shown_conversation(frame, demo)
    agent = agent_page(browser, live_server, demo, monkeypatch)
    agent.goto(
        f"{live_server.url}/console/conversations/{conversation.public_id}/?client={demo.slug}"
    )
    expect(agent.locator("#approvals")).to_be_hidden()

    # Yes → every guard passes, but the rule holds the call for a teammate.
    llm.script(
        "assess",
        assess(
            response="Requesting the refund now.",
            tool_call="request_refund",
            tool_params=PARAMS,
            is_destructive=True,
        ),
    )
    llm.script("critique", critique("PROCEED", reasoning="The customer confirmed."))
    confirmation.get_by_role("button", name="Yes").click()
    waiting = frame.get_by_text("a member of our team needs to check this request")
    expect(waiting).to_be_visible()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    customer.screenshot(path=str(SCREENSHOTS / "approval-widget-waiting.png"))
    with db_lock:
        assert ToolExecution.objects.unscoped(ALL).filter(tool__name="request_refund").count() == 0
        approval = ApprovalRequest.objects.unscoped(ALL).get()
    assert approval.status == ApprovalStatus.PENDING and approval.params == PARAMS

    # The open conversation page shows the request without a reload; the agent opens the
    # Approvals page from the nav and approves the exact call there.
    live_box = agent.locator("#approvals")
    expect(live_box).to_be_visible()
    expect(live_box).to_contain_text("request_refund")
    expect(live_box).to_contain_text(ORDER)
    agent.get_by_role("link", name="Approvals").click()
    row = agent.locator(f'[data-approval="{approval.public_id}"]')
    expect(row).to_contain_text("request_refund")
    expect(row.locator("[data-approval-params]")).to_contain_text('"amount": 150')
    agent.screenshot(path=str(SCREENSHOTS / "approval-console.png"), full_page=True)
    row.get_by_role("button", name="Approve and run").click()
    expect(agent.get_by_text("Approved: request_refund runs now")).to_be_visible()
    expect(agent.locator(f'[data-approval="{approval.public_id}"]')).to_contain_text("Approved")

    # The customer's open widget shows the result, once.
    result = frame.locator("li.gd-msg--assistant").filter(has_text="request refund completed")
    expect(result).to_have_count(1)
    expect(result).to_contain_text("RF-")
    customer.screenshot(path=str(SCREENSHOTS / "approval-widget-done.png"))
    # approving again (a second click from a stale page) runs nothing
    agent.go_back()
    with db_lock:
        executions = list(ToolExecution.objects.unscoped(ALL).filter(tool__name="request_refund"))
        told = Message.objects.unscoped(ALL).filter(data__outcome="succeeded").count()
    assert len(executions) == 1 and executions[0].idempotency_key == approval.idempotency_key
    assert told == 1
    assert agent.errors == []
    agent.context.close()
    customer.close()
