"""A local SMTP server for the e-mail channel (`manage.py mail_serve`, docs/email.md "The
demo"): mail sent to a channel's support address on this machine goes through `mail_receive`,
exactly as a provider's webhook or IMAP would hand it over.

It is for the demo and for a trusted relay in front of GuideDesk (a mail server that already
checked DKIM/SPF): senders count as verified only when the command is told the relay is
trusted. It accepts mail only for the address of exactly one enabled channel."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from anymail.inbound import AnymailInboundMessage
from django.db import close_old_connections

from apps.core.tenancy import tenant_scope
from apps.mail.models import MailChannel
from apps.mail.services.inbound import mail_receive

logger = logging.getLogger(__name__)

# The largest message the server takes (a 10 MB attachment is ~14 MB once base64-encoded).
MAX_MESSAGE_BYTES = 40 * 1024 * 1024
# Recorded as the mail's `received_via`: none of the providers, nor IMAP.
LOCAL_VIA = ""


def channel_for_address(address: str) -> MailChannel | None:
    """The one enabled channel with this support address; None when none or several clients
    have it (a local server cannot tell them apart)."""
    found = list(
        MailChannel.objects.unscoped("the local SMTP server routes mail by its recipient")
        .filter(address__iexact=address.strip(), enabled=True)
        .select_related("client")[:2]
    )
    return found[0] if len(found) == 1 else None


def deliver(raw: bytes, recipients: list[str], *, trusted_relay: bool) -> list[str]:
    """Hand one received message to each recipient channel; the public ids of the mails
    recorded."""
    mail = AnymailInboundMessage.parse_raw_mime_bytes(raw)
    recorded = []
    try:
        for address in recipients:
            channel = channel_for_address(address)
            if channel is None:
                continue
            with tenant_scope(channel.client_id):
                row = mail_receive(
                    channel=channel, mail=mail, sender_verified=trusted_relay, via=LOCAL_VIA
                )
            recorded.append(str(row.public_id))
    finally:
        close_old_connections()
    return recorded


class LocalMailHandler:
    """aiosmtpd's handler: refuses recipients that are no channel's address, and delivers each
    message in a worker thread (the ORM is synchronous)."""

    def __init__(self, *, trusted_relay: bool = False) -> None:
        self.trusted_relay = trusted_relay

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, rcpt_options: list[str]
    ) -> str:
        loop = asyncio.get_running_loop()
        channel = await loop.run_in_executor(None, _channel_exists, address)
        if not channel:
            return "550 5.1.1 No e-mail channel has this address"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        loop = asyncio.get_running_loop()
        try:
            recorded = await loop.run_in_executor(
                None,
                lambda: deliver(
                    envelope.original_content or envelope.content,
                    list(envelope.rcpt_tos),
                    trusted_relay=self.trusted_relay,
                ),
            )
        except Exception:
            logger.exception("local SMTP: the message could not be received")
            return "451 4.3.0 Could not take the message now; try again later"
        logger.info("local SMTP: received", extra={"mails": recorded})
        return "250 OK"


def _channel_exists(address: str) -> bool:
    try:
        return channel_for_address(address) is not None
    finally:
        close_old_connections()
