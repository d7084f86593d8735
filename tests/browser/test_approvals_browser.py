"""A teammate's approval in a real headless Chromium: a refund above the demo shop's threshold
waits after the customer's Yes, an agent approves it in the console, and the customer's open
widget shows the result — once. Screenshots land in ci-artifacts/screenshots/."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from apps.approvals.models import ApprovalRequest, ApprovalStatus
from apps.approvals.services import approval_request_create
from apps.approvals.sums import approval_basis
from apps.conversations.models import Message
from apps.conversations.services import conversation_create, message_append
from apps.tools.models import ClientTool, ExecutionStatus, ToolExecution
from tests.browser.conftest import SCREENSHOTS
from tests.browser.helpers import agent_page, open_widget, send, shown_conversation
from tests.support.shop import assess, critique

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
    expect(live_box).to_contain_text("Request a refund")
    expect(live_box).to_contain_text(ORDER)
    agent.get_by_role("link", name="Approvals").click()
    row = agent.locator(f'[data-approval="{approval.public_id}"]')
    expect(row.locator("[data-approval-action]")).to_have_text(
        f"Request a refund: 150.00 on order {ORDER}"
    )
    expect(row.locator("[data-approval-params]")).to_contain_text("damaged item")
    agent.screenshot(path=str(SCREENSHOTS / "approval-console.png"), full_page=True)
    row.get_by_role("button", name="Approve and run").click()
    expect(agent.get_by_text("Approved: Request a refund runs now")).to_be_visible()
    expect(agent.locator(f'[data-approval="{approval.public_id}"]')).to_contain_text("Approved")

    # The customer's open widget shows the result, once.
    result = frame.locator("li.gd-msg--assistant").filter(
        has_text="I've completed “Request a refund”"
    )
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


def assert_fits(card: Any) -> None:
    """Nothing in the card sticks out of it, and the card is inside the window."""
    fits = card.evaluate(
        """card => {
          const box = card.getBoundingClientRect();
          const inside = [...card.querySelectorAll('*')].every(
            el => el.getBoundingClientRect().right <= box.right + 0.5);
          return {inside, right: box.right, width: window.innerWidth,
                  scrolls: card.scrollWidth > card.clientWidth};
        }"""
    )
    assert fits["inside"] and not fits["scrolls"], fits
    assert fits["right"] <= fits["width"], fits


def test_an_approval_card_reads_in_words_and_fits_a_360_px_screen(
    browser: Any, live_server: Any, demo: Any, db_lock: Any, monkeypatch: Any
) -> None:
    """The card on a phone: the action and its amount in words, the customer, the last
    messages and the running total; nothing scrolls sideways; Approve is the card's own form."""
    params = {"order_id": "TH-12346", "amount": 425.76, "reason": "Arrived with a torn seam"}
    with db_lock:
        tool = ClientTool.objects.for_client(demo).get(name="request_refund")
        tool.approval_rule = {"param": "amount", "above": 100}
        tool.save(update_fields=["approval_rule"])
        earlier, _ = conversation_create(client=demo, visitor_id="v-360-before")
        earlier.customer_id = "demo-customer"
        earlier.customer_verified_at = timezone.now()
        earlier.save()
        ToolExecution.objects.create(
            client=demo,
            conversation=earlier,
            tool=tool,
            params={"order_id": "TH-10042", "amount": 60, "reason": "late"},
            idempotency_key="card-360-earlier",
            status=ExecutionStatus.SUCCEEDED,
        )
        conversation, _ = conversation_create(client=demo, visitor_id="v-360")
        conversation.customer_id = "demo-customer"
        conversation.customer_name = "Ana Lima"
        conversation.customer_email = "ana.lima.long.address@example.com"
        conversation.customer_verified_at = timezone.now()
        conversation.save()
        for role, text in (
            ("user", "My boots TH-12346 arrived with a torn seam, I want my money back"),
            ("assistant", "I can request a refund of $425.76 for TH-12346. Shall I?"),
            ("user", "Yes please"),
        ):
            asked = message_append(client=demo, conversation=conversation, role=role, text=text)
        approval, _ = approval_request_create(
            client=demo,
            conversation=conversation,
            tool=tool,
            params=params,
            idempotency_key=f"card-360-{conversation.pk}",
            requested_in=asked,
            trace=None,
            basis=approval_basis(client=demo, conversation=conversation, tool=tool, params=params),
        )
    agent = agent_page(browser, live_server, demo, monkeypatch)
    agent.set_viewport_size({"width": 360, "height": 800})
    agent.goto(f"{live_server.url}/console/approvals/?client={demo.slug}")
    card = agent.locator(f'[data-approval="{approval.public_id}"]')
    expect(card.locator("[data-approval-action]")).to_have_text(
        "Request a refund: 425.76 on order TH-12346"
    )
    expect(card.locator("[data-approval-customer]")).to_contain_text("Ana Lima")
    expect(card.locator("[data-approval-total]")).to_contain_text("485.76")  # 425.76 + 60
    expect(card.locator("[data-approval-messages]")).to_contain_text("Yes please")
    expect(card).not_to_contain_text('"amount"')
    expect(card).not_to_contain_text(approval.idempotency_key)
    assert_fits(card)
    # the same card on the conversation page fits as well
    agent.goto(
        f"{live_server.url}/console/conversations/{conversation.public_id}/?client={demo.slug}"
    )
    assert_fits(agent.locator(f'#approvals [data-approval="{approval.public_id}"]'))
    agent.goto(f"{live_server.url}/console/approvals/?client={demo.slug}")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    card.screenshot(path=str(SCREENSHOTS / "approval-card-360.png"))
    agent.screenshot(path=str(SCREENSHOTS / "approval-page-360.png"), full_page=True)

    card.get_by_role("button", name="Approve and run").click()
    expect(agent.locator(".gd-flash-success")).to_contain_text(
        "Approved: Request a refund runs now"
    )
    with db_lock:
        approval.refresh_from_db()
    assert approval.status == ApprovalStatus.APPROVED
    assert agent.errors == []
    agent.context.close()
