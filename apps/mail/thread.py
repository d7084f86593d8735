"""The staff side's reads of the e-mail channel: the client's channels, one conversation's
e-mails as they were (with their attachments) and one attachment for download — always within
the client (another client's id reads as missing)."""

from __future__ import annotations

from django.db.models import Prefetch, QuerySet

from apps.clients.models import Client
from apps.conversations.models import Conversation
from apps.mail.models import MailAttachment, MailChannel, MailMessage


def mail_channel_list(*, client: Client) -> QuerySet[MailChannel]:
    return MailChannel.objects.for_client(client).order_by("address", "pk")


def mail_thread(*, client: Client, conversation: Conversation) -> QuerySet[MailMessage]:
    """The conversation's e-mails, oldest first, with their attachments and the conversation
    message each became or carried."""
    return (
        MailMessage.objects.for_client(client)
        .filter(conversation=conversation)
        .select_related("message")
        .prefetch_related(
            Prefetch(
                "attachments",
                queryset=MailAttachment.objects.for_client(client).order_by("pk"),
            )
        )
        .order_by("created_at", "pk")
    )


def mail_attachment_get(
    *, client: Client, conversation: Conversation, attachment_id: str
) -> MailAttachment | None:
    """A kept attachment of one of the conversation's e-mails; None for a malformed, unknown,
    refused or another client's id alike."""
    try:
        pk = int(attachment_id)
    except (TypeError, ValueError):
        return None
    return (
        MailAttachment.objects.for_client(client)
        .filter(pk=pk, mail__conversation=conversation)
        .exclude(file="")
        .first()
    )
