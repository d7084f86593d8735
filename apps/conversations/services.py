from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.clients.models import Client
from apps.conversations.events import conversation_changed
from apps.conversations.models import Conversation, Kind, Message, Role, Visibility
from apps.core.exceptions import ApplicationError

MAX_MESSAGE_CHARS = 4000


def _hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@transaction.atomic
def conversation_create(
    *, client: Client, visitor_id: str = "", language: str | None = None
) -> tuple[Conversation, str]:
    """Start a conversation; returns it with the visitor token (shown once, stored hashed)."""
    token = secrets.token_urlsafe(24)
    conversation = Conversation.objects.create(
        client=client,
        visitor_id=visitor_id[:128],
        visitor_token_hash=_hash_token(token),
        language=language or client.language,
    )
    return conversation, token


def conversation_token_matches(*, conversation: Conversation, token: str) -> bool:
    return bool(conversation.visitor_token_hash) and hmac.compare_digest(
        conversation.visitor_token_hash, _hash_token(token)
    )


@transaction.atomic
def message_append(
    *,
    client: Client,
    conversation: Conversation,
    role: str,
    text: str,
    kind: str = Kind.TEXT,
    visibility: str = Visibility.VISIBLE,
    data: dict[str, Any] | None = None,
    trace: Any = None,
    author: Any = None,
) -> Message:
    """Append a message with the next `seq`. The conversation row is locked while the number is
    taken, so concurrent writers (a turn, a staff reply) never collide."""
    if conversation.client_id != client.pk:
        raise ValueError("conversation belongs to another client")
    locked = Conversation.objects.select_for_update().get(pk=conversation.pk)
    locked.last_seq += 1
    now = timezone.now()
    update = ["last_seq", "updated_at"]
    if visibility == Visibility.VISIBLE:
        locked.last_message_at = now
        update.append("last_message_at")
    locked.save(update_fields=update)
    conversation.last_seq = locked.last_seq
    conversation.status = locked.status
    if visibility == Visibility.VISIBLE:
        conversation_changed(conversation.pk, client.pk)  # the event streams (after commit)
    return Message.objects.create(
        client=client,
        conversation=conversation,
        seq=locked.last_seq,
        role=Role(role),
        visibility=Visibility(visibility),
        kind=Kind(kind),
        text=text,
        data=data or {},
        trace=trace,
        author=author,
    )


def validate_customer_text(text: Any) -> str:
    if not isinstance(text, str):
        raise ApplicationError("text must be a string.", {"fields": {"text": "Must be a string."}})
    if "\x00" in text:
        raise ApplicationError(
            "text must not contain NUL characters.",
            {"fields": {"text": "Must not contain NUL characters."}},
        )
    cleaned = text.strip()
    if not cleaned:
        raise ApplicationError(
            "text must not be empty.", {"fields": {"text": "Must not be empty."}}
        )
    if len(cleaned) > MAX_MESSAGE_CHARS:
        raise ApplicationError(
            f"text is longer than {MAX_MESSAGE_CHARS} characters.",
            {"fields": {"text": f"At most {MAX_MESSAGE_CHARS} characters."}},
            status=413,
            code="too_long",
        )
    return cleaned
