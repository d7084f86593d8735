"""A customer who leaves during a hand-off and comes back (docs/widget.md "Coming back"), in real
Chromium: the conversation is kept in the browser (localStorage, per widget key and site), staff
replies sent meanwhile are there on return, one e-mail goes out for replies that were not seen,
none for replies the open widget showed, and "Start a new conversation" starts afresh.
Screenshots land in ci-artifacts/screenshots/."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.core import mail
from playwright.sync_api import Frame, Page, expect

from apps.conversations import services as conversation_services
from apps.conversations.models import Conversation, Message, Role
from apps.escalations.services import staff_reply
from tests.browser.conftest import TIMEOUT_MS, _holding
from tests.browser.helpers import open_widget, phone_context, send, shot, shown_conversation
from tests.support.shop import assess, critique
from tests.widget.contact import LINK, confirmation_links

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
ANONYMOUS = "/?as=anonymous"  # the demo shop page, signed out

CUSTOMER = "ann.walker@example.com"
DELAY = 2.0  # WIDGET_REPLY_EMAIL_DELAY_SECONDS for these tests


@pytest.fixture
def quick_emails(settings, db_lock, monkeypatch) -> list[int]:
    """The unseen-reply checks that have run (a countdown after each staff reply, and after the
    customer confirms an address), in order: how many replies each one e-mailed."""
    settings.WIDGET_REPLY_EMAIL_DELAY_SECONDS = DELAY
    checks: list[int] = []
    # The in-process timer reads the database from its own thread (see db_lock on SQLite).
    check = _holding(db_lock, conversation_services.unseen_replies_email)

    def counted(**kwargs: Any) -> int:
        sent = check(**kwargs)
        checks.append(sent)
        return sent

    monkeypatch.setattr(conversation_services, "unseen_replies_email", counted)
    return checks


def mails_to(address: str) -> list[Any]:
    """The e-mails of staff replies sent to `address` (not the address's confirmation)."""
    return [m for m in mail.outbox if address in m.to and not LINK.search(m.body)]


def wait_for(condition: Callable[[], Any], seconds: float = TIMEOUT_MS / 1000) -> Any:
    """`condition()` once it is true (checked every 0.1 s), else its last value."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    return condition()


def chat_frame(page: Page) -> Frame:
    frame = page.frame(url=re.compile(r"/widget/frame/"))
    assert frame is not None
    return frame


def test_leave_during_a_handoff_come_back_to_the_reply_and_one_email(
    browser: Any, live_server, demo, db_lock, llm, screenshots, quick_emails
):
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    frame = open_widget(page, live_server.url, demo)
    expect(frame.get_by_role("button", name="Start a new conversation")).to_be_hidden()

    # The assistant is unsure and hands the conversation to a person.
    llm.script("assess", assess(response="Let me see.", confidence=2))
    llm.script("critique", critique("ESCALATE", reasoning="A damaged item needs a person."))
    send(frame, "My tent arrived with a torn floor. What now?")
    expect(frame.locator("#gd-handoff")).to_be_visible()
    expect(frame.locator("li.gd-kind--handoff")).to_be_visible()
    expect(frame.get_by_role("button", name="Start a new conversation")).to_be_visible()

    # The chat asks for an address (optional); a bad one is refused by the server, named.
    email_box = frame.get_by_label(re.compile("Add your e-mail"))
    expect(email_box).to_be_visible()
    taken = [shot(page, screenshots, "widget-handoff-ask-email.png")]
    email_box.fill("ann@")
    frame.get_by_role("button", name="Save").click()
    expect(frame.locator("#gd-contact-error")).to_have_text("Enter a valid e-mail address.")
    email_box.fill(CUSTOMER)
    frame.get_by_role("button", name="Save").click()
    # The chat says plainly where replies will go, and that only after a confirmation.
    notice = frame.locator("#gd-contact-done")
    expect(notice).to_contain_text(CUSTOMER)
    expect(notice).to_contain_text("only after you confirm it")
    expect(frame.locator("#gd-contact")).to_be_visible()  # to fix a typo or send it again
    conversation = shown_conversation(frame, demo)
    assert conversation.contact_email == CUSTOMER
    assert conversation.contact_email_confirmed_at is None
    taken.append(shot(page, screenshots, "widget-handoff-email.png"))

    # The customer clicks the link in the confirmation e-mail.
    (link,) = wait_for(lambda: confirmation_links(CUSTOMER))
    confirm_page = context.new_page()
    confirm_page.goto(link)
    # Opening the link asks (a mail scanner opening it confirms nothing); the button confirms.
    expect(confirm_page.get_by_role("heading")).to_have_text("Confirm your e-mail address")
    with db_lock:
        assert (
            Conversation.objects.unscoped("test checks the database directly")
            .get(pk=conversation.pk)
            .contact_email_confirmed_at
            is None
        )
    confirm_page.get_by_role("button", name="Yes, confirm my address").click()
    expect(confirm_page.get_by_role("heading")).to_have_text("E-mail address confirmed")
    expect(confirm_page.get_by_text(CUSTOMER)).to_be_visible()
    taken.append(shot(confirm_page, screenshots, "widget-email-confirmed.png"))
    confirm_page.close()
    assert (
        Conversation.objects.unscoped("test checks the database directly")
        .get(pk=conversation.pk)
        .contact_email_confirmed_at
        is not None
    )

    # The customer closes the tab; a person answers afterwards.
    page.close()
    with db_lock:
        first = staff_reply(
            client=demo,
            conversation=conversation,
            text="Hi, I'm Sam from Trailhead — a replacement tent ships today, no return needed.",
        )
    assert mails_to(CUSTOMER) == []  # not at once: the customer may still see it
    assert wait_for(lambda: mails_to(CUSTOMER)), "no e-mail after the countdown"
    # Both checks scheduled so far (the address's confirmation, the reply) have run: the reply
    # went out once, in one e-mail.
    assert wait_for(lambda: len(quick_emails) == 2), quick_emails
    assert sorted(quick_emails) == [0, 1]
    sent = mails_to(CUSTOMER)
    assert len(sent) == 1
    assert "Trailhead Outfitters" in sent[0].subject
    assert "a replacement tent ships today" in sent[0].body
    assert sent[0].reply_to == ["support@trailhead.example"]

    # Back on the site in a new tab: the launcher says a reply is waiting (the chat loaded in
    # the background — which counts as nothing seen)...
    page = context.new_page()
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(live_server.url + "/")
    launcher = page.locator("#guidedesk-launcher")
    badge = page.locator("#guidedesk-unread")
    expect(badge).to_have_text("1")
    expect(launcher).to_have_accessible_name("Chat with us — 1 new reply")
    expect(page.locator("#guidedesk-panel")).to_be_hidden()
    taken.append(shot(page, screenshots, "widget-returning-badge.png"))
    assert (
        Conversation.objects.unscoped("test checks the database directly")
        .get(pk=conversation.pk)
        .customer_seen_seq
        < first.seq
    )
    assert not [url for url in requests if "/events?" in url]  # no live connection yet

    # ...and opening the chat shows the conversation, the reply and the hand-off.
    launcher.click()
    expect(badge).to_be_hidden()
    frame = page.frame_locator("#guidedesk-panel iframe")
    expect(frame.get_by_text("My tent arrived with a torn floor. What now?")).to_be_visible()
    staff = frame.locator("li.gd-msg--staff")
    expect(staff).to_contain_text("a replacement tent ships today")
    expect(frame.locator("#gd-handoff")).to_be_visible()
    expect(frame.locator("#gd-subtitle")).to_have_text("Our support team")
    expect(frame.locator("#gd-contact-done")).to_contain_text(CUSTOMER)
    expect(frame.locator("#gd-contact-done")).to_contain_text("your address is confirmed")
    expect(frame.locator("#gd-contact")).to_be_hidden()
    expect(frame.locator("#gd-error")).to_be_hidden()
    assert any("/messages?after=0" in url for url in requests)  # the history was loaded
    # ...and the widget said it displayed the reply.
    assert wait_for(
        lambda: (
            Conversation.objects.unscoped("test checks the database directly")
            .get(pk=conversation.pk)
            .customer_seen_seq
        )
    )
    assert (
        Conversation.objects.unscoped("test checks the database directly")
        .get(pk=conversation.pk)
        .customer_seen_seq
        >= first.seq
    )
    taken.append(shot(page, screenshots, "widget-returning-customer.png"))

    # With the chat open, the next reply is shown and seen: no e-mail for it.
    expect(frame.locator("li.gd-msg--staff")).to_have_count(1)
    with db_lock:
        second = staff_reply(client=demo, conversation=conversation, text="Anything else?")
    expect(frame.locator("li.gd-msg--staff").last).to_contain_text("Anything else?")
    assert wait_for(
        lambda: (
            Conversation.objects.unscoped("test checks the database directly")
            .get(pk=conversation.pk)
            .customer_seen_seq
            >= second.seq
        )
    )
    # The second reply's countdown has run its check, which found it seen: no e-mail.
    assert wait_for(lambda: len(quick_emails) == 3), quick_emails
    assert quick_emails[2] == 0
    assert len(mails_to(CUSTOMER)) == 1

    # The chat closed, the page still open: a reply is not seen — the badge counts it, and it
    # is e-mailed (alone) after the countdown.
    launcher.click()
    expect(page.locator("#guidedesk-panel")).to_be_hidden()
    with db_lock:
        third = staff_reply(client=demo, conversation=conversation, text="We added a footprint.")
    expect(badge).to_have_text("1")
    assert wait_for(lambda: len(mails_to(CUSTOMER)) == 2), "no e-mail for the unseen reply"
    assert "We added a footprint." in mails_to(CUSTOMER)[1].body
    assert "Anything else?" not in mails_to(CUSTOMER)[1].body
    assert (
        Conversation.objects.unscoped("test checks the database directly")
        .get(pk=conversation.pk)
        .customer_seen_seq
        < third.seq
    )
    for path in taken:
        assert path.is_file() and path.stat().st_size > 5_000, path
    context.close()


def test_start_a_new_conversation_and_stale_storage_at_360px(
    browser: Any, live_server, demo, settings, screenshots
):
    settings.OPENAI_API_KEY = ""  # the labelled offline demo model answers
    context = phone_context(browser)
    page = context.new_page()
    # An anonymous visitor's browser storage (a signed-in customer's open conversation is
    # resumed from the server whatever the browser holds: tests/browser/test_identity_browser.py).
    frame = open_widget(page, live_server.url, demo, path=ANONYMOUS)
    send(frame, "Do you ship internationally?")
    expect(frame.locator("li.gd-msg--assistant[data-seq]").first).to_be_visible()
    new_chat = frame.get_by_role("button", name="Start a new conversation")
    expect(new_chat).to_be_visible()
    overflow = frame.locator("body").evaluate(
        "body => document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow == 0  # nothing sticks out sideways at 360 px
    taken = [shot(page, screenshots, "widget-360-new-conversation.png")]
    first = shown_conversation(frame, demo)

    # A fresh start: the log empties (the greeting stays), the next message opens a new one.
    new_chat.click()
    expect(frame.locator("li[data-seq]")).to_have_count(0)
    expect(frame.get_by_text(demo.greeting)).to_be_visible()
    expect(new_chat).to_be_hidden()
    expect(frame.get_by_label("Your message")).to_be_focused()
    send(frame, "What are your opening hours?")
    expect(frame.locator("li.gd-msg--assistant[data-seq]").first).to_be_visible()
    second = shown_conversation(frame, demo)
    assert second.pk != first.pk
    assert first.messages.filter(role=Role.USER, text="Do you ship internationally?").exists()
    assert not second.messages.filter(text="Do you ship internationally?").exists()

    # Another tab of the same browser finds the new conversation, not the old one.
    other = context.new_page()
    other.goto(live_server.url + ANONYMOUS)
    other.locator("#guidedesk-launcher").click()
    other_frame = other.frame_locator("#guidedesk-panel iframe")
    expect(other_frame.get_by_text("What are your opening hours?")).to_be_visible()
    expect(other_frame.get_by_text("Do you ship internationally?")).to_have_count(0)
    other.close()

    # A stored conversation whose token no longer works, then an expired one: a fresh chat,
    # no error line.
    store = chat_frame(page)
    stored_key = store.evaluate(
        "() => Object.keys(localStorage).find(k => k.startsWith('guidedesk:conversation:'))"
    )
    assert stored_key.startswith(f"guidedesk:conversation:{demo.widget_key}:http")
    saved = store.evaluate(f"() => JSON.parse(localStorage.getItem({stored_key!r}))")
    assert saved["id"] == str(second.public_id)
    assert saved["expires"] > time.time() * 1000 + 23 * 3600 * 1000  # about 24 h from now
    store.evaluate(
        f"""() => localStorage.setItem({stored_key!r}, JSON.stringify(
            {{...JSON.parse(localStorage.getItem({stored_key!r})), token: 'revoked'}}))"""
    )
    page.reload()
    frame = page.frame_locator("#guidedesk-panel iframe")
    expect(frame.get_by_text(demo.greeting)).to_be_visible()
    expect(frame.locator("li[data-seq]")).to_have_count(0)
    expect(frame.locator("#gd-error")).to_be_hidden()
    expect(frame.get_by_role("button", name="Start a new conversation")).to_be_hidden()
    forgotten = f"() => !localStorage.getItem({stored_key!r})"
    assert wait_for(lambda: chat_frame(page).evaluate(forgotten))

    send(frame, "Hello again")
    expect(frame.locator("li.gd-msg--assistant[data-seq]").first).to_be_visible()
    # The widget stores the conversation again on each event of the reply; expire it once
    # nothing overwrites the expiry any more (on a loaded machine events arrive late).
    expire = f"""() => localStorage.setItem({stored_key!r}, JSON.stringify(
        {{...JSON.parse(localStorage.getItem({stored_key!r})), expires: Date.now() - 1}}))"""
    still_expired = f"() => JSON.parse(localStorage.getItem({stored_key!r})).expires < Date.now()"

    def expired_for_good() -> bool:
        chat_frame(page).evaluate(expire)
        time.sleep(0.5)
        return bool(chat_frame(page).evaluate(still_expired))

    assert wait_for(expired_for_good)
    page.reload()
    frame = page.frame_locator("#guidedesk-panel iframe")
    expect(frame.get_by_text(demo.greeting)).to_be_visible()
    expect(frame.locator("li[data-seq]")).to_have_count(0)
    expect(frame.locator("#gd-error")).to_be_hidden()
    assert Message.objects.filter(client=demo, text="Hello again").count() == 1  # kept for staff
    for path in taken:
        assert path.is_file() and path.stat().st_size > 5_000, path
    context.close()


def test_session_only_when_the_client_says_zero_hours(browser: Any, live_server, demo, settings):
    settings.OPENAI_API_KEY = ""
    demo.remember_conversation_hours = 0
    demo.save(update_fields=["remember_conversation_hours"])
    context = browser.new_context(viewport={"width": 1024, "height": 800})
    page = context.new_page()
    frame = open_widget(page, live_server.url, demo)
    send(frame, "Do you ship internationally?")
    expect(frame.locator("li.gd-msg--assistant[data-seq]").first).to_be_visible()
    page.reload()  # the same tab keeps it (today's behaviour)
    frame = page.frame_locator("#guidedesk-panel iframe")
    expect(frame.get_by_text("Do you ship internationally?")).to_be_visible()
    assert chat_frame(page).evaluate("() => localStorage.length") == 0

    other = context.new_page()  # a new tab does not
    other_frame = open_widget(other, live_server.url, demo)
    expect(other_frame.locator("li[data-seq]")).to_have_count(0)
    context.close()
