"""The conversation's language is sticky, in a real browser: on the README's English demo page,
"Order 12345" keeps the chat English — its words and the reply — however the detector would
guess at five letters (it used to turn the whole widget German); a Spanish customer's "12345"
and "sí" keep it Spanish, and asking for English switches it (docs/languages.md). Screenshot:
ci-artifacts/screenshots/widget-order-12345.png."""

from __future__ import annotations

import json
from typing import Any

import pytest
from playwright.sync_api import FrameLocator, Page, expect

from apps.conversations.models import Message
from apps.core.languages import detect
from tests.browser.conftest import ROOT
from tests.browser.helpers import open_widget, shot, shown_conversation

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

I18N = ROOT / "static" / "widget" / "i18n"


def words(code: str) -> dict[str, str]:
    return json.loads((I18N / f"{code}.json").read_text(encoding="utf-8"))


def catalogues_fetched(page: Page) -> list[str]:
    """The widget catalogues the page fetches from now on (a language switch fetches one)."""
    fetched: list[str] = []
    page.on(
        "request",
        lambda request: (
            fetched.append(request.url.rsplit("/", 1)[-1])
            if "/widget/i18n/" in request.url
            else None
        ),
    )
    return fetched


def say(page: Page, frame: FrameLocator, text: str) -> dict[str, Any]:
    """Type `text` into the chat's own box and press Enter, as a person would; the answer of
    the POST it makes."""
    with page.expect_response(
        lambda r: r.request.method == "POST" and r.url.endswith("/messages")
    ) as answered:
        box = frame.locator("#gd-input")  # labelled in the chat's language
        box.fill(text)
        box.press("Enter")
    response = answered.value
    assert response.status == 201, response.text()
    return response.json()


def assert_chrome(page: Page, frame: FrameLocator, code: str) -> None:
    w = words(code)
    expect(frame.locator("html")).to_have_attribute("lang", code)
    expect(frame.locator("#gd-send")).to_have_text(w["send"])
    expect(frame.locator("#gd-input")).to_have_attribute("placeholder", w["input_placeholder"])
    expect(frame.locator("#gd-subtitle")).to_have_text(w["subtitle_assistant"])
    expect(frame.locator("li.gd-msg--user .gd-who").last).to_have_text(w["who_you"])
    expect(page.locator("#guidedesk-launcher")).to_have_attribute("aria-label", w["launcher_close"])


def test_order_12345_keeps_the_widget_english(
    browser: Any, live_server, demo, db_lock, settings, screenshots
):
    settings.OPENAI_API_KEY = ""  # the offline demo model, as in the README's "Try it"
    assert "de" in demo.languages  # the demo shop serves German too: "Order 12345" could go there
    en = words("en")
    context = browser.new_context(viewport={"width": 1280, "height": 860}, locale="en-US")
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    frame = open_widget(page, live_server.url, demo)
    fetched = catalogues_fetched(page)

    # The README's steps 1 and 2, typed into the chat's own box.
    first = say(page, frame, "Cancel my order")
    assert first["language"] == "en" and first["message"]["language"] == "en"
    expect(frame.locator("li.gd-msg--assistant[data-seq]").last).to_be_visible()
    answer = say(page, frame, "Order 12345")
    # No evidence in "Order 12345": the server names no language for it, and the conversation
    # (the reply language) stays English.
    assert answer["message"]["language"] == ""
    assert answer["language"] == "en"

    confirmation = frame.locator("li.gd-kind--confirmation_request").last
    expect(confirmation).to_contain_text("TH-12345")
    expect(confirmation.get_by_role("button", name=en["yes"], exact=True)).to_be_visible()
    expect(confirmation.get_by_role("button", name=en["no"], exact=True)).to_be_visible()
    question = confirmation.locator(".gd-text").inner_text()
    assert detect(question) == "en", question  # the reply itself is English
    assert_chrome(page, frame, "en")
    path = shot(page, screenshots, "widget-order-12345.png")
    assert path.stat().st_size > 5_000

    with db_lock:
        conversation = shown_conversation(frame, demo)
        customer = Message.objects.for_client(demo).filter(conversation=conversation, role="user")
        stored = list(customer.order_by("seq").values_list("text", "language"))
    assert conversation.language == "en"
    assert stored == [
        ("Cancel my order", "en"),
        ("Order 12345", ""),
    ]
    assert [f for f in fetched if f != "en.json"] == []  # no other catalogue was ever wanted
    assert errors == []
    context.close()


def test_a_spanish_chat_stays_spanish_until_english_is_asked_for(
    browser: Any, live_server, demo, db_lock, settings
):
    settings.OPENAI_API_KEY = ""
    context = browser.new_context(viewport={"width": 1280, "height": 860}, locale="en-US")
    page = context.new_page()
    frame = open_widget(page, live_server.url, demo)

    body = say(page, frame, "Hola, quisiera cancelar mi pedido, por favor")
    assert body["language"] == "es"
    assert_chrome(page, frame, "es")
    for text in ("12345", "sí", "Maria Schmidt"):
        body = say(page, frame, text)
        assert body["language"] == "es" and body["message"]["language"] == "", text
        expect(frame.locator("li.gd-msg--user").last).to_contain_text(text)
        assert_chrome(page, frame, "es")

    body = say(page, frame, "Can you answer in English, please?")
    assert body["language"] == "en" and body["message"]["language"] == "en"
    assert_chrome(page, frame, "en")
    with db_lock:
        assert shown_conversation(frame, demo).language == "en"
    context.close()
