"""Outcomes in a real browser: the customer rates the conversation in the widget (asked once it
has gone quiet after an answer, or from "Rate this chat"), and the console's outcomes page
counts the rating."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Route, expect

from apps.conversations.models import ConversationRating
from tests.browser.helpers import agent_page, open_widget, send, shot
from tests.support.shop import assess

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def staff_page(browser, live_server, demo, monkeypatch) -> Iterator[Any]:
    page = agent_page(browser, live_server, demo, monkeypatch)
    yield page
    page.context.close()


def quick_rating_prompt(route: Route) -> None:
    """Serve the chat frame asking for the rating after 1 s of quiet instead of 2 minutes."""
    response = route.fetch()
    body = response.text().replace('data-idle-seconds="120"', 'data-idle-seconds="1"')
    route.fulfill(response=response, body=body)


def test_the_customer_rates_and_the_outcomes_page_counts_it(
    browser: Any, live_server, demo, llm, staff_page, screenshots
):
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.route("**/widget/frame/**", quick_rating_prompt)
    frame = open_widget(page, live_server.url, demo)

    # Nothing to rate before the assistant has answered.
    expect(frame.locator("#gd-rate-open")).to_be_hidden()
    llm.script("assess", assess(response="Yes — gift cards from $25, delivered by e-mail."))
    send(frame, "Do you offer gift cards?")
    expect(frame.locator("li.gd-msg--assistant[data-seq]").last).to_contain_text("gift cards")

    # The conversation goes quiet: the widget asks how it went.
    rating_form = frame.locator("#gd-rating")
    expect(rating_form).to_be_visible()
    expect(rating_form).to_contain_text("How did we do?")
    frame.get_by_role("button", name="Send rating").click()
    expect(frame.get_by_role("alert")).to_contain_text("Choose 1 to 5 stars first.")
    frame.get_by_label("4 of 5 — happy").check(force=True)
    frame.get_by_label("5 of 5 — very happy").check(force=True)
    expect(frame.locator(".gd-star--on")).to_have_count(5)
    frame.get_by_placeholder("Anything to add? (optional)").fill("Quick and clear.")
    shot(page, screenshots, "widget-rating.png")
    frame.get_by_role("button", name="Send rating").click()
    expect(frame.get_by_text("Thanks for your rating!")).to_be_visible()
    expect(rating_form).to_be_hidden()
    expect(frame.locator("#gd-rate-open")).to_be_hidden()  # rated: not offered again

    rating = ConversationRating.objects.for_client(demo).get()
    assert (rating.score, rating.comment) == (5, "Quick and clear.")

    # Another quiet spell after a new answer does not ask again for this conversation.
    llm.script("assess", assess(response="You can buy them on the gift card page."))
    send(frame, "Where do I buy one?")
    expect(frame.locator("li.gd-msg--assistant[data-seq]").last).to_contain_text("gift card page")
    page.wait_for_timeout(1500)
    expect(frame.locator("#gd-rating")).to_be_hidden()
    assert errors == []

    # Staff see it counted on the outcomes page.
    staff_page.goto(f"{live_server.url}/console/?client={demo.slug}")
    staff_page.get_by_role("link", name="Outcomes").click()
    totals = staff_page.locator("[data-totals]")
    expect(totals).to_have_attribute("data-ratings", "1")
    expect(totals).to_have_attribute("data-conversations", "1")
    expect(staff_page.locator('[data-metric="csat"] strong')).to_have_text("100.0 %")
    expect(staff_page.locator('[data-metric="resolution_rate"] strong')).to_have_text("100.0 %")
    staff_page.screenshot(path=str(screenshots / "console-outcomes.png"), full_page=True)
    assert staff_page.errors == []


def test_the_customer_can_rate_from_the_footer_in_another_language(
    browser: Any, live_server, demo, llm
):
    page = browser.new_page(locale="es-ES", viewport={"width": 420, "height": 760})
    page.goto(live_server.url + "/")
    page.locator("#guidedesk-launcher").click()
    frame = page.frame_locator("#guidedesk-panel iframe")
    llm.script("assess", assess(response="Sí, tenemos tarjetas regalo desde 25 $."))
    send(frame, "¿Tienen tarjetas regalo?")
    expect(frame.locator("li.gd-msg--assistant[data-seq]").last).to_contain_text("tarjetas")
    frame.get_by_role("button", name="Valorar este chat").click()
    frame.get_by_label("2 de 5: insatisfecho").check(force=True)
    frame.get_by_role("button", name="Enviar valoración").click()
    expect(frame.get_by_text("¡Gracias por su valoración!")).to_be_visible()
    assert ConversationRating.objects.for_client(demo).get().score == 2


# The browser's Notification API, recorded: headless Chromium shows nothing to look at.
FAKE_NOTIFICATIONS = """
window.__notes = [];
window.__asked = 0;
class FakeNotification {
  constructor(title, options) { window.__notes.push({ title, ...options }); }
}
// A browser remembers the permission per site: so does the fake.
FakeNotification.permission = localStorage.getItem("fake:granted") ? "granted" : "default";
FakeNotification.requestPermission = () => {
  window.__asked += 1;
  localStorage.setItem("fake:granted", "1");
  FakeNotification.permission = "granted";
  return Promise.resolve("granted");
};
window.Notification = FakeNotification;
"""


def test_opt_in_browser_notification_for_a_new_handoff(
    browser: Any, live_server, db_lock, client_a, monkeypatch
):
    from apps.conversations.services import conversation_create, message_append
    from apps.escalations.services import escalation_create

    waiting, _ = conversation_create(client=client_a)
    escalation_create(client=client_a, conversation=waiting, reason="policy", notify=False)
    page = agent_page(browser, live_server, client_a, monkeypatch)
    page.context.add_init_script(FAKE_NOTIFICATIONS)
    try:
        page.goto(f"{live_server.url}/console/?client={client_a.slug}")
        toggle = page.locator("[data-notify-toggle]")
        expect(toggle).to_have_text("Notify me of new hand-offs")
        expect(toggle).to_have_attribute("aria-pressed", "false")

        # Off: a new hand-off raises nothing.
        before = page.evaluate("Date.now()")
        with db_lock:
            first, _ = conversation_create(client=client_a)
            escalation_create(client=client_a, conversation=first, reason="policy", notify=False)
        # The inbox on this page has fetched the conversations since (its own doorbell or
        # poll): a console page listening for hand-offs would have had this one too.
        page.wait_for_function(
            f"Number(document.getElementById('gd-inbox').dataset.refreshedAt || 0) > {before}"
        )
        assert page.evaluate("window.__notes.length") == 0

        toggle.click()
        expect(toggle).to_have_text("Hand-off notifications on")
        assert page.evaluate("window.__asked") == 1
        with db_lock:
            customer, _ = conversation_create(client=client_a)
            message_append(
                client=client_a, conversation=customer, role="user", text="A human, please"
            )
            escalation_create(
                client=client_a, conversation=customer, reason="customer_request", notify=False
            )
        page.wait_for_function("window.__notes.length === 1")
        note = page.evaluate("window.__notes[0]")
        assert note["title"] == "A conversation needs a person"
        assert "A human, please" in note["body"]
        # The hand-offs already open (and the one seen while off) never notify: they were in
        # the first fetch after the toggle, before the customer's, so they would have come first.
        assert page.evaluate("window.__notes.length") == 1

        # The choice is remembered on the next page.
        page.goto(f"{live_server.url}/console/outcomes/?client={client_a.slug}")
        expect(page.locator("[data-notify-toggle]")).to_have_text("Hand-off notifications on")
        assert page.errors == []
    finally:
        page.context.close()
