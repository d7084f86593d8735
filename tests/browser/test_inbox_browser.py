"""The inbox in a real headless Chromium: staff watch an assistant conversation live, take it
over (the customer's widget shows that a person joined), reply, hand it back, and the message
the customer wrote meanwhile gets the assistant's answer."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from apps.accounts.models import Role as StaffRole
from apps.conversations.models import Message
from apps.conversations.services import conversation_create, message_append
from tests.browser.conftest import SCREENSHOTS
from tests.browser.helpers import agent_page, customer_asks, send
from tests.factories import MembershipFactory
from tests.support.shop import assess

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LEEDS = "We deliver across the UK in 2–3 days."


def test_watch_take_over_reply_and_hand_back_with_the_waiting_message_answered(
    browser, live_server, demo, db_lock, llm, monkeypatch
):
    customer, frame, conversation = customer_asks(
        browser, live_server.url, demo, llm, "Do you deliver to Leeds?", LEEDS
    )

    # The inbox lists it by the customer's first words, handled by the assistant.
    agent = agent_page(browser, live_server, demo, monkeypatch)
    agent.goto(f"{live_server.url}/console/")
    row = agent.locator(f'tr[data-conversation="{conversation.public_id}"]')
    expect(row).to_contain_text("Do you deliver to Leeds?")
    expect(row).to_contain_text("Handled by the assistant")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    agent.screenshot(path=str(SCREENSHOTS / "console-inbox.png"), full_page=True)
    row.get_by_role("link").click()
    agent.wait_for_selector("#gd-conversation")

    # Watching live: the assistant's next exchange arrives without a reload.
    llm.script("assess", assess(response="Leeds orders ship from our York depot."))
    send(frame, "Which depot ships it?")
    expect(agent.get_by_text("Leeds orders ship from our York depot.", exact=True)).to_be_visible()

    # Take over: the customer sees that a person joined; the assistant is silent.
    agent.get_by_role("button", name="Take over").click()
    expect(agent.get_by_text("You took over")).to_be_visible()
    expect(frame.get_by_text("A member of our team has joined the conversation.")).to_be_visible()
    agent.get_by_label("Reply to the customer").fill("Hi, I'm Alex. Shall I book it for you?")
    agent.get_by_role("button", name="Send reply").click()
    expect(agent.get_by_text("Reply sent.")).to_be_visible()
    expect(frame.locator("li.gd-msg--staff")).to_contain_text("Shall I book it for you?")

    calls = len(llm.requests)
    send(frame, "Yes please, order TH-10042")
    expect(agent.get_by_text("Yes please, order TH-10042", exact=True)).to_be_visible()
    assert len(llm.requests) == calls  # a person owns it: no model ran
    customer.screenshot(path=str(SCREENSHOTS / "widget-person-joined.png"))

    # Hand back: the waiting message gets the assistant's answer.
    llm.script("assess", assess(response="Done — order TH-10042 is booked for Leeds."))
    agent.get_by_role("button", name="Hand back to the assistant", exact=True).click()
    expect(agent.locator(".gd-flash-success")).to_contain_text("Handed back")
    expect(frame.get_by_text("Done — order TH-10042 is booked for Leeds.")).to_be_visible()
    expect(
        agent.get_by_text("Done — order TH-10042 is booked for Leeds.", exact=True)
    ).to_be_visible()
    answer = Message.objects.filter(conversation=conversation, role="assistant").last()
    assert answer is not None and "TH-10042" in answer.text
    customer.screenshot(path=str(SCREENSHOTS / "widget-handback-answered.png"))
    agent.screenshot(path=str(SCREENSHOTS / "console-handback.png"), full_page=True)
    assert agent.errors == []
    agent.context.close()
    customer.close()


def test_claim_on_the_conversation_page_assigns_it_to_me(
    browser, live_server, demo, db_lock, llm, monkeypatch
):
    """Claim and the "Assign to" select share one form; clicking Claim must claim
    (it used to post the select's "Nobody" too and unassign)."""
    customer, _, conversation = customer_asks(
        browser, live_server.url, demo, llm, "Do you deliver to Leeds?", LEEDS
    )

    agent = agent_page(browser, live_server, demo, monkeypatch)
    agent.goto(f"{live_server.url}/console/conversations/{conversation.public_id}/")
    agent.get_by_role("button", name="Claim").click()
    expect(agent.locator("[data-inbox-assignee]")).to_have_text(agent.staff_user.email)
    expect(agent.get_by_text("Nobody is assigned now.")).to_have_count(0)
    conversation.refresh_from_db()
    assert conversation.assignee == agent.staff_user
    assert agent.errors == []
    agent.context.close()
    customer.close()


def test_the_assign_to_select_assigns_a_teammate_and_nobody_unassigns(
    browser, live_server, client_a, monkeypatch
):
    """The other half of the shared form: picking a teammate in "Assign to" and pressing
    Assign assigns them (Claim's own field is not posted then); "Nobody" unassigns."""
    colleague = MembershipFactory(client=client_a, role=StaffRole.AGENT).user
    conversation, _ = conversation_create(client=client_a)
    message_append(client=client_a, conversation=conversation, role="user", text="Hello?")
    agent = agent_page(browser, live_server, client_a, monkeypatch)
    agent.goto(f"{live_server.url}/console/conversations/{conversation.public_id}/")

    agent.get_by_label("Assign to").select_option(label=colleague.email)
    agent.get_by_role("button", name="Assign", exact=True).click()
    expect(agent.locator(".gd-flash-success")).to_contain_text(f"Assigned to {colleague.email}")
    expect(agent.locator("[data-inbox-assignee]")).to_have_text(colleague.email)
    conversation.refresh_from_db()
    assert conversation.assignee == colleague

    # Claim is offered again (it is not mine); "Nobody" + Assign unassigns, not claims.
    expect(agent.get_by_role("button", name="Claim")).to_be_visible()
    agent.get_by_label("Assign to").select_option(label="Nobody")
    agent.get_by_role("button", name="Assign", exact=True).click()
    expect(agent.locator(".gd-flash-success")).to_contain_text("Nobody is assigned now.")
    expect(agent.locator("[data-inbox-assignee]")).to_have_text("Unassigned")
    conversation.refresh_from_db()
    assert conversation.assignee is None
    assert agent.errors == []
    agent.context.close()
