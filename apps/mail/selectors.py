"""Reads of the e-mail channel: the thread an e-mail belongs to, what was already received or
sent, and the hourly counts the caps read. Each is one indexed query (bounded work per mail)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from apps.mail.models import Direction, Disposition, MailChannel, MailMessage

if TYPE_CHECKING:
    from apps.clients.models import Client
    from apps.conversations.models import Conversation


def mail_seen(*, client: Client, header_message_id: str) -> MailMessage | None:
    """The first inbound e-mail of the client with this Message-ID (a redelivery's original)."""
    return (
        MailMessage.objects.for_client(client)
        .filter(header_message_id=header_message_id, direction=Direction.INBOUND)
        .order_by("id")
        .first()
    )


def mail_is_ours(*, client: Client, header_message_id: str) -> bool:
    """Whether we generated this Message-ID (one of our replies)."""
    return (
        MailMessage.objects.for_client(client)
        .filter(header_message_id=header_message_id, direction=Direction.OUTBOUND)
        .exists()
    )


def thread_mail(*, client: Client, message_ids: list[str]) -> MailMessage | None:
    """The e-mail of the client's threads that `message_ids` names first (In-Reply-To, then
    References newest first), with its conversation; None when none is known."""
    ids = [i for i in dict.fromkeys(message_ids) if i][:50]
    if not ids:
        return None
    found = {
        m.header_message_id: m
        for m in MailMessage.objects.for_client(client)
        .filter(header_message_id__in=ids, conversation__isnull=False)
        .select_related("conversation")
        .order_by("id")
    }
    return next((found[i] for i in ids if i in found), None)


def thread_customer_address(*, client: Client, conversation: Conversation) -> str:
    """The address the thread's first inbound e-mail came from: whose conversation it is."""
    return (
        MailMessage.objects.for_client(client)
        .filter(conversation=conversation, direction=Direction.INBOUND)
        .order_by("id")
        .values_list("from_address", flat=True)
        .first()
    ) or ""


def last_inbound(*, client: Client, conversation: Conversation) -> MailMessage | None:
    """The thread's latest customer e-mail (a reply answers it); loops and bounces excluded."""
    return (
        MailMessage.objects.for_client(client)
        .filter(
            conversation=conversation,
            direction=Direction.INBOUND,
            disposition__in=[
                Disposition.ACCEPTED,
                Disposition.THREAD_CAPPED,
                Disposition.SENDER_CAPPED,
                Disposition.EMPTY,
            ],
        )
        .select_related("channel")
        .order_by("-id")
        .first()
    )


def thread_references(*, client: Client, conversation: Conversation) -> list[str]:
    """The References chain of the thread's latest e-mail, in or out (RFC 5322: its
    References, or In-Reply-To, then its own id)."""
    last = (
        MailMessage.objects.for_client(client)
        .filter(conversation=conversation)
        .exclude(disposition__in=[Disposition.DUPLICATE, Disposition.BOUNCE])
        .order_by("-id")
        .only("references", "in_reply_to", "header_message_id")
        .first()
    )
    if last is None:
        return []
    chain = last.references.split() or ([last.in_reply_to] if last.in_reply_to else [])
    return [*chain, last.header_message_id]


def answered_in_thread_since(*, client: Client, conversation: Conversation, since: datetime) -> int:
    """Customer e-mails of the thread answered (given a turn) since `since`."""
    return (
        MailMessage.objects.for_client(client)
        .filter(
            conversation=conversation,
            direction=Direction.INBOUND,
            disposition=Disposition.ACCEPTED,
            created_at__gte=since,
        )
        .count()
    )


def answered_from_sender_since(*, client: Client, address: str, since: datetime) -> int:
    """E-mails from `address` answered (given a turn) since `since`, over all threads."""
    return (
        MailMessage.objects.for_client(client)
        .filter(
            from_address=address.lower(),
            direction=Direction.INBOUND,
            disposition=Disposition.ACCEPTED,
            created_at__gte=since,
        )
        .count()
    )


def channel_for_conversation(*, client: Client, conversation: Conversation) -> MailChannel | None:
    mail = (
        MailMessage.objects.for_client(client)
        .filter(conversation=conversation)
        .select_related("channel")
        .order_by("-id")
        .first()
    )
    return mail.channel if mail is not None else None
