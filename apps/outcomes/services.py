"""Writes of the outcomes domain: the customer's rating of a conversation (CSAT)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.clients.models import Client
from apps.conversations.events import conversation_changed
from apps.conversations.models import (
    RATING_COMMENT_MAX_CHARS,
    RATING_MAX,
    RATING_MIN,
    Conversation,
    ConversationRating,
    Role,
)
from apps.core.exceptions import ApplicationError

# A rating may be changed for this long after it was first given (a slip of the finger); after
# that it is final, so the figures of a closed period do not move.
RATING_EDIT_WINDOW = timedelta(minutes=10)


def _score(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ApplicationError(
            "The score must be a whole number from 1 to 5.",
            {"fields": {"score": ["Must be a whole number from 1 to 5."]}},
        )
    text = str(value).strip()
    if not (text.isascii() and text.isdigit()) or not RATING_MIN <= int(text) <= RATING_MAX:
        raise ApplicationError(
            "The score must be a whole number from 1 to 5.",
            {"fields": {"score": ["Must be a whole number from 1 to 5."]}},
        )
    return int(text)


def _comment(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ApplicationError(
            "The comment must be text.", {"fields": {"comment": ["Too long or not text."]}}
        )
    text = value.replace("\x00", "").strip()
    if len(text) > RATING_COMMENT_MAX_CHARS:
        raise ApplicationError(
            f"The comment may be at most {RATING_COMMENT_MAX_CHARS} characters.",
            {"fields": {"comment": ["Too long or not text."]}},
        )
    return text


@transaction.atomic
def conversation_rate(
    *, client: Client, conversation: Conversation, score: Any, comment: Any = None
) -> tuple[ConversationRating, bool]:
    """Record the customer's 1–5 rating (and optional comment) of the conversation. Once per
    conversation; the same visitor may change it within RATING_EDIT_WINDOW. Returns the rating
    and whether it was created (False: changed)."""
    clean_score, clean_comment = _score(score), _comment(comment)
    locked = Conversation.objects.select_for_update().get(pk=conversation.pk, client=client)
    if not locked.messages.filter(role=Role.USER).exists():
        raise ApplicationError(
            "There is nothing to rate yet: the conversation has no message.",
            status=409,
            code="nothing_to_rate",
        )
    existing = ConversationRating.objects.for_client(client).filter(conversation=locked).first()
    if existing is None:
        rating = ConversationRating.objects.create(
            client=client, conversation=locked, score=clean_score, comment=clean_comment
        )
        created = True
    else:
        if timezone.now() - existing.created_at > RATING_EDIT_WINDOW:
            raise ApplicationError(
                "This conversation has already been rated.", status=409, code="already_rated"
            )
        existing.score, existing.comment = clean_score, clean_comment
        existing.save(update_fields=["score", "comment", "updated_at"])
        rating, created = existing, False
    # Open consoles (the conversation page, the inbox) refresh; it commits with this write.
    conversation_changed(locked.pk, client.pk)
    return rating, created
