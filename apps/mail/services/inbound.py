"""An e-mail in: loops, bounces and lists set aside; caps; the thread it joins; the customer's
new text (quoted history and signature stripped); the same turn pipeline as the widget."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from anymail.inbound import AnymailInboundMessage

    from apps.mail.models import InboundVia, MailChannel, MailMessage


def mail_receive(
    *,
    channel: MailChannel,
    mail: AnymailInboundMessage,
    sender_verified: bool,
    via: InboundVia | str,
) -> MailMessage:
    """Record one inbound e-mail for `channel` and, when it is a customer's mail that may be
    answered, append it to its conversation and schedule its turn (`handle_turn`).

    Every transport (the providers' signed webhooks, IMAP polling, the demo's local SMTP
    server) parses what it received into an `AnymailInboundMessage` and decides
    `sender_verified` (DKIM or SPF passed for the From address, as the provider or the trusted
    Authentication-Results header reports it), then calls this. Safe to call twice for the same
    Message-ID (the second is recorded as a duplicate)."""
    raise NotImplementedError
