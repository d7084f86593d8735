"""Rows of an e-mail thread for the staff-side tests (admin, API, console): a channel, an
e-mail conversation with an inbound mail (an attachment kept, one refused) and our reply, as
`mail_receive` and `mail_reply_send` record them (apps/mail/models.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from django.core.files.base import ContentFile

from apps.clients.models import Client
from apps.conversations.models import Channel, Conversation, Message
from apps.conversations.models import Role as MessageRole
from apps.conversations.services import conversation_create, message_append
from apps.mail.channels import mail_channel_create
from apps.mail.models import (
    Direction,
    Disposition,
    InboundVia,
    MailAttachment,
    MailChannel,
    MailMessage,
)

HOSTILE_HTML = '<p>Hello</p><script>alert("pwned")</script><img src=x onerror="alert(1)">'


@dataclass
class Thread:
    channel: MailChannel
    conversation: Conversation
    inbound: MailMessage
    reply: MailMessage | None
    attachment: MailAttachment
    refused: MailAttachment
    customer_message: Message


def make_channel(client: Client, **values: Any) -> MailChannel:
    return mail_channel_create(
        client=client,
        **{
            "address": f"support@{client.slug}.example",
            "inbound_via": InboundVia.MAILGUN,
            "webhook_secret": f"mailgun-key-{client.slug}",
            **values,
        },
    )


def make_thread(
    client: Client, *, channel: MailChannel | None = None, reply: bool = True
) -> Thread:
    channel = channel or make_channel(client)
    conversation, _ = conversation_create(client=client, visitor_id="jane@example.com")
    conversation.channel = Channel.EMAIL
    conversation.save(update_fields=["channel"])
    text = "Please cancel order TH-10042."
    message = message_append(
        client=client, conversation=conversation, role=MessageRole.USER, text=text
    )
    inbound = MailMessage.objects.create(
        client=client,
        channel=channel,
        conversation=conversation,
        message=message,
        direction=Direction.INBOUND,
        disposition=Disposition.ACCEPTED,
        header_message_id="CAF-1@mail.example.com",
        from_address="jane@example.com",
        from_name="Jane Roe",
        to_addresses=[channel.address],
        subject="Cancel my order",
        headers=[["From", "Jane Roe <jane@example.com>"], ["Subject", "Cancel my order"]],
        text=text + "\n\n-- \nJane\n\n> an older quoted line",
        html=HOSTILE_HTML,
        sender_verified=True,
        received_via=InboundVia.MAILGUN,
    )
    attachment = MailAttachment(
        client=client,
        mail=inbound,
        filename="receipt.pdf",
        content_type="application/pdf",
        size=9,
    )
    attachment.file.save("receipt.pdf", ContentFile(b"%PDF-1.4\n"), save=True)
    refused = MailAttachment.objects.create(
        client=client,
        mail=inbound,
        filename="movie.mov",
        content_type="video/quicktime",
        size=50_000_000,
        refused="larger than the channel's limit",
    )
    outbound = None
    if reply:
        outbound = MailMessage.objects.create(
            client=client,
            channel=channel,
            conversation=conversation,
            direction=Direction.OUTBOUND,
            disposition=Disposition.SENT,
            header_message_id=f"gd-1@{client.slug}.example",
            in_reply_to="CAF-1@mail.example.com",
            references="<CAF-1@mail.example.com>",
            from_address=channel.address,
            to_addresses=["jane@example.com"],
            subject="Re: Cancel my order",
            text="Do you want me to cancel order TH-10042? Reply yes to confirm.",
        )
    return Thread(
        channel=channel,
        conversation=conversation,
        inbound=inbound,
        reply=outbound,
        attachment=attachment,
        refused=refused,
        customer_message=message,
    )


@pytest.fixture(autouse=False)
def media_root(settings: Any, tmp_path: Any) -> Any:
    """Attachments are written under a temporary MEDIA_ROOT, never into the checkout."""
    settings.MEDIA_ROOT = str(tmp_path / "media")
    return tmp_path / "media"
