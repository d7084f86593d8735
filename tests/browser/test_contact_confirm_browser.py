"""The address-confirmation link in real Chromium (docs/widget.md "Coming back"): opening it —
as a mail scanner or a preview does — only shows a page in the customer's language; the page's
own button (a POST with the token as a hidden field) confirms. A reused, expired or forged
token confirms nothing, and another business's conversation under the same address is never
touched."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest
from django.core import signing
from playwright.sync_api import expect

from apps.conversations.models import Conversation
from apps.conversations.services import contact_confirmation_link, conversation_create
from apps.widget import catalogues
from tests.browser.helpers import watched_page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ADDRESS = "lucia.ferrer@example.es"


def confirmed_at(conversation: Conversation) -> Any:
    return (
        Conversation.objects.unscoped("test checks the database directly")
        .get(pk=conversation.pk)
        .contact_email_confirmed_at
    )


def left_address(client: Any, language: str) -> Conversation:
    conversation, _ = conversation_create(client=client)
    Conversation.objects.for_client(client).filter(pk=conversation.pk).update(
        contact_email=ADDRESS, language=language
    )
    conversation.refresh_from_db()
    return conversation


def test_the_link_asks_and_only_the_pages_button_confirms(
    browser, live_server, db_lock, client_a, client_b, monkeypatch
):
    es = catalogues.catalogue("es")
    with db_lock:
        mine = left_address(client_a, "es")
        late = left_address(client_a, "es")
        theirs = left_address(client_b, "es")  # another business, the same address
    link = contact_confirmation_link(conversation=mine, email=ADDRESS, site=live_server.url)
    late_link = contact_confirmation_link(conversation=late, email=ADDRESS, site=live_server.url)
    page = watched_page(browser.new_context())

    # Opened twice (a scanner, then the customer): a question in Spanish, nothing confirmed.
    for _ in range(2):
        page.goto(link)
        expect(page.get_by_role("heading")).to_have_text(es["confirm_ask_title"])
        expect(page.locator("html")).to_have_attribute("lang", "es")
        expect(page.get_by_text(ADDRESS)).to_be_visible()
        with db_lock:
            assert confirmed_at(mine) is None

    page.get_by_role("button", name=es["confirm_ask_button"]).click()
    expect(page.get_by_role("heading")).to_have_text(es["confirm_ok_title"])
    with db_lock:
        first = confirmed_at(mine)
        assert first is not None
        assert confirmed_at(theirs) is None and confirmed_at(late) is None

    # Reused: the link now says it is done, with no button, and changes nothing.
    page.goto(link)
    expect(page.get_by_role("heading")).to_have_text(es["confirm_ok_title"])
    expect(page.get_by_role("button")).to_have_count(0)
    with db_lock:
        assert confirmed_at(mine) == first

    # Expired between opening the page and pressing its button.
    page.goto(late_link)
    expect(page.get_by_role("heading")).to_have_text(es["confirm_ask_title"])
    later = time.time() + 49 * 3600
    with monkeypatch.context() as patch:  # the signature's clock, 49 hours on
        patch.setattr(signing, "time", SimpleNamespace(time=lambda: later))
        page.get_by_role("button", name=es["confirm_ask_button"]).click()
        expect(page.get_by_role("heading")).to_have_text(es["confirm_expired_title"])
    with db_lock:
        assert confirmed_at(late) is None

    # Forged: a changed signature shows the "does not work" page, without a button.
    page.goto(link[:-3] + "xx/")
    expect(page.get_by_role("heading")).to_have_text(
        catalogues.catalogue("en")["confirm_invalid_title"]
    )
    expect(page.get_by_role("button")).to_have_count(0)
    with db_lock:
        assert confirmed_at(theirs) is None and confirmed_at(late) is None
    assert page.errors == []
