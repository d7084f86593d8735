"""The evaluation layer seen in a real browser (the system's /usr/bin/chromium): a customer asks
the demo shop about returns in the widget, the draft gets the return window wrong, the `evaluate`
step checks it against the fetched returns policy and replaces it; the customer reads the
corrected answer, and staff see what happened in the conversation's debug view. Screenshots land
in ci-artifacts/screenshots/."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from apps.clients.models import Plan
from tests.browser.helpers import open_widget, page_signed_in_as, send, shot, shown_conversation
from tests.factories import UserFactory
from tests.support.shop import assess

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WRONG = (
    "You can return hiking boots within 30 days of delivery, as long as they are unused and "
    "still have their tags attached."
)
# Every claim in the policy's own words (an improvement that is not is refused: "hiking boots"
# is the customer's phrase, the policy says "footwear").
RIGHT = (
    "Footwear can be returned within 60 days of delivery. It must be unused — tried on "
    "indoors only, with no dirt or wear on the soles — and have its tags attached."
)


def test_an_answer_corrected_by_the_evaluation_in_the_widget_and_the_debug_view(
    browser: Any, live_server: Any, demo: Any, llm: Any, screenshots: Any
) -> None:
    Plan.objects.filter(pk=demo.plan_id).update(evaluation_enabled=True)
    policy = demo.business_info["policies"]["returns"]
    llm.script("assess", assess(confidence=5, needs_more_context=["policies.returns"]))
    llm.script("assess", assess(response=WRONG, confidence=8))
    llm.script(
        "evaluate",
        {
            "valid": False,
            "improved_response": RIGHT,
            "improved_confidence": 95,
            "evaluation": "The returns policy gives 60 days, not 30, and footwear must be tried "
            "on indoors only.",
        },
    )

    page = browser.new_page(viewport={"width": 1280, "height": 860})
    frame = open_widget(page, live_server.url, demo)
    send(frame, "How long do I have to return hiking boots?")
    reply = frame.locator("li.gd-msg--assistant[data-seq]").last
    expect(reply).to_contain_text("within 60 days of delivery")
    assert "30 days" not in reply.inner_text()
    shot(page, screenshots, "evaluation-widget.png")
    [call] = llm.calls("evaluate")
    assert policy in call.prompt_text  # checked against the real policy text

    # staff: the debug view of the conversation
    conversation = shown_conversation(frame, demo)
    admin = page_signed_in_as(
        browser,
        live_server.url,
        UserFactory(is_superuser=True),
        viewport={"width": 1280, "height": 1000},
    )
    admin.goto(f"{live_server.url}/admin/conversations/conversation/{conversation.pk}/change/")
    block = admin.locator(".gd-evaluation")
    expect(block).to_contain_text("Improved — a better answer replaced the draft")
    expect(block).to_contain_text("80 % → 95 %")
    expect(block).to_contain_text("The returns policy gives 60 days, not 30")
    expect(block.locator("del.gd-replaced")).to_have_text(WRONG)
    expect(block).to_contain_text("Checked against: minimal context, policies.returns")
    block.scroll_into_view_if_needed()
    admin.screenshot(path=str(screenshots / "evaluation-debug-view.png"), full_page=True)
    admin.context.close()
    page.close()
