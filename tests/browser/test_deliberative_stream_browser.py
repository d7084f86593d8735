"""A deliberative answer shown word by word in a real browser: while the loop reasons, the
typing line counts its steps; then the call that writes the final answer (here the last
refinement round, which refinement keeps) streams it — one bubble grows, and the posted reply
replaces it. An answer shown and then taken back (its call failed twice) leaves only the posted
reply: the text that was shown is nowhere in the log."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from playwright.sync_api import expect

from apps.clients.deliberation import default_deliberation
from apps.clients.models import Plan
from apps.clients.rubrics import SUPPORT
from devtools.fake_llm import Delay, Truncated, assess_reply
from tests.browser.helpers import drafts, open_widget, record_drafts, send, shot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

KEYS = [p["key"] for p in SUPPORT["principles"]]

SYNTHESIS = "Boots can be returned within 30 days of delivery, unworn and with the receipt."
ANSWER = (
    "Boots can be returned within 30 days of delivery as long as they are unworn and you "
    "still have the receipt. Reply here with your order number and we will e-mail you a "
    "prepaid label for the parcel the same day."
)
SANDALS = "Sandals can be returned within 30 days too, unworn and with the receipt."
TAKEN_BACK = (
    "Sandals can be returned within 30 days as well, and we add a voucher for free shipping "
    "on your next order when you send them back with the receipt."
)


def synthesis(response: str) -> dict[str, Any]:
    """The synthesis in the order the schema asks for it: the reply text last."""
    return assess_reply(response, complaint=False)


def script_loop(llm: Any, synthesized: str) -> None:
    """Two reasoning steps, each taking a moment (the typing line counts them), the synthesis,
    and a critique that asks for one improvement."""
    llm.default(
        "reason_step",
        Delay(
            1.2,
            then={
                "content": "internal reasoning",
                "status": "continue",
                "scores": dict.fromkeys(KEYS, 0.85),
                "rationale": "r",
                "hypotheses": [],
            },
        ),
    )
    llm.default("feedback", {"feedback": "keep it grounded"})
    llm.script("synthesize", synthesis(synthesized))
    llm.script(
        "refine_critique",
        {
            "score": 60,
            "issues": [{"quote": "with the receipt", "problem": "no next step", "kind": "tone"}],
            "critique": "say what to do next",
        },
    )


def test_a_deliberative_answer_streams_after_its_progress(
    browser: Any, live_server, demo, llm, word_by_word, screenshots
):
    Plan.objects.filter(clients=demo).update(
        ai_mode="deliberative",
        deliberation={
            **default_deliberation(),
            "min_steps": 2,
            "max_steps": 2,
            "refinement_iterations": 1,
        },
        evaluation_enabled=False,
    )
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    frame = open_widget(page, live_server.url, demo)
    typing = frame.locator("#gd-typing")
    reply = frame.locator("li.gd-msg--assistant[data-seq]")

    script_loop(llm, SYNTHESIS)
    llm.script("improve", {"response": ANSWER})
    record_drafts(frame)
    send(frame, "Can I still return boots I bought three weeks ago?")
    if connection.vendor != "sqlite":
        # (SQLite's in-memory test database serializes the live server's requests, so the
        # stream cannot read while the turn runs; CI runs PostgreSQL.)
        expect(typing).to_contain_text("Thinking it through… step")
        expect(frame.locator("li.gd-draft")).to_have_count(0)  # no words while it reasons
        shot(page, screenshots, "widget-deliberative-stream-progress.png")
        expect(frame.locator("li.gd-draft .gd-text")).to_be_visible()
        expect(typing).to_be_hidden()  # the growing answer stands in for the typing line
        shot(page, screenshots, "widget-deliberative-stream.png")
    expect(reply.last).to_contain_text(ANSWER)
    if connection.vendor != "sqlite":
        # The visible text grew over several changes, each the start of the answer.
        seen = [text for text in drafts(frame, until=ANSWER)[0] if text]
        assert len(seen) >= 3, seen
        assert all(ANSWER.startswith(text) for text in seen), seen
        assert len(seen[-1]) > len(seen[0])
    expect(frame.locator("li.gd-draft")).to_have_count(0)  # the posted reply replaced it
    expect(typing).to_be_hidden()
    expect(frame.get_by_text("internal reasoning")).to_have_count(0)
    expect(frame.get_by_text(SYNTHESIS)).to_have_count(0)  # refined, so never shown

    # The last improvement is cut off twice after its words were shown: they are taken back,
    # and refinement's best version (the synthesis) is the reply.
    script_loop(llm, SANDALS)
    cut = json.dumps({"response": TAKEN_BACK})[:-40]
    # (The retry takes a moment to begin: the widget shows the typing line again meanwhile.)
    llm.script("improve", Truncated(cut), Delay(1.5, then=Truncated(cut)))
    record_drafts(frame)
    send(frame, "And sandals?")
    final = frame.locator("li.gd-msg--assistant[data-seq]", has_text=SANDALS)
    expect(final).to_have_count(1)
    if connection.vendor != "sqlite":
        seen, _ = drafts(frame, until=SANDALS)
        assert [text for text in seen if text], "the improvement was shown while written"
        assert all(TAKEN_BACK.startswith(text) for text in seen), seen
        # Taken back before the turn went on: the bubble went away before the reply came.
        assert "" in seen, seen
    shot(page, screenshots, "widget-deliberative-taken-back.png")
    expect(frame.locator("li.gd-draft")).to_have_count(0)
    # Only the posted reply: nothing of the taken-back text is left on screen.
    expect(frame.locator("#gd-log")).not_to_contain_text("as well, and we add a voucher")
    expect(typing).to_be_hidden()
    assert not errors
