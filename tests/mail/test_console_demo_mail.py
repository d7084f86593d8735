"""The demo answers local e-mail (`manage.py mail_serve`, docs/email.md "The demo"): a real SMTP
client talks to the command's SMTP server (aiosmtpd, the command's own handler) on a local
port; the e-mail goes through `mail_receive` and the real turn pipeline, and the assistant's
reply arrives threaded in the SMTP sink. Mail to an address that is no channel's is refused."""

from __future__ import annotations

import smtplib
from collections.abc import Iterator
from email.message import EmailMessage
from email.utils import make_msgid
from typing import Any

import pytest
from aiosmtpd.controller import Controller

from apps.mail.local_smtp import LocalMailHandler
from apps.mail.models import Direction, MailMessage
from apps.platform.local_server import free_port
from tests.mail.conftest import CUSTOMER, SUPPORT
from tests.support.shop import assess

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def local_smtp(channel) -> Iterator[int]:
    """The command's SMTP server (its handler, untrusted senders) on a free port."""
    port = free_port()
    controller = Controller(LocalMailHandler(), hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield port
    finally:
        controller.stop()


def customer_mail(text: str, *, to: str = SUPPORT) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = f"Ana García <{CUSTOMER}>"
    msg["To"] = to
    msg["Subject"] = "Opening hours"
    msg["Message-ID"] = make_msgid(domain="customer.example")
    msg.set_content(text)
    return msg


def test_mail_sent_to_the_local_server_is_answered_in_its_thread(
    local_smtp: int, channel: Any, llm: Any, smtp_sink: Any
) -> None:
    llm.script("assess", assess(response="We open at 9 every weekday.", confidence=9))
    sent = customer_mail("When do you open?")
    with smtplib.SMTP("127.0.0.1", local_smtp, timeout=30) as smtp:
        smtp.send_message(sent)
    [reply] = smtp_sink.wait(1)
    assert "We open at 9 every weekday." in reply.get_body(("plain",)).get_content()
    assert reply["In-Reply-To"] == sent["Message-ID"]
    inbound = MailMessage.objects.for_client(channel.client).get(direction=Direction.INBOUND)
    assert inbound.sender_verified is False  # not a trusted relay
    assert inbound.conversation.channel == "email"


def test_mail_to_an_address_of_no_channel_is_refused(local_smtp: int, channel: Any) -> None:
    with (
        smtplib.SMTP("127.0.0.1", local_smtp, timeout=30) as smtp,
        pytest.raises(smtplib.SMTPRecipientsRefused),
    ):
        smtp.send_message(customer_mail("Hello?", to="nobody@shop.example"))
    assert not MailMessage.objects.for_client(channel.client).exists()
