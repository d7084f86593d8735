"""A reply shown word by word in a real browser: while the scripted model streams a confident,
tool-free answer, the widget's `delta` events grow one bubble; the posted reply then replaces
it. A turn that calls a tool shows the typing line and no words before its reply."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from playwright.sync_api import expect

from devtools.fake_llm import assess_reply
from tests.browser.helpers import drafts, open_widget, record_drafts, send, shot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ANSWER = (
    "Orders placed before noon mountain time ship the same day, and every order over fifty "
    "dollars ships for free. Tracking arrives by e-mail as soon as the parcel leaves our "
    "warehouse in Boulder."
)


def streamed_assess(**fields: Any) -> dict[str, Any]:
    """An assessment in the order the schema asks for it: the reply text last."""
    return assess_reply(**fields)


def test_the_widget_shows_an_answer_word_by_word(
    browser: Any, live_server, demo, llm, word_by_word, screenshots
):
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    frame = open_widget(page, live_server.url, demo)

    llm.script("assess", streamed_assess(response=ANSWER))
    record_drafts(frame)
    send(frame, "When do you ship?")
    draft = frame.locator("li.gd-draft .gd-text")
    if connection.vendor != "sqlite":
        # (SQLite's in-memory test database serializes the live server's requests, so the
        # stream cannot read while the turn runs; CI runs PostgreSQL.)
        expect(draft).to_be_visible()
        shot(page, screenshots, "widget-streaming.png")
    reply = frame.locator("li.gd-msg--assistant[data-seq]").last
    expect(reply).to_contain_text(ANSWER)
    if connection.vendor != "sqlite":
        # The visible text grew over several changes, each the start of the answer.
        seen, _ = drafts(frame, until=ANSWER)
        grown = [text for text in seen if text]
        assert len(grown) >= 3, seen
        assert all(ANSWER.startswith(text) for text in grown), seen
        assert len(grown[-1]) > len(grown[0])
    expect(frame.locator("li.gd-draft")).to_have_count(0)  # the posted reply replaced it
    expect(frame.locator("#gd-typing")).to_be_hidden()

    # A turn that calls a tool: the typing line, never a word before the reply.
    llm.script(
        "assess",
        streamed_assess(
            response="Let me look that order up.",
            tool_call="get_order_status",
            tool_params={"order_id": "TH-10043"},
        ),
    )
    llm.script("compose", {"response": "Order TH-10043 is being packed right now."})
    record_drafts(frame)
    send(frame, "Where is TH-10043?")
    expect(frame.get_by_text("Order TH-10043 is being packed right now.")).to_be_visible()
    assert drafts(frame) == ([], 0)  # no bubble was ever shown
    assert not errors
