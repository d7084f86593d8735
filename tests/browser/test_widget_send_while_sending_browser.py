"""A message typed and sent while the previous one is still on its way, in real Chromium: it
stays in the box (nothing is lost, nothing is sent twice), and goes once the first is answered."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Route, expect

from apps.conversations.models import Message
from tests.browser.helpers import open_widget, send, shown_conversation
from tests.support.shop import assess

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def is_message_post(url: str) -> bool:
    return url.split("?")[0].endswith("/messages")


def test_a_message_sent_while_the_first_is_on_its_way_stays_in_the_box(
    browser: Any, live_server, demo, llm
):
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    frame = open_widget(page, live_server.url, demo)
    held: list[Route] = []

    def hold_the_first_post(route: Route) -> None:
        if route.request.method == "POST" and not held:
            held.append(route)  # answered when the test lets it go
        else:
            route.continue_()

    page.route(is_message_post, hold_the_first_post)
    llm.script("assess", assess(response="Yes, we ship to Canada in 5–8 days."))
    with page.expect_request(lambda r: r.method == "POST" and is_message_post(r.url)):
        send(frame, "Do you ship to Canada?")

    # The first message is still on its way: Enter on the next one keeps it in the box.
    box = frame.locator("#gd-input")  # (its label follows the language the chat detects)
    send(frame, "And to Mexico?")
    expect(box).to_have_value("And to Mexico?")
    assert len(held) == 1  # no second POST went out meanwhile

    held[0].continue_()
    expect(frame.get_by_text("Yes, we ship to Canada in 5–8 days.")).to_be_visible()
    expect(box).to_have_value("And to Mexico?")

    # Sent once the first is answered, once.
    llm.script("assess", assess(response="Mexico too, in 6–9 days."))
    box.press("Enter")
    expect(frame.get_by_text("Mexico too, in 6–9 days.")).to_be_visible()
    expect(box).to_have_value("")
    conversation = shown_conversation(frame, demo)
    texts = list(
        Message.objects.for_client(demo)
        .filter(conversation=conversation, role="user")
        .order_by("seq")
        .values_list("text", flat=True)
    )
    assert texts == ["Do you ship to Canada?", "And to Mexico?"]
    page.close()
