"""The trigger that e-mails a turn's replies: the reasoning app announces them on the kernel's
outbound hook as an internal event (it never imports apps.mail); apps.events never records or
sends an internal event, whatever a subscription lists; a widget conversation's turn sends
no e-mail."""

from __future__ import annotations

import pytest

from apps.conversations.services import conversation_create
from apps.core.outbound import TURN_REPLIED
from apps.events.models import EventDelivery, EventSubscription
from apps.mail.models import MailMessage
from apps.reasoning.services import handle_turn
from tests.mail.conftest import email
from tests.support.shop import assess

pytestmark = pytest.mark.django_db


def test_the_internal_event_never_reaches_the_events_app(mailbox, llm, smtp_sink):
    shop = mailbox.channel.client
    # A subscription that (through the ORM, past the API's check) even names the internal type.
    EventSubscription.objects.create(
        client=shop,
        url="https://hooks.shop.example/in",
        secret="whsec_x",
        event_types=[TURN_REPLIED],
    )
    llm.script("assess", assess(response="We open at 9.", confidence=9))
    mailbox.send(email("When do you open?"))
    assert len(smtp_sink.wait(1)) == 1  # the event was emitted, and the mail app acted on it
    assert not EventDelivery.objects.for_client(shop).exists()


def test_a_widget_turn_sends_no_email(shop, llm, smtp_sink, django_capture_on_commit_callbacks):
    conversation, _ = conversation_create(client=shop)
    llm.script("assess", assess(response="We open at 9.", confidence=9))
    with django_capture_on_commit_callbacks(execute=True):
        handle_turn(client=shop, conversation=conversation, text="When do you open?")
    assert smtp_sink.messages == []
    assert not MailMessage.objects.for_client(shop).exists()


def test_another_tenants_thread_is_never_joined(
    mailbox, mail_channel, llm, smtp_sink, django_capture_on_commit_callbacks
):
    from tests.factories import ClientFactory
    from tests.mail.conftest import Mailbox

    llm.default("assess", assess(response="Noted.", confidence=9))
    first = mailbox.send(email("A question"))
    [ours] = smtp_sink.wait(1)
    other = ClientFactory(slug="other", plan=mailbox.channel.client.plan)
    box_b = Mailbox(
        mail_channel(other, address="help@other.example"), django_capture_on_commit_callbacks
    )
    # A mail to tenant B naming tenant A's thread: B's own new conversation; A's is untouched.
    row = box_b.send(email("Hi", to="help@other.example", in_reply_to=ours["Message-ID"]))
    assert row.client_id == other.pk and row.conversation.client_id == other.pk
    assert row.conversation_id != first.conversation_id
    first.conversation.refresh_from_db()
    assert first.conversation.last_seq == first.conversation.messages.count()
    assert not first.conversation.messages.filter(text="Hi").exists()
