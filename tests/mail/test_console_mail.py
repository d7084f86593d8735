"""The e-mail channel in the staff console, end to end: e-mails in as a provider hands them
over, the real turn pipeline (the openai SDK against the local scripted server) and every reply
caught by a real SMTP server (aiosmtpd). The inbox labels the channel and filters by it; the
conversation page shows the thread as it was, attachments downloadable by that client's staff
only; a staff reply from the console or the API goes out once, threaded, by e-mail."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client as DjangoClient
from django.urls import reverse

from apps.accounts.models import Role
from apps.conversations.models import Conversation
from apps.conversations.services import conversation_create, message_append, unseen_replies_email
from apps.core.tenancy import tenant_scope
from apps.mail.models import Direction, MailMessage
from tests.conftest import key_for
from tests.factories import MembershipFactory
from tests.mail.conftest import CUSTOMER, email, reply_to
from tests.support.shop import assess

pytestmark = pytest.mark.django_db

PDF = b"%PDF-1.4\n% a receipt\n"


def staff(client: Any, role: str = Role.AGENT) -> DjangoClient:
    browser = DjangoClient()
    browser.force_login(MembershipFactory(client=client, role=role).user)
    return browser


def body(sent: Any) -> str:
    return str(sent.get_body(preferencelist=("plain",)).get_content())


def first_thread(mailbox: Any, llm: Any, smtp_sink: Any, **mail: Any) -> tuple[Any, Any]:
    llm.script("assess", assess(response="We open at 9 every weekday.", confidence=9))
    row = mailbox.send(email("When do you open?", subject="Opening hours", **mail))
    [ours] = smtp_sink.wait(1)
    return row, ours


def page_url(conversation: Conversation) -> str:
    return reverse("console-conversation", args=[conversation.public_id])


def test_a_console_reply_goes_out_once_threaded_by_email(
    mailbox, llm, smtp_sink, django_capture_on_commit_callbacks
):
    first, _ = first_thread(mailbox, llm, smtp_sink)
    conversation = first.conversation
    browser = staff(first.client)
    with django_capture_on_commit_callbacks(execute=True):
        response = browser.post(
            page_url(conversation) + "reply", {"text": "Hello Ana, on Sundays we open at 11."}
        )
    assert response.status_code == 302
    [_, reply] = smtp_sink.wait(2)
    assert "on Sundays we open at 11" in body(reply)
    assert reply["In-Reply-To"] == f"<{first.header_message_id}>"
    assert first.header_message_id in reply["References"]
    assert reply["Auto-Submitted"] == "auto-replied"
    assert reply["Subject"] == "Re: Opening hours"
    # The widget's "unseen replies" e-mail never mails it a second time.
    Conversation.objects.for_client(first.client).filter(pk=conversation.pk).update(
        contact_email=CUSTOMER, contact_email_confirmed_at=conversation.created_at
    )
    with tenant_scope(first.client.pk):
        assert unseen_replies_email(conversation_id=conversation.pk) == 0
    assert len(smtp_sink.to(CUSTOMER)) == 2
    sent = MailMessage.objects.for_client(first.client).filter(direction=Direction.OUTBOUND)
    assert sent.count() == 2


def test_an_api_reply_goes_out_by_email(
    mailbox, llm, smtp_sink, django_capture_on_commit_callbacks
):
    first, _ = first_thread(mailbox, llm, smtp_sink)
    api = key_for(first.client, Role.AGENT)
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            f"/api/v1/conversations/{first.conversation.public_id}/messages",
            {"text": "Your parcel left today."},
            format="json",
        )
    assert response.status_code == 201, response.content
    [_, reply] = smtp_sink.wait(2)
    assert "Your parcel left today." in body(reply)
    assert reply["In-Reply-To"] == f"<{first.header_message_id}>"


def test_a_widget_conversations_staff_reply_sends_no_email(
    shop, smtp_sink, django_capture_on_commit_callbacks
):
    conversation, _ = conversation_create(client=shop)
    message_append(client=shop, conversation=conversation, role="user", text="Hi there")
    with django_capture_on_commit_callbacks(execute=True):
        response = staff(shop).post(page_url(conversation) + "reply", {"text": "Hello!"})
    assert response.status_code == 302
    assert smtp_sink.messages == []
    assert not MailMessage.objects.for_client(shop).exists()


def test_the_inbox_labels_the_channel_and_filters_by_it(mailbox, llm, smtp_sink):
    first, _ = first_thread(mailbox, llm, smtp_sink)
    widget, _ = conversation_create(client=first.client)
    message_append(client=first.client, conversation=widget, role="user", text="Chat hello")
    browser = staff(first.client)
    page = browser.get(reverse("console-queue")).content.decode()
    assert 'data-channel="email">E-mail</span>' in page
    assert 'data-channel="widget">Chat</span>' in page
    rows = browser.get(reverse("console-inbox-poll") + "?channel=email").json()["rows"]
    assert [(r["id"], r["channel"], r["channel_label"]) for r in rows] == [
        (str(first.conversation.public_id), "email", "E-mail")
    ]
    spanish = browser.get(
        reverse("console-inbox-poll") + "?channel=email", HTTP_ACCEPT_LANGUAGE="es"
    )
    assert spanish.json()["rows"][0]["channel_label"] == "Correo"


def test_the_conversation_page_shows_the_thread_as_it_was(mailbox, llm, smtp_sink, client_b):
    hostile = '<p>Hi</p><script>alert("pwned")</script>'
    first, ours = first_thread(
        mailbox,
        llm,
        smtp_sink,
        html=hostile,
        attachments=[("receipt.pdf", "application/pdf", PDF)],
    )
    auto = mailbox.send(
        reply_to(ours, "I am out of the office.", headers={"Auto-Submitted": "auto-replied"})
    )
    assert auto.conversation_id == first.conversation_id
    browser = staff(first.client, Role.VIEWER)
    page = browser.get(page_url(first.conversation))
    assert page.status_code == 200
    html = page.content.decode()
    assert "Opening hours" in html and "Re: Opening hours" in html
    assert "&lt;ana@customer.example&gt;" in html
    assert "When do you open?" in html
    assert "Auto-reply — not answered" in html
    assert "Accepted — joined its conversation" in html
    assert "<script>alert" not in html
    assert "receipt.pdf" in html
    [attachment] = first.attachments.all()
    url = page_url(first.conversation) + f"attachments/{attachment.pk}"
    assert f'href="{url}' in html
    download = browser.get(url)
    assert download.status_code == 200
    assert b"".join(download.streaming_content) == PDF
    assert download["Content-Disposition"].startswith("attachment")
    # Another client's staff: the conversation and the file are missing to them.
    outsider = staff(client_b, Role.OWNER)
    assert outsider.get(url).status_code == 404
    assert outsider.get(page_url(first.conversation)).status_code == 404
    # An id of another conversation's attachment is a 404 here too.
    other, _ = conversation_create(client=first.client)
    message_append(client=first.client, conversation=other, role="user", text="Hello")
    wrong = page_url(other) + f"attachments/{attachment.pk}"
    assert browser.get(wrong).status_code == 404
    assert browser.get(page_url(first.conversation) + "attachments/x").status_code == 404
