"""The chat widget in a real browser: the demo shop page at `/`, the launcher from
static/widget.js, the iframe chat talking to the live server, the scripted fake LLM behind it.
Screenshots land in ci-artifacts/screenshots/."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings as django_settings
from playwright.sync_api import expect

from apps.clients.models import Client
from apps.conversations.models import Message
from apps.escalations.services import staff_reply
from apps.tools.models import ToolExecution
from devtools.fake_llm import Delay
from tests.browser.helpers import (
    assert_the_cancel_ran,
    assert_the_confirmed_action_ran,
    open_widget,
    phone_context,
    send,
    shot,
    shown_conversation,
)
from tests.support.shop import assess, cancel_assess, critique

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ORDER = "TH-10043"  # an order the demo shop's order book has as "processing": cancellable


def test_chat_typing_indicator_and_the_three_turn_cancel(
    browser: Any, live_server, demo, llm, screenshots
):
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    console_errors: list[str] = []  # CSP violations and script errors show up here

    def on_console(msg: Any) -> None:
        if msg.type == "error":
            console_errors.append(f"{msg.text} @ {msg.location.get('url', '')}")

    page.on("console", on_console)
    page.on("pageerror", lambda exc: console_errors.append(str(exc)))
    frame = open_widget(page, live_server.url, demo)
    taken = [shot(page, screenshots, "widget-open.png")]

    # A simple question; the model takes a second, so the typing indicator shows meanwhile.
    llm.script(
        "assess",
        Delay(1.0, then=assess(response="Orders placed before noon MT ship the same day.")),
    )
    send(frame, "When do you ship?")
    expect(frame.locator("li.gd-msg--user").last).to_contain_text("When do you ship?")
    expect(frame.get_by_text("The assistant is typing…")).to_be_visible()
    taken.append(shot(page, screenshots, "widget-typing.png"))
    reply = frame.locator("li.gd-msg--assistant[data-seq]").last
    expect(reply).to_contain_text("Orders placed before noon MT ship the same day.")
    expect(frame.locator("#gd-typing")).to_be_hidden()
    expect(frame.get_by_label("Your message")).to_have_value("")
    taken.append(shot(page, screenshots, "widget-reply.png"))

    # Turn 1: no order number yet → the assistant asks for it.
    llm.script(
        "assess",
        cancel_assess(
            None, response="I can help cancel your order. What's the order number?", confidence=8
        ),
    )
    llm.script(
        "critique",
        critique("ASK_USER", "Could you give me your order number? It looks like TH-12345."),
    )
    send(frame, "Cancel my order")
    expect(frame.get_by_text("Could you give me your order number?")).to_be_visible()

    # Turn 2: the number → a confirmation request with quick Yes / No buttons.
    llm.script("assess", cancel_assess(ORDER))
    llm.script(
        "critique",
        critique("ASK_USER", f"Do you want me to cancel order {ORDER}?", "Needs confirmation"),
    )
    send(frame, f"It's {ORDER}")
    confirmation = frame.locator("li.gd-kind--confirmation_request")
    expect(confirmation).to_contain_text(ORDER)
    yes = confirmation.get_by_role("button", name="Yes")
    expect(yes).to_be_visible()
    expect(yes).to_be_in_viewport()  # the chat kept itself scrolled to the newest message
    expect(confirmation.get_by_role("button", name="No")).to_be_visible()
    taken.append(shot(page, screenshots, "widget-confirm.png"))
    assert (
        ToolExecution.objects.unscoped("test checks the database directly")
        .filter(tool__name="cancel_order")
        .count()
        == 0
    )  # nothing runs before the customer confirms

    # Turn 3: "Yes" (the button sends the word) → the tool runs once → the result.
    llm.script("assess", cancel_assess(ORDER, confirmed=True))
    llm.script("critique", critique("PROCEED", reasoning="The customer confirmed."))
    llm.script(
        "compose", {"response": f"Done! Order {ORDER} is cancelled; the refund is on its way."}
    )
    yes.click()
    done = frame.get_by_text(f"Done! Order {ORDER} is cancelled")
    expect(done).to_be_visible()
    expect(done).to_be_in_viewport()
    assert frame.locator("#gd-typing").is_hidden()  # at once, not after the next stream poll
    expect(frame.locator(".gd-quick")).to_have_count(0)  # quick replies go once answered
    expect(frame.get_by_label("Your message")).to_be_focused()
    taken.append(shot(page, screenshots, "widget-confirm-done.png"))

    assert_the_cancel_ran(ORDER)
    assert_the_confirmed_action_ran()
    assert list(
        Message.objects.unscoped("test checks the database directly")
        .filter(role="user")
        .order_by("seq")
        .values_list("text", flat=True)
    ) == [
        "When do you ship?",
        "Cancel my order",
        f"It's {ORDER}",
        "Yes",
    ]
    # internal reasoning never reached the page
    html = page.frame_locator("#guidedesk-panel iframe").locator("body").inner_text()
    assert "confidence" not in html.lower() and "critique" not in html.lower()

    # Escape closes the chat and gives focus back to the launcher.
    frame.get_by_label("Your message").press("Escape")
    launcher = page.locator("#guidedesk-launcher")
    expect(launcher).to_have_attribute("aria-expanded", "false")
    expect(launcher).to_be_focused()

    for path in taken:
        assert path.is_file() and path.stat().st_size > 5_000, path
    assert [e for e in console_errors if "favicon" not in e] == []
    page.close()


def test_staff_reply_and_handoff_show_in_the_open_widget(
    browser: Any, live_server, demo, db_lock, llm, screenshots
):
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    requests: list[tuple[str, str]] = []
    page.on("request", lambda request: requests.append((request.method, request.url)))
    frame = open_widget(page, live_server.url, demo)
    llm.script("assess", assess(response="I'm sorry to hear that! Let me look into it."))
    with page.expect_response(lambda r: "/events?" in r.url) as stream:
        send(frame, "My tent pole arrived broken")
    assert stream.value.status == 200
    assert stream.value.headers["content-type"].startswith("text/event-stream")
    expect(frame.get_by_text("Let me look into it.")).to_be_visible()
    expect(frame.locator("#gd-handoff")).to_be_hidden()

    # A person replies from the back office while the customer has the chat open.
    conversation = shown_conversation(frame, demo)
    with db_lock:
        staff_reply(
            client=demo,
            conversation=conversation,
            text="Hi, I'm Sam from Trailhead — a replacement pole ships today.",
        )
    handoff = frame.locator("li.gd-kind--handoff")
    expect(handoff).to_contain_text("A member of our team has joined the conversation.")
    staff = frame.locator("li.gd-msg--staff")
    expect(staff).to_contain_text("a replacement pole ships today")
    expect(staff.locator(".gd-who")).to_contain_text("Support team")
    expect(staff.locator(".gd-badge")).to_have_text("Staff")
    expect(frame.locator("#gd-handoff")).to_be_visible()
    expect(frame.locator("#gd-handoff")).to_contain_text("You're now chatting with our team.")
    expect(frame.locator("#gd-subtitle")).to_have_text("Our support team")
    # ...delivered by the event stream: the chat never had to fall back to polling. (Its one
    # GET …/messages after the staff reply is the "seen" report, docs/widget.md "Coming back".)
    last = conversation.messages.order_by("-seq").first()
    gets = [url for method, url in requests if method == "GET" and "/messages" in url]
    assert last is not None and last.role == "staff"
    assert all(url.endswith(f"/messages?after={last.seq}") for url in gets), gets
    assert len(gets) <= 1, gets
    path = shot(page, screenshots, "widget-staff-reply.png")
    assert path.is_file() and path.stat().st_size > 5_000

    # The customer answers; no assistant runs while a person owns the conversation.
    calls = len(llm.requests)
    send(frame, "Thank you!")
    expect(frame.locator("li.gd-msg--user").last).to_contain_text("Thank you!")
    expect(frame.locator("#gd-typing")).to_be_hidden()
    assert len(llm.requests) == calls
    page.close()


def test_small_screen_offline_label_reload_and_a_failed_send(
    browser: Any, live_server, demo, settings, screenshots
):
    settings.OPENAI_API_KEY = ""  # the labelled offline demo model answers
    context = phone_context(browser)
    page = context.new_page()
    frame = open_widget(page, live_server.url, demo)
    panel = page.locator("#guidedesk-panel").bounding_box()
    assert panel is not None and panel["width"] == 360  # the chat takes the whole phone screen
    expect(page.locator("#guidedesk-launcher")).to_be_hidden()

    send(frame, "Do you ship internationally?")
    reply = frame.locator("li.gd-msg--assistant[data-seq]").first
    expect(reply).to_be_visible()
    expect(reply.locator(".gd-badge--offline")).to_have_text("Demo model — offline")
    expect(frame.locator("#gd-typing")).to_be_hidden()  # the reply ends the typing line
    overflow = frame.locator("body").evaluate(
        "body => document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow == 0  # nothing sticks out sideways at 360 px
    taken = [shot(page, screenshots, "widget-360.png")]

    # A reload resumes: the chat re-opens with the conversation (sessionStorage).
    page.reload()
    frame = page.frame_locator("#guidedesk-panel iframe")
    expect(frame.get_by_text("Do you ship internationally?")).to_be_visible()
    expect(frame.locator("li.gd-msg--assistant[data-seq]")).to_have_count(reply_count(demo))

    # Sending fails (throttled): a clear error line, and the typed text is kept.
    rest: dict[str, Any] = dict(django_settings.REST_FRAMEWORK)
    rest["DEFAULT_THROTTLE_RATES"] = {**rest["DEFAULT_THROTTLE_RATES"], "widget_messages": "1/min"}
    settings.REST_FRAMEWORK = rest
    send(frame, "Are you still there?")
    expect(frame.get_by_role("alert")).to_contain_text("please wait")
    expect(frame.get_by_label("Your message")).to_have_value("Are you still there?")
    expect(frame.locator("li.gd-pending")).to_have_count(0)
    taken.append(shot(page, screenshots, "widget-360-error.png"))
    assert (
        not Message.objects.unscoped("test checks the database directly")
        .filter(text="Are you still there?")
        .exists()
    )

    # The close button inside the chat closes it on a phone.
    frame.get_by_role("button", name="Close chat").click()
    expect(page.locator("#guidedesk-launcher")).to_be_visible()
    for path in taken:
        assert path.is_file() and path.stat().st_size > 5_000, path
    context.close()


def reply_count(client: Client) -> int:
    return Message.objects.filter(client=client, role="assistant", visibility="visible").count()


def test_without_eventsource_the_chat_falls_back_to_polling(
    browser: Any, live_server, demo, db_lock, llm
):
    context = browser.new_context(viewport={"width": 1024, "height": 800})
    # Runs in every frame before its scripts: a browser (or proxy) without server-sent events.
    context.add_init_script("delete window.EventSource;")
    page = context.new_page()
    requests: list[tuple[str, str]] = []
    page.on("request", lambda request: requests.append((request.method, request.url)))
    frame = open_widget(page, live_server.url, demo)
    llm.script("assess", assess(response="Happy to help with sizing."))
    send(frame, "Which size should I get?")
    expect(frame.get_by_text("Happy to help with sizing.")).to_be_visible()

    with db_lock:
        staff_reply(
            client=demo,
            conversation=shown_conversation(frame, demo),
            text="Hi, Alex here — go half a size up.",
        )
    expect(frame.locator("li.gd-msg--staff")).to_contain_text("go half a size up")
    expect(frame.locator("#gd-handoff")).to_be_visible()
    assert [url for method, url in requests if method == "GET" and "/messages?after=" in url]
    assert not [url for _, url in requests if "/events" in url]
    context.close()
