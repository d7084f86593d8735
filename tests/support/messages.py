"""Messages the staff see and the customer never does, appended the way the pipeline and the
console append them."""

from __future__ import annotations

from typing import Any

from apps.conversations.models import Conversation, Message, Role, Visibility
from apps.conversations.services import message_append


def internal_message(
    conversation: Conversation,
    kind: str,
    text: str,
    *,
    role: str = Role.ASSISTANT,
    **fields: Any,
) -> Message:
    """An internal message of `kind` on `conversation` (an assessment, an evaluation, a staff
    note); `fields` are the rest of message_append's (data, trace, ...)."""
    return message_append(
        client=conversation.client,
        conversation=conversation,
        role=role,
        kind=kind,
        visibility=Visibility.INTERNAL,
        text=text,
        **fields,
    )
