"""Deliberative mode in the widget, in a real browser: the customer sees "Thinking it
through… step N" while the loop runs (never the reasoning), and a clarifying question's options
as quick-reply buttons that send the chosen option."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from playwright.sync_api import expect

from apps.clients.deliberation import default_deliberation
from apps.clients.models import Plan
from apps.clients.rubrics import SUPPORT
from apps.conversations.models import Message
from devtools.fake_llm import Delay
from tests.browser.helpers import open_widget, send, shot
from tests.support.shop import assess

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

KEYS = [p["key"] for p in SUPPORT["principles"]]


def step(n: int, score: float, hypotheses: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "content": f"internal reasoning {n}",
        "status": "continue",
        "scores": dict.fromkeys(KEYS, score),
        "rationale": "r",
        "hypotheses": hypotheses or [],
    }


def test_the_widget_shows_progress_and_clarifying_quick_replies(
    browser: Any, live_server, demo, llm, screenshots
):
    Plan.objects.filter(clients=demo).update(
        ai_mode="deliberative",
        deliberation={**default_deliberation(), "min_steps": 3, "refinement_iterations": 1},
    )
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    frame = open_widget(page, live_server.url, demo)

    # The loop takes a moment per step: the typing line counts the steps.
    llm.script("reason_step", *[Delay(1.2, then=step(n, 0.8)) for n in (1, 2, 3)])
    llm.script("feedback", {"feedback": "f1"}, {"feedback": "f2"})
    llm.script("synthesize", assess(response="Returns are accepted within 30 days of delivery."))
    llm.script("refine_critique", {"score": 95, "issues": [], "critique": "good"})
    send(frame, "Can I still return boots I bought 40 days ago?")
    typing = frame.locator("#gd-typing")
    if connection.vendor != "sqlite":
        # (SQLite's in-memory test database serializes the live server's requests, so the
        # stream cannot read the turn's progress while the turn runs; CI runs PostgreSQL.)
        expect(typing).to_contain_text("Thinking it through… step 2")
        shot(page, screenshots, "widget-deliberative-progress.png")
    reply = frame.locator("li.gd-msg--assistant[data-seq]").last
    expect(reply).to_contain_text("Returns are accepted within 30 days of delivery.")
    expect(typing).to_be_hidden()
    expect(frame.get_by_text("internal reasoning 1")).to_have_count(0)

    # Two close readings: one clarifying question, its options as quick replies.
    hypotheses = [
        {"intent": "a refund", "confidence": 0.5},
        {"intent": "an exchange", "confidence": 0.45},
    ]
    llm.script("reason_step", step(1, 0.5, hypotheses))
    llm.script(
        "clarify",
        {"question": "Would you like a refund or an exchange?", "options": ["Refund", "Exchange"]},
    )
    send(frame, "I want to send these back")
    question = frame.locator("li.gd-kind--clarification").last
    expect(question).to_contain_text("Would you like a refund or an exchange?")
    buttons = question.locator(".gd-quick button")
    expect(buttons).to_have_text(["Refund", "Exchange"])
    shot(page, screenshots, "widget-clarify.png")

    llm.script("reason_step", *[step(n, 0.8) for n in (1, 2, 3)])
    llm.script("feedback", {"feedback": "f1"}, {"feedback": "f2"})
    llm.script("synthesize", assess(response="Happy to exchange them — here is how."))
    llm.script("refine_critique", {"score": 95, "issues": [], "critique": "good"})
    question.get_by_role("button", name="Exchange").click()
    expect(frame.locator("li.gd-msg--user").last).to_contain_text("Exchange")
    expect(frame.locator("li.gd-msg--assistant[data-seq]").last).to_contain_text(
        "Happy to exchange them"
    )
    expect(frame.locator(".gd-quick")).to_have_count(0)  # answered: the buttons go
    assert (
        Message.objects.unscoped("test checks the database directly")
        .filter(role="user", text="Exchange")
        .exists()
    )
    assert not llm.calls("clarify")[1:]  # the answer was reasoned on, not asked about again
    assert errors == []
