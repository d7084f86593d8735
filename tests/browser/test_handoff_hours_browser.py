"""Out of business hours, the widget's hand-off says when a person will answer — the next
opening in the client's time zone — and the e-mail form under it takes the customer's address,
in a real browser on the demo shop page."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from apps.escalations.models import Escalation, EscalationReason
from tests.browser.helpers import open_widget, send, shot, shown_conversation

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TOKYO = ZoneInfo("Asia/Tokyo")  # no daylight saving time: the expected opening is exact
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]  # fmt: skip


def test_out_of_hours_the_handoff_says_when_and_takes_an_email(
    browser: Any, live_server, demo, db_lock, screenshots
):
    today = timezone.now().astimezone(TOKYO).date()
    with db_lock:
        demo.business_hours = {
            "time_zone": "Asia/Tokyo",
            "weekly": {
                d: ["09:30-17:00"] for d in ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
            },
            "holidays": [str(today), str(today + timedelta(days=1))],  # closed now
        }
        demo.save(update_fields=["business_hours"])
    opening = datetime.combine(today + timedelta(days=2), datetime.min.time(), tzinfo=TOKYO)

    page = browser.new_page(viewport={"width": 1280, "height": 860})
    frame = open_widget(page, live_server.url, demo)
    send(frame, "I want to talk to a human")

    handoff = frame.locator("li.gd-kind--handoff")
    expect(handoff).to_contain_text("I've passed your conversation to our support team")
    expect(handoff).to_contain_text(
        f"Our team is away right now and will answer from {DAYS[opening.weekday()]}, "
        f"{MONTHS[opening.month - 1]} {opening.day}, {opening.year} at 9:30"
    )
    expect(handoff).to_contain_text("(Japan Standard Time)")
    expect(handoff).to_contain_text("Leave your e-mail address in this chat's e-mail field")
    expect(frame.locator("#gd-handoff")).to_be_visible()

    # The e-mail form the hand-off points at, submitted as a customer would.
    form = frame.locator("#gd-contact")
    expect(form).to_be_visible()
    frame.get_by_label("Leaving before we reply?", exact=False).fill("ana@example.com")
    form.get_by_role("button", name="Save").click()
    expect(frame.locator("#gd-contact-done")).to_contain_text("ana@example.com")
    path = shot(page, screenshots, "widget-handoff-out-of-hours.png")
    assert path.is_file() and path.stat().st_size > 5_000

    conversation = shown_conversation(frame, demo)
    conversation.refresh_from_db()
    assert conversation.contact_email == "ana@example.com"
    escalation = Escalation.objects.for_client(demo).get(conversation=conversation)
    assert escalation.reason == EscalationReason.CUSTOMER_REQUEST
    page.close()
