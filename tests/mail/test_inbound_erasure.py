"""Erasing an e-mail conversation (apps/privacy): its e-mails lose every address, header,
subject and text, and its attachments go, files included."""

from __future__ import annotations

import os

import pytest
from django.db import transaction

from apps.mail.models import MailAttachment, MailMessage
from apps.privacy.services import conversations_erase
from tests.mail.conftest import CUSTOMER, email
from tests.support.shop import assess

pytestmark = pytest.mark.django_db


def test_erasure_empties_the_emails_and_deletes_the_attachments(
    mailbox, llm, smtp_sink, django_capture_on_commit_callbacks
):
    llm.script("assess", assess(response="Thanks, Ana García.", confidence=9))
    row = mailbox.send(
        email(
            "My address is 1 Elm St. Invoice attached.",
            attachments=[("invoice.pdf", "application/pdf", b"%PDF-1.4 Ana Garcia")],
        )
    )
    smtp_sink.wait(1)
    shop = row.client
    [attachment] = row.attachments.all()
    path = attachment.file.path
    assert os.path.exists(path)
    mails = MailMessage.objects.for_client(shop).filter(conversation_id=row.conversation_id)
    assert mails.count() == 2  # the customer's and our reply

    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        counts = conversations_erase(client=shop, conversation_ids=[row.conversation_id])

    assert counts["mail.MailMessage"] == 2 and counts["mail.MailAttachment"] == 1
    assert not MailAttachment.objects.for_client(shop).exists()
    assert not os.path.exists(path)
    for mail in mails:
        assert mail.text == mail.html == mail.subject == mail.from_address == mail.from_name == ""
        assert mail.headers == [] and mail.to_addresses == []
        assert mail.header_message_id == mail.in_reply_to == mail.references == ""
    # Nothing of the customer is left in any e-mail row.
    for needle in (CUSTOMER, "Elm St", "García"):
        assert not MailMessage.objects.for_client(shop).filter(text__contains=needle).exists()
        assert not MailMessage.objects.for_client(shop).filter(headers__icontains=needle).exists()


def test_an_unverified_sender_s_thread_is_listed_apart_by_address_and_erased_when_included(
    mailbox, llm, smtp_sink
):
    """A customer's request by e-mail address finds the thread they wrote from. The From of an
    unverified e-mail proves nothing, so it is listed apart for staff, like an address typed in
    the chat, and erased only when staff include it by id."""
    from apps.conversations.models import Conversation
    from apps.privacy.selectors import (
        MatchKind,
        SubjectMatch,
        subject_conversations,
        subject_unconfirmed_conversations,
    )

    llm.script("assess", assess(response="We open at 9.", confidence=9))
    row = mailbox.send(email("When do you open?"))
    smtp_sink.wait(1)
    shop = row.client
    conversation = Conversation.objects.for_client(shop).get(pk=row.conversation_id)
    assert not conversation.customer_verified
    match = SubjectMatch(kind=MatchKind.EMAIL, value=CUSTOMER.upper())

    assert list(subject_conversations(client=shop, match=match)) == []
    assert list(subject_unconfirmed_conversations(client=shop, match=match)) == [conversation]
    chosen = [str(conversation.public_id)]
    assert list(subject_conversations(client=shop, match=match, include_unconfirmed=chosen)) == [
        conversation
    ]
    assert (
        list(
            subject_unconfirmed_conversations(client=shop, match=match, include_unconfirmed=chosen)
        )
        == []
    )
