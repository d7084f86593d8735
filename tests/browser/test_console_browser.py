"""The console in a real headless Chromium (the system's /usr/bin/chromium, never a downloaded
browser): internal reasoning starts collapsed, new messages and the escalation state arrive by
polling without a reload, and an agent replies and resolves through the forms."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from apps.conversations.models import Message
from apps.conversations.services import message_append
from apps.escalations.models import Escalation
from tests.api.conftest import make_tenant_data
from tests.browser.conftest import SCREENSHOTS
from tests.browser.helpers import agent_page, customer_asks, send

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def signed_in_page(browser, live_server, client_a, monkeypatch) -> Iterator[Any]:
    page = agent_page(browser, live_server, client_a, monkeypatch)
    yield page
    page.context.close()


def test_an_agent_follows_a_conversation_live_replies_and_resolves(
    signed_in_page, live_server, client_a
):
    page = signed_in_page
    data = make_tenant_data(client_a)
    page.goto(f"{live_server.url}/console/escalations/")
    page.get_by_role("link", name="Where is my order?").click()  # titled by its subject
    page.wait_for_selector("#gd-conversation")

    # internal reasoning is there but collapsed
    internal = page.locator(".gd-internal details").first
    assert internal.get_attribute("open") is None
    assert not page.get_by_text('"confidence": 5').is_visible()
    page.get_by_role("button", name="Expand all internal").click()
    assert page.get_by_text('"confidence": 5').is_visible()

    # a new customer message and an internal note arrive without a reload
    message_append(
        client=client_a, conversation=data.conversation, role="user", text="Anyone there?"
    )
    page.get_by_text("Anyone there?").wait_for()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "console-conversation.png"), full_page=True)

    # reply through the form
    page.get_by_label("Reply to the customer").fill("Hi, I'm looking at your order now.")
    page.get_by_role("button", name="Send reply").click()
    page.get_by_text("Reply sent.").wait_for()
    reply = Message.objects.filter(conversation=data.conversation, role="staff").get()
    assert reply.text == "Hi, I'm looking at your order now."
    assert reply.author == page.staff_user
    assert page.locator("[data-esc-assignee]").inner_text() == page.staff_user.email

    # handed back elsewhere (another agent, the API): the page follows by polling
    from apps.escalations.services import escalation_create, escalation_resolve

    escalation_resolve(client=client_a, escalation=data.escalation)
    page.locator("[data-escalation]").wait_for(state="hidden")
    assert page.locator("[data-status]").inner_text().startswith("Open")
    again = escalation_create(
        client=client_a, conversation=data.conversation, reason="policy", notify=False
    )
    page.locator("[data-escalation]").wait_for(state="visible")
    assert page.locator("[data-esc-reason]").inner_text() == "Policy / safety decision"

    # hand back with the page's one hand-back control (shown for an escalated conversation)
    page.reload()
    page.get_by_role("button", name="Hand back to the assistant").click()
    page.get_by_text("Handed back: the assistant answers").wait_for()
    assert (
        Escalation.objects.unscoped("test checks the database directly").get(pk=again.pk).status
        == "resolved"
    )
    assert page.locator("[data-escalation]").is_hidden()

    # the queue page refreshes itself too: a new escalation appears without a reload
    page.goto(f"{live_server.url}/console/escalations/")
    assert page.locator("[data-open-count]").inner_text() == "0"
    escalation_create(
        client=client_a, conversation=data.quiet_conversation, reason="policy", notify=False
    )
    page.get_by_role("link", name="Do you ship abroad?").wait_for()
    assert page.locator("[data-open-count]").inner_text() == "1"
    page.screenshot(path=str(SCREENSHOTS / "console-queue.png"), full_page=True)
    assert page.errors == []


def test_staff_reply_in_the_console_shows_in_the_customers_widget(
    browser, live_server, demo, db_lock, llm, monkeypatch
):
    """The customer chats in the widget; an agent answers from the console; the customer's open
    widget shows the reply as staff, with the hand-off notice — and no assistant answers."""
    customer, frame, conversation = customer_asks(
        browser,
        live_server.url,
        demo,
        llm,
        "My stove arrived with a dent",
        "Let me see what I can find.",
    )
    agent = agent_page(browser, live_server, demo, monkeypatch)
    agent.goto(f"{live_server.url}/console/conversations/{conversation.public_id}/")
    thread = agent.locator("[data-messages]")
    expect(thread.get_by_text("My stove arrived with a dent", exact=True)).to_be_visible()
    agent.get_by_label("Reply to the customer").fill("Hi, I'm Alex — a replacement is on its way.")
    agent.get_by_role("button", name="Send reply").click()
    expect(agent.get_by_text("Reply sent.")).to_be_visible()

    staff = frame.locator("li.gd-msg--staff")
    expect(staff).to_contain_text("a replacement is on its way")
    expect(staff.locator(".gd-badge")).to_have_text("Staff")
    expect(frame.locator("#gd-handoff")).to_be_visible()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    customer.screenshot(path=str(SCREENSHOTS / "widget-console-reply.png"))
    agent.screenshot(path=str(SCREENSHOTS / "console-reply-sent.png"), full_page=True)
    assert (SCREENSHOTS / "widget-console-reply.png").stat().st_size > 5_000

    calls = len(llm.requests)
    send(frame, "Great, thanks!")
    expect(agent.get_by_text("Great, thanks!", exact=True)).to_be_visible()  # live update
    assert len(llm.requests) == calls  # a person owns the conversation now
    assert agent.errors == []
    agent.context.close()
    customer.close()
