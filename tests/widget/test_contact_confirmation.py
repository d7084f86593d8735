"""Staff replies are e-mailed only to an address the customer confirmed: a
new address gets a one-click, signed, expiring link; confirmation e-mails are limited per
address and per conversation; a link confirms that one conversation's address and nothing
else (docs/widget.md "The e-mail address")."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.core import mail, signing
from django.test import Client as DjangoClient

from apps.conversations.models import Conversation
from apps.conversations.services import unseen_replies_email
from apps.core.tenancy import tenant_scope
from apps.escalations.services import staff_reply
from tests.widget.conftest import API, Widget, stored
from tests.widget.contact import confirm_form, confirmation_links, contact, open_link

pytestmark = pytest.mark.django_db

ANN = "ann@example.com"


@pytest.fixture(autouse=True)
def _no_timer(settings):
    settings.WIDGET_REPLY_EMAIL_DELAY_SECONDS = 3600  # the in-process timer never fires here


def leave(widget: Widget, conversation_id: str, token: str, address: str, capture: Any):
    with capture(execute=True):
        return contact(widget, conversation_id, token, {"email": address})


def reply(conversation_id: str, text: str) -> Any:
    conversation = stored(conversation_id)
    return staff_reply(client=conversation.client, conversation=conversation, text=text)


def test_an_unconfirmed_address_gets_no_staff_reply(widget, django_capture_on_commit_callbacks):
    cid, token = widget.conversation()
    response = leave(widget, cid, token, ANN, django_capture_on_commit_callbacks)
    assert response.status_code == 200
    assert response.json() == {"email": ANN, "confirmed": False}

    (confirmation,) = mail.outbox  # the link, and nothing else
    assert confirmation.to == [ANN]
    assert widget.client.name in confirmation.subject and "confirm" in confirmation.subject
    assert "48 hours" in confirmation.body
    mail.outbox.clear()

    reply(cid, "Hi, Sam here — your refund is on its way.")
    conversation = stored(cid)
    with tenant_scope(conversation.client_id):
        assert unseen_replies_email(conversation_id=conversation.pk) == 0
    assert mail.outbox == []
    assert conversation.reply_emailed_seq == 0  # not marked as mailed either


def test_the_link_confirms_and_replies_are_mailed(widget, django_capture_on_commit_callbacks):
    cid, token = widget.conversation()
    leave(widget, cid, token, ANN, django_capture_on_commit_callbacks)
    (link,) = confirmation_links(ANN)
    mail.outbox.clear()
    reply(cid, "Hi, Sam here — your refund is on its way.")  # while the address waits

    with django_capture_on_commit_callbacks(execute=True):
        page = open_link(link)
    assert page.status_code == 200
    html = page.content.decode()
    assert "E-mail address confirmed" in html and ANN in html and widget.client.name in html
    assert page["Referrer-Policy"] == "no-referrer"
    assert "default-src 'none'" in page["Content-Security-Policy"]
    conversation = stored(cid)
    assert conversation.contact_email_confirmed_at is not None

    # The reply that waited is e-mailed now; later ones too.
    with tenant_scope(conversation.client_id):
        assert unseen_replies_email(conversation_id=conversation.pk) == 1
    assert mail.outbox[0].to == [ANN] and "your refund is on its way" in mail.outbox[0].body
    reply(cid, "Anything else?")
    with tenant_scope(conversation.client_id):
        assert unseen_replies_email(conversation_id=conversation.pk) == 1
    # The widget says so on its next read.
    messages = widget.http.get(
        f"{API}conversations/{cid}/messages?after=0", headers=widget.headers(token)
    )
    assert messages.json()["contact_confirmed"] is True

    # Clicking again is harmless; saving the confirmed address again sends nothing.
    assert open_link(link).status_code == 200
    mail.outbox.clear()
    again = leave(widget, cid, token, ANN, django_capture_on_commit_callbacks)
    assert again.json() == {"email": ANN, "confirmed": True}
    assert mail.outbox == []


def test_a_new_address_needs_its_own_confirmation(widget, django_capture_on_commit_callbacks):
    cid, token = widget.conversation()
    leave(widget, cid, token, ANN, django_capture_on_commit_callbacks)
    (old_link,) = confirmation_links(ANN)
    assert open_link(old_link).status_code == 200
    leave(widget, cid, token, "bo@example.com", django_capture_on_commit_callbacks)
    conversation = stored(cid)
    assert conversation.contact_email == "bo@example.com"
    assert conversation.contact_email_confirmed_at is None
    # The old address's link does not confirm the new address.
    assert open_link(old_link).status_code == 404
    conversation.refresh_from_db()
    assert conversation.contact_email_confirmed_at is None
    reply(cid, "Hello?")
    with tenant_scope(conversation.client_id):
        assert unseen_replies_email(conversation_id=conversation.pk) == 0


def test_a_link_confirms_only_its_own_conversation(
    client_a, client_b, django_capture_on_commit_callbacks
):
    a, b = Widget(client_a), Widget(client_b)
    x, token_x = a.conversation()
    y, token_y = a.conversation()  # same client, same address
    z, token_z = b.conversation()  # another client, same address
    for widget, cid, token in ((a, x, token_x), (a, y, token_y), (b, z, token_z)):
        leave(widget, cid, token, ANN, django_capture_on_commit_callbacks)
    link_x = confirmation_links(ANN)[0]
    assert open_link(link_x).status_code == 200

    confirmed = dict(
        Conversation.objects.unscoped("test checks the database directly").values_list(
            "public_id", "contact_email_confirmed_at"
        )
    )
    assert confirmed[stored(x).public_id] is not None
    assert confirmed[stored(y).public_id] is None
    assert confirmed[stored(z).public_id] is None

    # A tampered link (another conversation's id spliced in, a bad signature, garbage)
    # confirms nothing.
    token = urlsplit(link_x).path.rstrip("/").rsplit("/", 1)[1]
    payload, stamp, signature = token.rsplit(":", 2)
    claims = signing.b64_decode(payload.encode())
    assert x.encode() in claims  # the link names its conversation …
    spliced = signing.b64_encode(claims.replace(x.encode(), y.encode())).decode()
    for forged in (f"{spliced}:{stamp}:{signature}", token[:-2] + "xx", "not-a-token"):
        response = DjangoClient().get(f"/widget/confirm-email/{forged}/")
        assert response.status_code == 404
        assert "does not work" in response.content.decode()
    assert (
        Conversation.objects.unscoped("test checks the database directly")
        .exclude(public_id=x)
        .filter(contact_email_confirmed_at__isnull=False)
        .count()
        == 0
    )


def test_an_expired_link_confirms_nothing(
    widget, settings, monkeypatch, django_capture_on_commit_callbacks
):
    cid, token = widget.conversation()
    leave(widget, cid, token, ANN, django_capture_on_commit_callbacks)
    (link,) = confirmation_links(ANN)
    later = time.time() + (settings.WIDGET_CONTACT_CONFIRM_MAX_AGE_HOURS + 1) * 3600
    with monkeypatch.context() as patch:  # the signature's clock, 49 hours on
        patch.setattr(signing, "time", SimpleNamespace(time=lambda: later))
        response = open_link(link)
    assert response.status_code == 410
    assert "expired" in response.content.decode()
    assert stored(cid).contact_email_confirmed_at is None


def test_confirmation_emails_are_limited_per_address(
    client_a, client_b, settings, django_capture_on_commit_callbacks
):
    settings.WIDGET_CONTACT_CONFIRMATIONS_PER_HOUR = 3
    widgets = [Widget(client_a), Widget(client_a), Widget(client_b), Widget(client_b)]
    started = [(w, *w.conversation()) for w in widgets]
    for widget, cid, token in started[:3]:  # three conversations, two clients, one address
        response = leave(widget, cid, token, ANN, django_capture_on_commit_callbacks)
        assert response.status_code == 200
    widget, cid, token = started[3]
    refused = leave(widget, cid, token, ANN, django_capture_on_commit_callbacks)
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["code"] == "throttled"
    assert "check your inbox" in error["fields"]["email"]
    assert 0 < int(refused["Retry-After"]) <= 3600
    assert len(confirmation_links(ANN)) == 3
    assert stored(cid).contact_email == ""  # nothing stored

    # Another address is not affected.
    other = leave(widget, cid, token, "bo@example.com", django_capture_on_commit_callbacks)
    assert other.status_code == 200
    assert confirmation_links("bo@example.com")


def test_confirmation_emails_are_limited_per_conversation(
    widget, settings, django_capture_on_commit_callbacks
):
    settings.WIDGET_CONTACT_CONFIRMATIONS_PER_HOUR = 3
    cid, token = widget.conversation()
    for n in range(3):
        address = f"visitor{n}@example.com"
        response = leave(widget, cid, token, address, django_capture_on_commit_callbacks)
        assert response.status_code == 200
    refused = leave(widget, cid, token, "visitor9@example.com", django_capture_on_commit_callbacks)
    assert refused.status_code == 429
    assert stored(cid).contact_email == "visitor2@example.com"
    assert not confirmation_links("visitor9@example.com")


def test_opening_the_link_confirms_nothing_only_the_pages_button_does(
    widget, django_capture_on_commit_callbacks
):
    """Mail scanners open every link in an e-mail: the GET only shows a page; its form's POST
    (the token as a hidden field) confirms."""
    cid, token = widget.conversation()
    leave(widget, cid, token, ANN, django_capture_on_commit_callbacks)
    (link,) = confirmation_links(ANN)
    mail.outbox.clear()
    reply(cid, "Hi, Sam here — your refund is on its way.")
    http = DjangoClient()
    for _ in range(3):  # a scanner, a preview, the customer: all GETs
        page = http.get(urlsplit(link).path)
        assert page.status_code == 200
        html = page.content.decode()
        assert "Confirm your e-mail address" in html and ANN in html
        assert "E-mail address confirmed" not in html
        assert "form-action 'self'" in page["Content-Security-Policy"]
    assert stored(cid).contact_email_confirmed_at is None
    with tenant_scope(stored(cid).client_id):
        assert unseen_replies_email(conversation_id=stored(cid).pk) == 0
    assert mail.outbox == []

    action, form_token = confirm_form(page)
    assert http.get(action).status_code == 405  # the POST's own address does nothing on a GET
    with django_capture_on_commit_callbacks(execute=True):
        confirmed = http.post(action, {"token": form_token})
    assert confirmed.status_code == 200
    assert "E-mail address confirmed" in confirmed.content.decode()
    assert confirm_form(confirmed) is None
    first = stored(cid).contact_email_confirmed_at
    assert first is not None
    with tenant_scope(stored(cid).client_id):
        assert unseen_replies_email(conversation_id=stored(cid).pk) == 1

    # Reused: the page now says it is confirmed (no button); posting again changes nothing.
    again = http.get(urlsplit(link).path)
    assert again.status_code == 200 and confirm_form(again) is None
    assert http.post(action, {"token": form_token}).status_code == 200
    assert stored(cid).contact_email_confirmed_at == first


def test_the_button_of_a_stale_expired_or_forged_token_confirms_nothing(
    client_a, client_b, settings, monkeypatch, django_capture_on_commit_callbacks
):
    a, b = Widget(client_a), Widget(client_b)
    x, token_x = a.conversation()
    z, token_z = b.conversation()  # another client, same address
    leave(a, x, token_x, ANN, django_capture_on_commit_callbacks)
    leave(b, z, token_z, ANN, django_capture_on_commit_callbacks)
    link_x, link_z = confirmation_links(ANN)
    http = DjangoClient()
    action, token = confirm_form(http.get(urlsplit(link_x).path))

    # Expired between opening the page and pressing its button.
    later = time.time() + (settings.WIDGET_CONTACT_CONFIRM_MAX_AGE_HOURS + 1) * 3600
    with monkeypatch.context() as patch:
        patch.setattr(signing, "time", SimpleNamespace(time=lambda: later))
        expired = http.post(action, {"token": token})
    assert expired.status_code == 410 and "expired" in expired.content.decode()

    # Forged: client B's conversation id spliced into client A's token, a bad signature,
    # garbage, nothing.
    payload, stamp, signature = token.rsplit(":", 2)
    claims = signing.b64_decode(payload.encode())
    spliced = signing.b64_encode(claims.replace(x.encode(), z.encode())).decode()
    for forged in (f"{spliced}:{stamp}:{signature}", token[:-2] + "xx", "not-a-token", ""):
        response = http.post(action, {"token": forged})
        assert response.status_code == 404, forged
        assert "does not work" in response.content.decode()

    # Stale: the address changed after the e-mail went out.
    leave(a, x, token_x, "bo@example.com", django_capture_on_commit_callbacks)
    assert http.post(action, {"token": token}).status_code == 404
    assert not Conversation.objects.unscoped("test checks the database directly").filter(
        contact_email_confirmed_at__isnull=False
    )
    # Client B's own link still works, for client B's conversation only.
    assert open_link(link_z).status_code == 200
    assert stored(z).contact_email_confirmed_at is not None
    assert stored(x).contact_email_confirmed_at is None
