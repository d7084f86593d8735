"""Events out in a real browser (the system's /usr/bin/chromium): a support lead signs into the
admin, subscribes the business's HTTPS endpoint to hand-offs and copies the signing secret shown
once; a customer asks the demo shop's widget for a person; the endpoint receives the
`conversation.handed_off` event signed with that secret; the lead finds the delivery in the log,
Delivered, and resends it — the endpoint gets the same `webhook-id` again."""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest
from playwright.sync_api import expect
from standardwebhooks.webhooks import Webhook

from apps.events import tasks as event_tasks
from apps.events.models import DeliveryStatus, EventDelivery, EventSubscription
from tests.browser.conftest import TIMEOUT_MS
from tests.browser.helpers import (
    lead_signed_in,
    open_add_form,
    open_widget,
    send,
    shot,
    shown_conversation,
)
from tests.events.conftest import Receiver, receiver, tls_files  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SECRET_SHOWN = re.compile(r"The signing secret, shown this once: (whsec_\S+)")


class Sends:
    """Every `events.deliver` run that finished, in order, with what it returned; a test waits
    on it (a condition the sending thread notifies), never on a clock."""

    def __init__(self) -> None:
        self.outcomes: list[str] = []
        self.changed = threading.Condition()

    def wrap(self, send_one: Any) -> Any:
        def recorded(**kwargs: Any) -> str:
            outcome = str(send_one(**kwargs))
            with self.changed:
                self.outcomes.append(outcome)
                self.changed.notify_all()
            return outcome

        return recorded

    def wait_for(self, count: int) -> list[str]:
        with self.changed:
            done = self.changed.wait_for(
                lambda: len(self.outcomes) >= count, timeout=TIMEOUT_MS / 1000
            )
            assert done, f"{count} deliveries were not sent: {self.outcomes}"
            return list(self.outcomes)


@pytest.fixture
def sends(monkeypatch: pytest.MonkeyPatch) -> Sends:
    recorder = Sends()
    monkeypatch.setattr(event_tasks, "delivery_send", recorder.wrap(event_tasks.delivery_send))
    return recorder


def verified(request: dict[str, Any], secret: str) -> dict[str, Any]:
    """What the business does with the request: verify it with the standardwebhooks library."""
    headers = {name.lower(): value for name, value in request["headers"].items()}
    return Webhook(secret).verify(request["body"], headers)


def test_a_lead_subscribes_in_the_admin_and_resends_a_signed_handoff_event(
    browser: Any,
    live_server: Any,
    demo: Any,
    db_lock: Any,
    receiver: Receiver,  # noqa: F811
    sends: Sends,
    screenshots: Any,
) -> None:
    # The lead signs in and adds a subscription with the admin's own form.
    admin = lead_signed_in(browser, live_server.url, db_lock)
    open_add_form(admin, "Event subscriptions", "Add event subscription", demo)
    admin.locator("#id_name").fill("CRM")
    admin.locator("#id_url").fill(receiver.url)
    admin.get_by_role("checkbox", name="conversation.handed_off", exact=True).check()
    admin.get_by_role("button", name="Save", exact=True).click()

    shown = admin.locator(".messagelist .warning")
    expect(shown).to_contain_text("The signing secret, shown this once: whsec_")
    match = SECRET_SHOWN.search(shown.inner_text())
    assert match, shown.inner_text()
    secret = match.group(1)
    with db_lock:
        subscription = EventSubscription.objects.for_client(demo).get()
    assert subscription.secret == secret
    assert subscription.url == receiver.url
    assert subscription.event_types == ["conversation.handed_off"]

    # Reopened, the subscription never shows its secret again.
    admin.locator("#result_list").get_by_role("link", name="CRM", exact=True).click()
    expect(admin.locator("#id_url")).to_have_value(receiver.url)
    handed_off = admin.get_by_role("checkbox", name="conversation.handed_off", exact=True)
    expect(handed_off).to_be_checked()
    assert secret not in admin.content()
    expect(admin.locator("body")).not_to_contain_text("whsec_")

    # A customer asks for a person in the widget: the hand-off is an event for the endpoint.
    customer = browser.new_context(viewport={"width": 1280, "height": 860})
    shop = customer.new_page()
    frame = open_widget(shop, live_server.url, demo)
    send(frame, "I want to talk to a human")
    expect(frame.locator("#gd-handoff")).to_be_visible()
    assert sends.wait_for(1) == ["delivered"]
    with db_lock:
        conversation = shown_conversation(frame, demo)
        delivery = EventDelivery.objects.for_client(demo).get()
    customer.close()

    assert len(receiver.requests) == 1
    first = receiver.requests[0]
    event = verified(first, secret)
    assert event["type"] == "conversation.handed_off"
    assert event["data"]["conversation"] == str(conversation.public_id)
    assert event["data"]["reason"] == "customer_request"
    assert "detail" not in event["data"]  # customer text is off by default
    webhook_id = {k.lower(): v for k, v in first["headers"].items()}["webhook-id"]
    assert webhook_id == event["id"] == str(delivery.event_id)
    with pytest.raises(Exception):  # noqa: B017, PT011  (the library's own verification error)
        verified(first, "whsec_" + "QUJD" * 8)

    # The lead finds it in the delivery log, Delivered, and resends it.
    admin.goto(f"{live_server.url}/admin/")
    admin.get_by_role("link", name="Event deliveries").click()
    row = admin.locator("#result_list tbody tr").filter(has_text="conversation.handed_off")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("Delivered")
    expect(row.locator("td.field-attempts")).to_have_text("1")
    expect(row.locator("td.field-last_status_code")).to_have_text("200")
    shot(admin, screenshots, "events-deliveries.png")

    row.locator("input[name=_selected_action]").check()
    admin.locator("select[name=action]").select_option(label="Resend")
    admin.get_by_role("button", name="Run", exact=True).click()
    expect(admin.locator(".messagelist")).to_contain_text("1 queued to be sent again.")
    assert sends.wait_for(2) == ["delivered", "delivered"]

    assert len(receiver.requests) == 2
    again = receiver.requests[1]
    assert {k.lower(): v for k, v in again["headers"].items()}["webhook-id"] == webhook_id
    assert verified(again, secret) == event  # as it was: same id, same payload
    with db_lock:
        delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.DELIVERED
    assert delivery.attempts == 1  # a fresh schedule, delivered at its first attempt
    assert admin.errors == []
    admin.context.close()
