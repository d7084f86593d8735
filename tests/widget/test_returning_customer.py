"""A returning customer (docs/widget.md "Coming back"): the e-mail address they leave during a
hand-off (POST …/contact), what their widget has displayed ("seen", recorded by GET
…/messages?after=N), and the one e-mail per batch of staff replies they missed."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.core import mail
from django.core.mail.backends.locmem import EmailBackend
from django.test import Client as DjangoClient

from apps.conversations.models import Conversation, Role
from apps.conversations.services import message_append, unseen_replies_email
from apps.core.tenancy import tenant_scope
from apps.escalations.services import staff_reply
from tests.factories import ClientFactory
from tests.widget.conftest import API, Widget, error, stored
from tests.widget.contact import contact, leave_confirmed_address

pytestmark = pytest.mark.django_db


def started(widget: Widget) -> tuple[Conversation, str]:
    conversation_id, token = widget.conversation()
    return stored(conversation_id), token


# ---------------------------------------------------------------------------- the frame


def test_the_frame_knows_how_long_to_remember_and_offers_a_fresh_start(shop):
    shop.remember_conversation_hours = 72
    shop.save(update_fields=["remember_conversation_hours"])
    html = DjangoClient().get(f"/widget/frame/?key={shop.widget_key}").content.decode()
    assert 'data-remember-hours="72"' in html
    assert 'id="gd-new"' in html and "Start a new conversation" in html
    assert 'id="gd-contact"' in html and 'type="email"' in html


# ---------------------------------------------------------------------------- the address


def test_the_customer_leaves_an_address_and_can_forget_it(widget):
    conversation, token = started(widget)
    response = contact(widget, str(conversation.public_id), token, {"email": " ann@example.com "})
    assert response.status_code == 200
    assert response.json() == {"email": "ann@example.com", "confirmed": False}
    conversation.refresh_from_db()
    assert conversation.contact_email == "ann@example.com"

    response = contact(widget, str(conversation.public_id), token, {"email": ""})
    assert response.status_code == 200
    assert response.json() == {"email": "", "confirmed": False}
    conversation.refresh_from_db()
    assert conversation.contact_email == ""


@pytest.mark.parametrize(
    "body",
    [
        {"email": "not-an-address"},
        {"email": "ann@"},
        {"email": "a" * 250 + "@x.example"},
        {"email": ["ann@example.com"]},
        {"email": None},
        {},
    ],
)
def test_a_bad_address_is_a_400_naming_email_and_changes_nothing(widget, body):
    conversation, token = started(widget)
    conversation.contact_email = "kept@example.com"
    conversation.save(update_fields=["contact_email"])
    response = contact(widget, str(conversation.public_id), token, body)
    assert response.status_code == 400
    assert "email" in error(response)["fields"]
    conversation.refresh_from_db()
    assert conversation.contact_email == "kept@example.com"


def test_contact_needs_the_visitor_token_and_an_allowed_origin(widget):
    conversation, token = started(widget)
    cid = str(conversation.public_id)
    assert contact(widget, cid, None, {"email": "a@example.com"}).status_code == 401
    response = contact(widget, cid, "wrong-token", {"email": "a@example.com"})
    assert response.status_code == 404
    assert error(response)["code"] == "not_found"
    foreign = Widget(widget.client, origin="https://elsewhere.example")
    assert contact(foreign, cid, token, {"email": "a@example.com"}).status_code == 403
    conversation.refresh_from_db()
    assert conversation.contact_email == ""


def test_tenant_b_cannot_set_or_read_tenant_a_contact(client_a, client_b):
    a, b = Widget(client_a), Widget(client_b)
    conversation_id, token_a = a.conversation()
    assert contact(a, conversation_id, token_a, {"email": "ann@a.example"}).status_code == 200
    _, token_b = b.conversation()
    for token in (token_a, token_b):
        response = contact(b, conversation_id, token, {"email": "eve@b.example"})
        assert response.status_code == 404
        assert error(response)["code"] == "not_found"
    assert stored(conversation_id).contact_email == "ann@a.example"
    assert (
        not Conversation.objects.unscoped("test checks the database directly")
        .filter(contact_email="eve@b.example")
        .exists()
    )


def test_contact_is_throttled_per_conversation(widget, settings):
    from tests.widget.test_widget_api import rates

    rates(settings, widget_messages="2/min")
    conversation, token = started(widget)
    cid = str(conversation.public_id)
    for _ in range(2):
        assert contact(widget, cid, token, {"email": "a@example.com"}).status_code == 200
    response = contact(widget, cid, token, {"email": "b@example.com"})
    assert response.status_code == 429
    assert "Retry-After" in response
    conversation.refresh_from_db()
    assert conversation.contact_email == "a@example.com"


# ---------------------------------------------------------------------------- "seen"


def test_asking_for_messages_after_n_records_that_n_was_seen(widget):
    conversation, token = started(widget)
    cid = str(conversation.public_id)
    for text in ("one", "two", "three"):
        message_append(client=widget.client, conversation=conversation, role="assistant", text=text)
    assert widget.messages(cid, token, after=0).status_code == 200
    conversation.refresh_from_db()
    assert (conversation.customer_seen_seq, conversation.customer_seen_at) == (0, None)

    widget.messages(cid, token, after=2)
    conversation.refresh_from_db()
    assert conversation.customer_seen_seq == 2 and conversation.customer_seen_at is not None
    widget.messages(cid, token, after=1)  # never goes back
    widget.messages(cid, token, after=99)  # never past the last message
    conversation.refresh_from_db()
    assert conversation.customer_seen_seq == 3


def test_another_tenant_cannot_mark_messages_seen(client_a, client_b):
    a, b = Widget(client_a), Widget(client_b)
    conversation_id, token_a = a.conversation()
    conversation = stored(conversation_id)
    message_append(client=client_a, conversation=conversation, role="assistant", text="hi")
    assert b.messages(conversation_id, token_a, after=1).status_code == 404
    conversation.refresh_from_db()
    assert conversation.customer_seen_seq == 0


# ---------------------------------------------------------------------------- the e-mail


@pytest.fixture
def waiting(widget, settings) -> Conversation:
    """An escalated conversation whose customer left an address; replies are checked later."""
    settings.WIDGET_REPLY_EMAIL_DELAY_SECONDS = 3600  # the timer never fires in these tests
    conversation, token = started(widget)
    leave_confirmed_address(widget, str(conversation.public_id), token, "ann@example.com")
    conversation.refresh_from_db()
    conversation.visitor_token = token  # for the widget GET in the tests below
    return conversation


def reply(conversation: Conversation, text: str) -> Any:
    return staff_reply(client=conversation.client, conversation=conversation, text=text)


def test_unseen_staff_replies_are_mailed_once_as_one_batch(waiting):
    client = waiting.client
    reply(waiting, "Hi, Sam here — your refund is on its way.")
    reply(waiting, "It should reach your card within 3 days.")
    with tenant_scope(waiting.client_id):
        assert unseen_replies_email(conversation_id=waiting.pk) == 2
    with tenant_scope(waiting.client_id):
        assert unseen_replies_email(conversation_id=waiting.pk) == 0  # the task ran twice
    assert len(mail.outbox) == 1
    sent = mail.outbox[0]
    assert sent.to == ["ann@example.com"]
    assert client.name in sent.subject and sent.subject.endswith("new replies to your chat")
    assert sent.reply_to == ["hi@x.example"]  # business_info.contact.email, published
    assert "your refund is on its way" in sent.body and "within 3 days" in sent.body
    assert "unsubscribe" not in sent.body.lower()
    assert sent.content_subtype == "plain" and not sent.attachments
    waiting.refresh_from_db()
    last = waiting.messages.filter(role=Role.STAFF).order_by("-seq").first()
    assert last is not None and waiting.reply_emailed_seq == last.seq

    # A later reply is a new batch: only it is mailed.
    reply(waiting, "Anything else I can do?")
    with tenant_scope(waiting.client_id):
        assert unseen_replies_email(conversation_id=waiting.pk) == 1
    assert len(mail.outbox) == 2
    assert "Anything else" in mail.outbox[1].body and "refund" not in mail.outbox[1].body
    assert mail.outbox[1].subject.endswith("a new reply to your chat")


def test_replies_the_widget_displayed_are_not_mailed(waiting, widget):
    reply(waiting, "Hi, Sam here.")
    waiting.refresh_from_db()
    # The open widget rendered the reply and asked for what comes after it.
    widget.http.get(
        f"{API}conversations/{waiting.public_id}/messages?after={waiting.last_seq}",
        headers=widget.headers(waiting.visitor_token),
    )
    with tenant_scope(waiting.client_id):
        assert unseen_replies_email(conversation_id=waiting.pk) == 0
    assert mail.outbox == []


def test_no_address_no_mail(widget):
    conversation, _ = started(widget)
    reply(conversation, "Hi there.")
    with tenant_scope(conversation.client_id):
        assert unseen_replies_email(conversation_id=conversation.pk) == 0
    assert mail.outbox == []


def test_reply_to_falls_back_to_the_support_address(db, settings):
    settings.WIDGET_REPLY_EMAIL_DELAY_SECONDS = 3600
    client = ClientFactory(business_info={"about": {"description": "x"}})
    conversation, token = started(Widget(client))
    leave_confirmed_address(Widget(client), str(conversation.public_id), token, "bo@example.com")
    reply(conversation, "Hello from the team.")
    with tenant_scope(conversation.client_id):
        assert unseen_replies_email(conversation_id=conversation.pk) == 1
    assert mail.outbox[0].reply_to == [client.support_email]


def test_a_failed_send_is_retried_by_the_next_check(waiting, monkeypatch):
    reply(waiting, "Hi, Sam here.")

    def refuse(self: Any, messages: Any) -> int:
        raise ConnectionRefusedError("smtp down")

    with monkeypatch.context() as patch:
        patch.setattr(EmailBackend, "send_messages", refuse)
        with tenant_scope(waiting.client_id):
            assert unseen_replies_email(conversation_id=waiting.pk) == 0
    waiting.refresh_from_db()
    assert waiting.reply_emailed_seq == 0  # released, not marked as mailed
    with tenant_scope(waiting.client_id):
        assert unseen_replies_email(conversation_id=waiting.pk) == 1
    assert len(mail.outbox) == 1


@pytest.mark.django_db(transaction=True)
def test_a_staff_reply_schedules_the_check(widget, settings):
    """No broker (the tests, the demo): a timer in the process runs the check after the delay."""
    settings.WIDGET_REPLY_EMAIL_DELAY_SECONDS = 0.3
    conversation, token = started(widget)
    leave_confirmed_address(widget, str(conversation.public_id), token, "ann@example.com")
    conversation.refresh_from_db()
    reply(conversation, "Hi, Sam here — we found your parcel.")  # commits (no test transaction)
    assert mail.outbox == []  # not at once: the customer gets a chance to see it
    deadline = time.monotonic() + 15
    while not mail.outbox and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(mail.outbox) == 1
    assert "we found your parcel" in mail.outbox[0].body
