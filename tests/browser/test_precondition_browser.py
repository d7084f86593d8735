"""Cancelling an order the demo shop has already delivered, typed in the widget's own form in a
real headless Chromium with the offline demo model: the order's status is read first and the
customer is told plainly it can't be cancelled — no "this can't be undone, reply yes" question,
no Yes/No buttons, and the cancellation never runs. Screenshots land in
ci-artifacts/screenshots/."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from apps.tools.models import PendingAction, ToolExecution
from tests.browser.helpers import open_widget, send, shot, shown_conversation

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ALL = "test checks the database directly"
DELIVERED = "TH-10001"  # "delivered" in the demo shop's order book
PROCESSING = "TH-10043"  # "processing": still cancellable


def test_a_delivered_order_is_refused_plainly_instead_of_a_question(
    browser: Any, live_server: Any, demo: Any, db_lock: Any, settings: Any, screenshots: Any
) -> None:
    settings.OPENAI_API_KEY = ""  # the labelled offline demo model answers
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    frame = open_widget(page, live_server.url, demo)  # `/` signs in the demo customer

    send(frame, f"please cancel order {DELIVERED}")
    reply = frame.locator("li.gd-msg--assistant[data-seq]").last
    expect(reply).to_contain_text(f"isn't possible for order number {DELIVERED}")
    expect(reply).to_contain_text("its status is delivered")
    expect(frame.locator("li.gd-kind--confirmation_request")).to_have_count(0)
    expect(frame.get_by_role("button", name="Yes")).to_have_count(0)
    taken = shot(page, screenshots, "widget-not-possible.png")

    with db_lock:
        conversation = shown_conversation(frame, demo)
        assert not PendingAction.objects.for_client(demo).filter(conversation=conversation).exists()
        runs = list(
            ToolExecution.objects.unscoped(ALL)
            .filter(conversation=conversation)
            .values_list("tool__name", "params")
        )
    assert runs == [("get_order_status", {"order_id": DELIVERED})]  # read, never cancelled

    # An order still being prepared gets the question, with its buttons, as before.
    send(frame, f"please cancel order {PROCESSING}")
    confirmation = frame.locator("li.gd-kind--confirmation_request")
    expect(confirmation).to_contain_text(PROCESSING)
    expect(confirmation.get_by_role("button", name="Yes")).to_be_visible()
    with db_lock:
        assert not ToolExecution.objects.unscoped(ALL).filter(tool__name="cancel_order").exists()
    assert taken.is_file() and taken.stat().st_size > 5_000
    page.close()
