"""The staff console at a phone's width (360 x 740) in a real headless Chromium: no page scrolls
sideways, the navigation is behind a menu button and every link in it is reached through that
button, tables read as stacked cards, the reply box stays in view while the conversation
scrolls, and the inbox pins the conversations waiting for a person with one clear hand-back."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from apps.console import views as console_views
from apps.conversations.models import Conversation
from apps.conversations.services import conversation_create, message_append
from apps.escalations.services import escalation_create
from tests.api.conftest import TenantData, make_tenant_data
from tests.browser.conftest import SCREENSHOTS
from tests.browser.helpers import PHONE, agent_page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The coordinator's copy of the inbox at 360 px (the CI artefacts keep one too).
NAV = ["Inbox", "Queue", "Playground", "Approvals", "Outcomes"]


def scroll_width(page: Any) -> int:
    return int(page.evaluate("document.documentElement.scrollWidth"))


def open_menu(page: Any) -> Any:
    """Opens the navigation with its menu button, as a person would; returns the menu."""
    menu = page.locator("details[data-menu]")
    button = menu.locator("summary")
    expect(button).to_be_visible()
    expect(button).to_have_accessible_name("Menu")
    if menu.get_attribute("open") is None:
        button.click()
    expect(menu).to_have_attribute("open", "")
    return menu


def assert_within_phone(locator: Any) -> None:
    expect(locator).to_be_visible()
    box = locator.bounding_box()
    assert box is not None
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], box


# The elements reaching past the screen's right edge (innermost last), to name in a failure.
_TOO_WIDE = """(limit) => [...document.querySelectorAll("body *")]
  .filter((el) => el.checkVisibility() && el.getBoundingClientRect().right > limit)
  .slice(-6)
  .map((el) => {
    const right = Math.round(el.getBoundingClientRect().right);
    return `${el.tagName.toLowerCase()}.${el.className}: ${right}`;
  })"""


_CARD_FITS = """([selector, limit]) => {
  const el = document.querySelector(selector);
  if (!el) return false;
  const r = el.getBoundingClientRect();
  return r.width > 0 && r.left >= 0 && r.right <= limit;
}"""


def assert_fits(page: Any, name: str) -> None:
    width = scroll_width(page)
    assert width <= PHONE["width"], (
        f"{name} is {width} px wide at 360 px: {page.evaluate(_TOO_WIDE, PHONE['width'])}"
    )


@pytest.fixture
def data(client_a: Any, db_lock: Any) -> TenantData:
    with db_lock:
        data = make_tenant_data(client_a)
        # A customer with a long name and address, the kind that pushes tables wide.
        long, _ = conversation_create(client=client_a, visitor_id="v-long")
        message_append(
            client=client_a,
            conversation=long,
            role="user",
            text="My order TH-10042-EXPRESS-DELIVERY-REQUESTED never arrived at the depot",
        )
        Conversation.objects.for_client(client_a).filter(pk=long.pk).update(
            customer_id="customer-000000042",
            customer_name="Maximiliana Fernández-Oyarzábal de la Concepción",
            customer_email="maximiliana.fernandez-oyarzabal@correo-largo.example.com",
            customer_verified_at=timezone.now(),
        )
    return data


@pytest.fixture
def phone(browser: Any, live_server: Any, client_a: Any, monkeypatch: Any) -> Iterator[Any]:
    monkeypatch.setattr(console_views, "POLL_SECONDS", 1)
    page = agent_page(browser, live_server, client_a, monkeypatch)
    page.set_viewport_size(PHONE)
    yield page
    page.context.close()


def test_every_console_page_fits_360px_and_every_link_is_reached_through_the_menu(
    phone, live_server, data
):
    page = phone
    page.goto(f"{live_server.url}/console/")
    expect(page.locator("#gd-inbox")).to_be_visible()
    assert_fits(page, "the inbox")
    # The links are behind the menu button until it is opened.
    for name in NAV:
        expect(page.get_by_role("link", name=name, exact=True)).to_be_hidden()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "console-inbox-360.png"), full_page=True)

    # Rows are stacked cards: each value under its column's heading, within the screen.
    row = f'tr[data-conversation="{data.conversation.public_id}"]'
    # (read in one step: the inbox re-renders its rows whenever it refreshes)
    page.wait_for_function(_CARD_FITS, arg=[row, PHONE["width"]])
    customer = page.locator(row).locator("td[data-customer]")
    assert customer.evaluate("td => getComputedStyle(td, '::before').content") == '"Customer"'

    # Each page through the menu's own links, each fitting the screen.
    pages = {
        "Queue": "#gd-queue",
        "Playground": "main.gd-console h1",
        "Approvals": "main.gd-console h1",
        "Outcomes": "#gd-outcomes",
        "Inbox": "#gd-inbox",
    }
    for name, landmark in pages.items():
        menu = open_menu(page)
        for other in NAV:
            assert_within_phone(menu.get_by_role("link", name=other, exact=True))
        assert_within_phone(menu.get_by_role("button", name="Sign out"))
        page.screenshot(path=str(SCREENSHOTS / "console-menu-360.png"))
        with page.expect_navigation():
            menu.get_by_role("link", name=name, exact=True).click()
        expect(page.locator(landmark).first).to_be_visible()
        assert_fits(page, name)

    # The profile: the signed-in address in the menu.
    menu = open_menu(page)
    profile = menu.get_by_role("link", name=page.staff_user.email)
    assert_within_phone(profile)
    with page.expect_navigation():
        profile.click()
    assert "/console/profile/" in page.url
    assert_fits(page, "the profile")

    # A conversation, opened from the inbox's card.
    page.goto(f"{live_server.url}/console/")
    page.locator(f'tr[data-conversation="{data.conversation.public_id}"] a').click()
    expect(page.locator("#gd-conversation")).to_be_visible()
    assert_fits(page, "a conversation")
    assert page.errors == []


def test_at_desktop_width_the_links_show_without_the_menu_button(phone, live_server, data):
    page = phone
    page.set_viewport_size({"width": 1366, "height": 860})
    page.goto(f"{live_server.url}/console/")
    expect(page.locator("details[data-menu] summary")).to_be_hidden()
    for name in NAV:
        expect(page.get_by_role("link", name=name, exact=True)).to_be_visible()
    # and the inbox is a table again, with its headings
    expect(page.locator("table.gd-inbox thead")).to_be_visible()
    page.screenshot(path=str(SCREENSHOTS / "console-inbox-1366.png"))
    assert scroll_width(page) <= 1366


def test_the_reply_box_stays_in_view_while_a_long_conversation_scrolls(
    phone, live_server, client_a, data, db_lock
):
    page = phone
    with db_lock:
        for n in range(30):
            message_append(
                client=client_a,
                conversation=data.conversation,
                role="user" if n % 2 else "assistant",
                text=f"Message number {n} of a long conversation",
            )
    page.goto(f"{live_server.url}/console/conversations/{data.conversation.public_id}/")
    box = page.get_by_label("Reply to the customer")
    expect(box).to_be_visible()
    for scrolled in (0, 1200):
        page.evaluate(f"window.scrollTo(0, {scrolled})")
        page.wait_for_function(f"window.scrollY === {scrolled}")
        rect = box.bounding_box()
        assert rect is not None
        assert rect["y"] >= 0 and rect["y"] + rect["height"] <= PHONE["height"], (scrolled, rect)
    page.screenshot(path=str(SCREENSHOTS / "console-conversation-360.png"))
    assert_fits(page, "a long conversation")


def test_the_inbox_pins_who_waits_and_one_hand_back_answers_or_not(
    phone, live_server, client_a, data, db_lock
):
    """A conversation that starts waiting for a person while the inbox is open jumps to the top,
    highlighted; on its page one hand-back control, whose box says whether the assistant answers
    what the customer wrote meanwhile."""
    page = phone
    page.goto(f"{live_server.url}/console/")
    rows = page.locator("tbody[data-rows] tr")
    first = rows.first
    expect(first).to_have_attribute("data-conversation", str(data.conversation.public_id))
    expect(first).to_have_class("gd-row-waiting")
    with db_lock:
        escalation_create(
            client=client_a,
            conversation=data.quiet_conversation,
            reason="customer_request",
            notify=False,
        )
    # the page's own refresh (inbox.js) pins it too, as a stacked card with its labels
    quiet = page.locator(f'tr[data-conversation="{data.quiet_conversation.public_id}"]')
    expect(quiet).to_have_class("gd-row-waiting")
    expect(rows.nth(1)).to_have_attribute(
        "data-conversation", str(data.quiet_conversation.public_id)
    )
    assert quiet.locator("td").first.get_attribute("data-label") == "Conversation"
    expect(quiet.locator("td[data-customer]")).to_contain_text("Not verified")
    assert_fits(page, "the inbox after a refresh")

    quiet.get_by_role("link").click()
    expect(page.locator("#gd-conversation")).to_be_visible()
    hand_back = page.get_by_role("button", name="Hand back")
    expect(hand_back).to_have_count(1)
    answer = page.get_by_label("Let the assistant answer what the customer is still waiting for")
    expect(answer).to_be_checked()
    answer.uncheck()
    hand_back.click()
    expect(page.locator(".gd-flash-success")).to_contain_text("Handed back without answering")
    assert_fits(page, "a conversation")
    assert page.errors == []
