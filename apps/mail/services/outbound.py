"""A reply out: the conversation's visible assistant or staff message e-mailed to the thread's
customer with threading headers, `Auto-Submitted: auto-replied`, a plain-text part and a safe
HTML part."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from apps.clients.models import Client
    from apps.conversations.models import Conversation, Message
    from apps.mail.models import MailMessage


def mail_reply_send(
    *, client: Client, conversation: Conversation, messages: list[Message]
) -> MailMessage | None:
    """E-mail `messages` (visible assistant or staff messages of an e-mail conversation, in
    order) as one reply in the conversation's thread; record it as an outbound MailMessage.
    None when the conversation is not an e-mail thread or nothing is left to send."""
    raise NotImplementedError
