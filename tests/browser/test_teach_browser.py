"""Reply templates and flags in a real headless Chromium: an agent picks a template with the
keyboard ("/" and Ctrl+K, arrows, Enter), its variables come filled in, and sends it; then flags
the assistant's answer with a correction proposed as an FAQ and saves it as a test case."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from apps.conversations.models import Message
from apps.escalations.reply_templates import reply_template_create
from apps.flags.models import MessageFlag
from apps.insights.models import InsightProposal, ProposalStatus
from apps.simulations.models import SimCase
from tests.api.conftest import make_tenant_data
from tests.browser.conftest import SCREENSHOTS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FIX = "Order TH-12345 left the warehouse yesterday; tracking follows by e-mail."


def unscoped(model: Any) -> Any:
    return model.objects.unscoped("test checks the database directly")


def test_an_agent_replies_with_a_template_and_flags_an_answer(sam_page, live_server, client_a):
    page = sam_page
    data = make_tenant_data(client_a)  # its tool run looked up order TH-12345
    reply_template_create(
        client=client_a,
        name="Order shipped",
        shortcut="shipped",
        body="Hi, your order {order_id} is on its way. — {agent_name}",
    )
    reply_template_create(
        client=client_a, name="Thanks", shortcut="thanks", body="Thanks for waiting, {agent_name}."
    )
    page.goto(f"{live_server.url}/console/conversations/{data.conversation.public_id}/")
    box = page.get_by_label("Reply to the customer")

    # "/" at the start of the reply box opens the picker; typing filters, Enter inserts
    box.click()
    box.press_sequentially("/sh")
    picker = page.locator("[data-reply-templates]")
    expect(picker).to_be_visible()
    expect(picker.get_by_role("option")).to_have_count(1)
    box.press("Enter")
    expect(picker).to_be_hidden()
    expect(box).to_have_value("Hi, your order TH-12345 is on its way. — Sam")

    # Ctrl+K opens it anywhere; the arrows move the choice
    box.fill("")
    box.press("Control+k")
    expect(picker).to_be_visible()
    expect(picker.get_by_role("option")).to_have_count(2)
    page.keyboard.press("ArrowDown")
    expect(picker.locator("[aria-selected=true]")).to_have_attribute("data-shortcut", "thanks")
    page.keyboard.press("ArrowUp")
    page.keyboard.press("Enter")
    expect(box).to_have_value("Hi, your order TH-12345 is on its way. — Sam")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "console-reply-template.png"), full_page=True)
    page.get_by_role("button", name="Send reply").click()
    page.get_by_text("Reply sent.").wait_for()
    reply = unscoped(Message).get(conversation=data.conversation, role="staff")
    assert reply.text == "Hi, your order TH-12345 is on its way. — Sam"

    # flag the assistant's answer, with a correction proposed as an FAQ
    answer = page.locator("li.gd-role-assistant", has_text="Let me check that for you.")
    answer.get_by_role("button", name="Flag").click()
    dialog = page.locator("[data-flag-dialog]")
    expect(dialog).to_be_visible()
    dialog.get_by_label("Unhelpful").check()
    dialog.get_by_label("What should it have said? (optional)").fill(FIX)
    dialog.get_by_label("Teach the assistant").select_option("faq")
    dialog.get_by_role("button", name="Flag").click()
    # The flag's POST makes the proposal in the request: on a loaded 2-core CI box that can take
    # longer than the default 5 s.
    expect(dialog).to_be_hidden()
    expect(answer.get_by_text("Flagged: Unhelpful")).to_be_visible()
    expect(answer.get_by_text("Proposed for review:")).to_be_visible()
    review = answer.get_by_role("link", name="Flagged answer: Where is my order?")
    assert "/admin/insights/insightproposal/" in (review.get_attribute("href") or "")
    flag = unscoped(MessageFlag).get()
    assert (flag.reason, flag.correction, flag.flagged_by) == ("unhelpful", FIX, page.staff_user)
    proposal = unscoped(InsightProposal).get()
    assert proposal.answer == FIX and proposal.status == ProposalStatus.PENDING_REVIEW

    answer.get_by_role("button", name="Save as test case").click()
    expect(answer.get_by_text("Saved as test case flagged-")).to_be_visible()
    case = unscoped(SimCase).get()
    assert case.turns == [{"customer": "Where is my order?", "expect": {}}]

    # the flag is still there after a reload, and the staff reply can be taught from
    page.reload()
    answer = page.locator("li.gd-role-assistant", has_text="Let me check that for you.")
    expect(answer.get_by_text("Flagged: Unhelpful")).to_be_visible()
    staff = page.locator("li.gd-role-staff")
    staff.get_by_role("button", name="Teach from this reply").click()
    expect(staff.get_by_text("Proposed for review:")).to_be_visible()
    taught = unscoped(InsightProposal).get(source_message=reply)
    assert (taught.kind, taught.answer) == ("faq", reply.text)
    page.screenshot(path=str(SCREENSHOTS / "console-flagged-answer.png"), full_page=True)
    assert page.errors == []
