"""Identity verification in a real browser (docs/widget.md "Identity verification"): the demo
shop page signs its demo customer server-side and embeds the widget with the signed id; the
customer-scoped tool runs for them. A second, anonymous visitor — the page's own "Sign out" form
— asks the same and is told to sign in; the tool never runs for them."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from apps.api.views import DEMO_CUSTOMER_ID
from apps.conversations.models import Conversation
from apps.tools.models import ToolExecution
from tests.browser.helpers import open_widget, send, shot, shown_conversation
from tests.support.shop import assess, critique

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ORDER = "TH-10043"  # "processing" in the demo's order book: its address may change
ADDRESS = "12 Birch Lane, Boulder, CO 80302, USA"


def script_address_change(llm: Any) -> None:
    llm.script(
        "assess",
        assess(
            response="I'll update the address.",
            tool_call="update_shipping_address",
            tool_params={"order_id": ORDER, "address": ADDRESS},
        ),
    )
    llm.script("critique", critique("PROCEED", reasoning="All details given."))
    llm.script("compose", {"response": f"Done: order {ORDER} now ships to {ADDRESS}."})


def test_the_signed_in_customer_runs_the_tool_and_an_anonymous_visitor_is_refused(
    browser: Any, live_server, demo, llm, screenshots
):
    signed_in = browser.new_context(viewport={"width": 1280, "height": 860})
    page = signed_in.new_page()
    warnings: list[str] = []
    page.on("console", lambda msg: warnings.append(msg.text) if msg.type == "warning" else None)
    frame = open_widget(page, live_server.url, demo)
    expect(page.locator("[data-signed-in]")).to_have_attribute("data-signed-in", DEMO_CUSTOMER_ID)
    script_address_change(llm)
    send(frame, f"Please ship order {ORDER} to {ADDRESS}")
    reply = frame.locator("li.gd-msg--assistant[data-seq]").last
    expect(reply).to_contain_text(f"Done: order {ORDER} now ships to")
    shot(page, screenshots, "identity-verified.png")
    [execution] = ToolExecution.objects.filter(client=demo)
    assert execution.tool.name == "update_shipping_address"
    conversation = Conversation.objects.for_client(demo).get(pk=execution.conversation_id)
    assert conversation.customer_id == DEMO_CUSTOMER_ID and conversation.customer_verified
    assert conversation.customer_verified_via == "hmac"
    assert not [w for w in warnings if "GuideDesk" in w]  # the signature was accepted
    signed_in.close()

    # A second visitor on another browser: signed out through the page's own form.
    anonymous = browser.new_context(viewport={"width": 1280, "height": 860})
    page = anonymous.new_page()
    page.goto(live_server.url + "/")
    page.get_by_role("button", name="Sign out").click()
    expect(page.locator("[data-signed-in]")).to_have_text("Anonymous visitor")
    assert "as=anonymous" in page.url
    launcher = page.locator("#guidedesk-launcher")
    launcher.click()
    frame = page.frame_locator("#guidedesk-panel iframe")
    expect(frame.get_by_text(demo.greeting)).to_be_visible()
    llm.script(
        "assess",
        assess(
            response="I'll update the address.",
            tool_call="update_shipping_address",
            tool_params={"order_id": ORDER, "address": "1 Thief Road, Nowhere 00000, USA"},
        ),
    )
    send(frame, f"Ship order {ORDER} to 1 Thief Road, Nowhere 00000, USA")
    expect(frame.locator("li.gd-msg--user").last).to_contain_text("1 Thief Road")
    reply = frame.locator("li.gd-msg--assistant[data-seq]").last
    expect(reply).to_contain_text("signed-in customer")
    expect(reply).to_contain_text("sign in at http://127.0.0.1:8000/")
    shot(page, screenshots, "identity-anonymous.png")
    assert ToolExecution.objects.filter(client=demo).count() == 1  # never ran for them
    stranger = shown_conversation(frame, demo)
    assert stranger.pk != conversation.pk
    assert not stranger.customer_verified
    anonymous.close()


def test_a_message_typed_before_the_signature_arrives_waits_for_it(
    browser: Any, live_server, demo, llm
):
    """The page posts its signature when the chat frame has loaded. A customer quicker than
    that (a slow image still loading) has their message held until it arrives: it starts the
    signed-in customer's conversation, never an anonymous one that the signature then drops
    from the chat along with its reply."""
    held: list[Any] = []

    def slow_image(route: Any) -> None:
        response = route.fetch()
        route.fulfill(response=response, body=response.text().replace("</body>", _SLOW_IMAGE))

    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    page.route("**/widget/frame/**", slow_image)
    page.route("**/held-image.png", lambda route: held.append(route))
    page.goto(live_server.url + "/")
    with page.expect_request("**/held-image.png"):
        page.locator("#guidedesk-launcher").click()
    frame = page.frame_locator("#guidedesk-panel iframe")
    expect(frame.get_by_label("Your message")).to_be_enabled()  # the script runs; no load yet
    llm.script("assess", assess(response="Yes — gift cards from $25, delivered by e-mail."))
    send(frame, "Do you offer gift cards?")
    expect(frame.locator("li.gd-pending")).to_contain_text("gift cards")
    assert held, "the frame's image is still loading"
    assert not Conversation.objects.for_client(demo).exists()  # held for the signature
    held[0].fulfill(status=204)
    expect(frame.locator("li.gd-msg--assistant[data-seq]").last).to_contain_text("gift cards")
    conversation = shown_conversation(frame, demo)
    assert conversation.customer_id == DEMO_CUSTOMER_ID and conversation.customer_verified
    assert Conversation.objects.for_client(demo).count() == 1
    context.close()


_SLOW_IMAGE = '<img src="/held-image.png" alt="" width="1" height="1"></body>'
