"""Driving the widget from a test: open it on the demo page, type, take screenshots."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.test import Client as DjangoClient
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import FrameLocator, Page, expect

from apps.accounts.models import Role
from apps.clients.models import Client
from apps.console import views as console_views
from apps.conversations.models import Conversation
from apps.tools.models import PendingAction, PendingActionStatus, ToolExecution
from tests.accounts.test_mfa_required import PASSWORD
from tests.factories import MembershipFactory, UserFactory
from tests.support.shop import assess

# A phone's screen, for the pages checked at 360 px.
PHONE = {"width": 360, "height": 740}


def open_widget(page: Page, base_url: str, demo: Client, path: str = "/") -> FrameLocator:
    """The demo shop at `path`: `/` signs in its demo customer, `/?as=anonymous` does not."""
    page.goto(base_url + path)
    expect(page.get_by_role("heading", name="Gear for the long way round.")).to_be_visible()
    launcher = page.locator("#guidedesk-launcher")
    expect(launcher).to_have_accessible_name("Chat with us")
    launcher.click()
    expect(launcher).to_have_attribute("aria-label", "Close chat")
    expect(launcher).to_have_attribute("aria-expanded", "true")
    frame = page.frame_locator("#guidedesk-panel iframe")
    expect(frame.get_by_text(demo.greeting)).to_be_visible()
    expect(frame.get_by_label("Your message")).to_be_focused()
    return frame


_KEPT_CONVERSATION = """() => {
  for (const store of [window.localStorage, window.sessionStorage]) {
    for (let i = 0; i < store.length; i += 1) {
      const key = store.key(i);
      if (key.startsWith("guidedesk:conversation:")) return JSON.parse(store.getItem(key)).id;
    }
  }
  return null;
}"""


def shown_conversation(frame: FrameLocator, client: Client) -> Conversation:
    """The conversation the chat frame shows — the id the widget keeps for it — never "the"
    conversation of the client in the database, which a test must not assume is the only one."""
    public_id = frame.locator("body").evaluate(_KEPT_CONVERSATION)
    assert public_id, "the chat keeps no conversation"
    return Conversation.objects.for_client(client).get(public_id=public_id)


def send(frame: FrameLocator, text: str) -> None:
    box = frame.get_by_label("Your message")
    box.fill(text)
    box.press("Enter")


def customer_asks(
    browser: Any, base_url: str, demo: Client, llm: Any, question: str, answer: str
) -> tuple[Page, FrameLocator, Conversation]:
    """A customer's page with the widget open, asking `question` and shown the assistant's
    `answer` (scripted on `llm`): the page, the chat frame and the conversation it shows."""
    customer = browser.new_page(viewport={"width": 1280, "height": 860})
    frame = open_widget(customer, base_url, demo)
    llm.script("assess", assess(response=answer))
    send(frame, question)
    expect(frame.get_by_text(answer)).to_be_visible()
    return customer, frame, shown_conversation(frame, demo)


def phone_context(browser: Any, **context_options: Any) -> Any:
    """A browser context the size of a phone's screen (`PHONE`), touch and all."""
    return browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True, **context_options)


def assert_the_cancel_ran(order: str) -> None:
    """The `cancel_order` tool ran, and succeeded, for `order` (exactly one run)."""
    execution = ToolExecution.objects.unscoped("test checks the database directly").get(
        tool__name="cancel_order"
    )
    assert execution.status == "succeeded" and execution.params == {"order_id": order}


def assert_the_confirmed_action_ran() -> None:
    """The one pending action (the confirmation the customer answered) was executed."""
    assert (
        PendingAction.objects.unscoped("test checks the database directly").get().status
        == PendingActionStatus.EXECUTED
    )


# Chromium now and then refuses one capture ("Protocol error (Page.captureScreenshot): Unable to
# capture screenshot", seen once in CI on a busy 2-core box) and takes the same picture when asked
# again once the page has painted another frame.
_REFUSED_CAPTURE = "Unable to capture screenshot"
_NEXT_FRAME = "() => new Promise((done) => requestAnimationFrame(() => done(null)))"


def shot(page: Page, folder: Path, name: str) -> Path:
    """Save a screenshot of `page` (a CI artifact); a capture Chromium refuses is retried once,
    after the page's next frame."""
    path = folder / name
    try:
        page.screenshot(path=str(path))
    except PlaywrightError as error:
        if _REFUSED_CAPTURE not in str(error):
            raise
        page.evaluate(_NEXT_FRAME)
        page.screenshot(path=str(path))
    return path


# Every text the growing reply bubble (`li.gd-draft`) shows, in order, recorded in the chat
# frame by a MutationObserver as the widget changes it ("" where a bubble that was shown went
# away), and where in that record each posted reply appeared. The record is the page's own
# events, however slowly the test gets round to reading it.
_DRAFT_RECORDER = """(body) => {
  const r = window.__gdDrafts;
  if (r) { r.texts.length = 0; r.replies.length = 0; r.bubbles = 0; r.known = r.count(); return; }
  const rec = window.__gdDrafts = { texts: [], replies: [], bubbles: 0, bubble: null };
  rec.count = () => document.querySelectorAll("li.gd-msg--assistant[data-seq]").length;
  rec.known = rec.count();
  const look = () => {
    const li = document.querySelector("li.gd-draft");
    if (li && li !== rec.bubble) rec.bubbles += 1;
    rec.bubble = li;
    const text = li ? (li.querySelector(".gd-text") || { textContent: "" }).textContent : "";
    const last = rec.texts[rec.texts.length - 1];
    const posted = document.querySelectorAll("li.gd-msg--assistant[data-seq]");
    for (let i = rec.known; i < posted.length; i += 1) {
      rec.replies.push([rec.texts.length, posted[i].textContent]);
    }
    rec.known = posted.length;
    if ((text || rec.texts.length) && text !== last) rec.texts.push(text);
  };
  new MutationObserver(look).observe(body, { subtree: true, childList: true, characterData: true });
}"""


def record_drafts(frame: FrameLocator) -> None:
    """Start (or restart) recording what the chat frame's reply bubble shows."""
    frame.locator("body").evaluate(_DRAFT_RECORDER)


def drafts(frame: FrameLocator, *, until: str = "") -> tuple[list[str], int]:
    """The bubble's texts recorded since `record_drafts` — only those shown before a posted
    reply containing `until` appeared, when given — and how many bubbles were shown."""
    texts, replies, bubbles = frame.locator("body").evaluate(
        "() => { const r = window.__gdDrafts; return [r.texts, r.replies, r.bubbles]; }"
    )
    if until:
        ends = [at for at, text in replies if until in text]
        assert ends, f"no reply containing {until!r} was posted: {replies}"
        texts = texts[: ends[0]]
    return list(texts), int(bubbles)


def watched_page(context: Any) -> Page:
    """A new page of `context` whose `page.errors` collects the page's JavaScript errors."""
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    return page


def page_signed_in_as(browser: Any, base_url: str, user: Any, **context_options: Any) -> Page:
    """A page in its own browser context (``context_options``: viewport, downloads…) already
    signed in as `user` (the session cookie of a server-side sign-in); `page.errors` collects
    the page's JavaScript errors."""
    django_client = DjangoClient()
    django_client.force_login(user)
    context = browser.new_context(**context_options)
    context.add_cookies(
        [
            {
                "name": settings.SESSION_COOKIE_NAME,
                "value": django_client.cookies[settings.SESSION_COOKIE_NAME].value,
                "domain": urlsplit(base_url).hostname,
                "path": "/",
            }
        ]
    )
    return watched_page(context)


def agent_page(
    browser: Any, live_server: Any, client: Any, monkeypatch: Any, first_name: str = ""
) -> Any:
    """A browser page in its own context, signed in (session cookie) as an agent of `client`
    (with `first_name`, for the templates that sign with it); the console polls every second."""
    monkeypatch.setattr(console_views, "POLL_SECONDS", 1)
    membership = MembershipFactory(client=client, role=Role.AGENT, user__first_name=first_name)
    page = page_signed_in_as(browser, live_server.url, membership.user)
    page.staff_user = membership.user
    return page


def admin_signed_in(browser: Any, base_url: str, email: str, password: str) -> Page:
    """A staff member's own browser window, signed into the admin through its sign-in form;
    `page.errors` collects the page's JavaScript errors."""
    page = watched_page(browser.new_context(viewport={"width": 1400, "height": 900}))
    page.goto(f"{base_url}/admin/")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{base_url}/admin/")
    return page


def lead_signed_in(browser: Any, base_url: str, db_lock: Any) -> Page:
    """A new superuser (the support lead) signed into the admin through its sign-in form
    (`admin_signed_in`)."""
    with db_lock:
        lead = UserFactory(is_superuser=True)
    return admin_signed_in(browser, base_url, lead.email, PASSWORD)


def open_add_form(admin: Page, listing: str, add: str, client: Client) -> None:
    """From the admin's index, the add form of `listing` (through its link named `add`), for
    the tenant `client`."""
    admin.get_by_role("link", name=listing).click()
    admin.get_by_role("link", name=add).click()
    admin.locator("#id_client").select_option(str(client.pk))
