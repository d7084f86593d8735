"""How replies look in a real browser (headless Chromium): the assistant's Markdown as bold,
lists and safe links in the widget and in the staff console; script a model or a customer
writes — `<img onerror>`, `javascript:` links, `<script>` — never runs and shows as text; and
the help-centre articles under a knowledge answer, gone when the client switches them off."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from apps.clients.models import Client
from apps.conversations.services import message_append
from apps.knowledge.models import Article
from tests.api.conftest import make_tenant_data
from tests.browser.helpers import agent_page, open_widget, send, shot
from tests.support.shop import assess

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PAYLOADS = [
    "<img src=x onerror=alert(1)>",
    "[x](javascript:alert(1))",
    "<script>alert(1)</script>",
    "**<b>x</b>**",
]
REPLY = (
    "Returns are free within **60 days** of delivery, *unused* and with tags:\n\n"
    "- print the prepaid label\n"
    "- drop the parcel off with the carrier\n\n"
    "Start one on [our returns page](https://trailhead.example/returns).\n\n"
    "Echoing you: " + " ".join(PAYLOADS)
)
CUSTOMER = "How do returns work? " + " ".join(PAYLOADS)
RETURNS_URL = "https://trailhead.example/help/start-a-return"
# Whatever would be script, or not ours, in the chat's log.
FORBIDDEN = ["img", "script", "iframe", "svg", "b", "[onerror]", "a[href^='javascript']"]


def watch(page: Any) -> tuple[list[str], list[str]]:
    """Every alert()/confirm() dialog (dismissed) and every script error of the page."""
    dialogs: list[str] = []
    errors: list[str] = []

    def on_dialog(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    return dialogs, errors


def test_the_widget_shows_markdown_and_runs_nothing_it_was_sent(
    browser: Any, live_server: Any, demo: Client, llm: Any, screenshots: Any
) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    dialogs, errors = watch(page)
    frame = open_widget(page, live_server.url, demo)

    llm.script("assess", assess(response=REPLY, confidence=9))
    send(frame, CUSTOMER)

    reply = frame.locator("li.gd-msg--assistant[data-seq]").last
    rich = reply.locator(".gd-text.gd-rich")
    expect(rich.locator("strong").first).to_have_text("60 days")
    expect(rich.locator("em")).to_have_text("unused")
    expect(rich.locator("ul > li")).to_have_text(
        ["print the prepaid label", "drop the parcel off with the carrier"]
    )
    link = rich.get_by_role("link", name="our returns page")
    expect(link).to_have_attribute("href", "https://trailhead.example/returns")
    expect(link).to_have_attribute("target", "_blank")
    rel = link.get_attribute("rel") or ""
    assert "noopener" in rel.split() and "noreferrer" in rel.split()
    # the raw Markdown is gone…
    expect(reply).not_to_contain_text("**60 days**")
    # …and what would be script shows as the text it is, in the reply and in my message
    for payload in ["<img src=x onerror=alert(1)>", "[x](javascript:alert(1))"]:
        expect(reply).to_contain_text(payload)
    expect(reply).to_contain_text("<script>alert(1)</script>")
    expect(rich.locator("strong", has_text="<b>x</b>")).to_have_count(1)
    mine = frame.locator("li.gd-msg--user[data-seq]").last
    expect(mine.locator(".gd-text")).to_have_text(CUSTOMER)
    log = frame.locator("#gd-log")
    for selector in FORBIDDEN:
        expect(log.locator(selector)).to_have_count(0)
    expect(mine.locator("strong, a")).to_have_count(0)  # a customer's words are not Markdown
    shot(page, screenshots, "widget-markdown.png")
    assert dialogs == [] and errors == []


def test_sources_under_a_knowledge_answer_and_none_when_switched_off(
    browser: Any, live_server: Any, demo: Client, llm: Any, db_lock: Any, screenshots: Any
) -> None:
    with db_lock:
        Article.objects.for_client(demo).filter(title="How to start a return").update(
            source_url=RETURNS_URL
        )
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    dialogs, errors = watch(page)
    frame = open_widget(page, live_server.url, demo)
    answers = frame.locator("li.gd-msg--assistant[data-seq]")
    answer = "Start a return in chat or on the Returns page with your **order number**."

    llm.script(
        "assess",
        assess(confidence=5, needs_more_context=["kb:how to start a return"]),
        assess(response=answer, confidence=9),
    )
    send(frame, "How do I start a return?")
    expect(answers).to_have_count(1)
    sources = answers.last.locator(".gd-sources")
    expect(sources).to_be_visible()
    expect(sources.locator(".gd-sources-label")).to_have_text("Sources")
    link = sources.get_by_role("link", name="How to start a return")
    expect(link).to_have_attribute("href", RETURNS_URL)
    expect(link).to_have_attribute("target", "_blank")
    # only this client's published articles, each once
    titles = sources.locator("li").all_inner_texts()
    usable = set(Article.objects.for_client(demo).usable().values_list("title", flat=True))
    assert titles and set(titles) <= usable and len(titles) == len(set(titles)) <= 3
    shot(page, screenshots, "widget-sources.png")

    with db_lock:
        Client.objects.filter(pk=demo.pk).update(show_sources=False)
    llm.script(
        "assess",
        assess(confidence=5, needs_more_context=["kb:how to start a return"]),
        assess(response="Once more: use the Returns page with your order number.", confidence=9),
    )
    send(frame, "Sorry, how do I start a return again?")
    expect(answers).to_have_count(2)
    expect(answers.last).to_contain_text("Once more: use the Returns page")
    expect(answers.last.locator(".gd-sources")).to_have_count(0)
    assert dialogs == [] and errors == []


def test_the_console_shows_the_same_subset(
    browser: Any, live_server: Any, client_a: Any, monkeypatch: Any
) -> None:
    data = make_tenant_data(client_a)
    message_append(
        client=client_a,
        conversation=data.conversation,
        role="assistant",
        text=REPLY,
        data={"sources": [{"title": "Returns policy", "url": "https://acme.example/returns"}]},
    )
    page = agent_page(browser, live_server, client_a, monkeypatch)
    dialogs, errors = watch(page)
    page.goto(live_server.url + reverse("console-conversation", args=[data.conversation.public_id]))
    page.wait_for_selector("#gd-conversation")

    def check(item: Any) -> None:
        rich = item.locator(".gd-msg-text.gd-rich")
        expect(rich.locator("strong").first).to_have_text("60 days")
        expect(rich.locator("ul > li")).to_have_count(2)
        link = rich.get_by_role("link", name="our returns page")
        expect(link).to_have_attribute("href", "https://trailhead.example/returns")
        expect(link).to_have_attribute("target", "_blank")
        expect(item).to_contain_text("<img src=x onerror=alert(1)>")
        expect(item).to_contain_text("<script>alert(1)</script>")
        expect(item).to_contain_text("[x](javascript:alert(1))")
        source = item.locator(".gd-sources").get_by_role("link", name="Returns policy")
        expect(source).to_have_attribute("href", "https://acme.example/returns")

    # as the page was served…
    served = page.locator("li.gd-role-assistant", has_text="Echoing you").first
    check(served)
    # …and as a new reply arrives while the page is open (the page's own script draws it)
    message_append(
        client=client_a,
        conversation=data.conversation,
        role="assistant",
        text=REPLY + " (again)",
        data={"sources": [{"title": "Returns policy", "url": "https://acme.example/returns"}]},
    )
    arrived = page.locator("li.gd-role-assistant", has_text="(again)")
    expect(arrived).to_have_count(1)
    check(arrived)
    # a customer's own words stay text
    message_append(client=client_a, conversation=data.conversation, role="user", text=CUSTOMER)
    mine = page.locator("li.gd-role-user", has_text="How do returns work?")
    expect(mine.locator(".gd-msg-text")).to_have_text(CUSTOMER)
    messages = page.locator("[data-messages]")
    for selector in FORBIDDEN:
        expect(messages.locator(selector)).to_have_count(0)
    assert dialogs == [] and errors == []
    page.context.close()
