"""Writes of the outcomes domain: the customer's rating of a conversation (CSAT), and the one
judgement of each ended conversation that `conversation.resolved` is sent from."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext

from apps.clients.models import Client
from apps.conversations.events import conversation_changed
from apps.conversations.models import (
    RATING_COMMENT_MAX_CHARS,
    RATING_MAX,
    RATING_MIN,
    Conversation,
    ConversationRating,
    Message,
    Role,
    Visibility,
)
from apps.core.exceptions import ApplicationError
from apps.core.outbound import emit, emit_for_conversation
from apps.outcomes.models import ConversationResolution
from apps.outcomes.selectors import (
    ConversationFacts,
    ended_conversation_facts,
    resolution_window,
)


def _score(value: Any) -> int:
    text = "" if isinstance(value, bool) or not isinstance(value, int | str) else str(value).strip()
    if not (text.isascii() and text.isdigit()) or not RATING_MIN <= int(text) <= RATING_MAX:
        message = gettext("The score must be a whole number from 1 to 5.")
        raise ApplicationError(message, {"fields": {"score": [message]}})
    return int(text)


def _comment(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        message = gettext("The comment must be text.")
        raise ApplicationError(message, {"fields": {"comment": [message]}})
    text = value.replace("\x00", "").strip()
    if len(text) > RATING_COMMENT_MAX_CHARS:
        message = gettext("The comment may be at most %(count)d characters.") % {
            "count": RATING_COMMENT_MAX_CHARS
        }
        raise ApplicationError(message, {"fields": {"comment": [message]}})
    return text


def conversation_answered(*, client: Client, conversation: Conversation) -> bool:
    """Whether the assistant or a staff member has written to the customer in the conversation
    (a visible answer): only then is there something to rate."""
    return (
        Message.objects.for_client(client)
        .filter(
            conversation=conversation,
            visibility=Visibility.VISIBLE,
            role__in=(Role.ASSISTANT, Role.STAFF),
        )
        .exists()
    )


@transaction.atomic
def conversation_rate(
    *, client: Client, conversation: Conversation, score: Any, comment: Any = None
) -> tuple[ConversationRating, bool]:
    """Record the customer's 1–5 rating (and optional comment) of the conversation. One per
    conversation: a later rating replaces the earlier one (score and comment both), so however
    often a visitor posts, the conversation counts once in the outcome figures. Only a
    conversation the assistant or staff answered can be rated. Returns the stored rating and
    whether it was created (False: replaced)."""
    clean_score, clean_comment = _score(score), _comment(comment)
    # The lock serializes two ratings of one conversation posted at once: one creates the row,
    # the other replaces it (never a unique-constraint error).
    locked = Conversation.objects.select_for_update().get(pk=conversation.pk, client=client)
    if not conversation_answered(client=client, conversation=locked):
        raise ApplicationError(
            gettext("There is nothing to rate yet: you can rate this chat once we have answered."),
            status=409,
            code="nothing_to_rate",
        )
    rating, created = ConversationRating.objects.for_client(client).update_or_create(
        client=client,
        conversation=locked,
        defaults={"score": clean_score, "comment": clean_comment},
    )
    # Open consoles (the conversation page, the inbox) refresh; it commits with this write.
    conversation_changed(locked.pk, client.pk)
    emit_for_conversation(
        "conversation.rated",
        client_id=client.pk,
        conversation=locked,
        data={"score": clean_score},
        content={"comment": clean_comment},
    )
    return rating, created


# How far back the beat task looks for conversations that ended and were never judged (a worker
# that was down for a while catches up; older ones are left alone).
RESOLUTION_LOOKBACK = timedelta(days=3)


def resolutions_record(*, client: Client, now: datetime | None = None) -> int:
    """Judge each of the client's conversations that has ended since it was last looked at,
    once, by the outcomes page's rule (`ConversationFacts.resolved_by_assistant`), and send
    `conversation.resolved` for those the assistant resolved. Returns how many it judged. Safe
    to run twice at once: the first to record a conversation sends its event."""
    now = now or timezone.now()
    window = resolution_window(client)
    judged = 0
    for fact in ended_conversation_facts(client=client, now=now, lookback=RESOLUTION_LOOKBACK):
        resolved = fact.resolved_by_assistant(now=now, window=window)
        with transaction.atomic():
            record, created = ConversationResolution.objects.for_client(client).get_or_create(
                client=client,
                conversation_id=fact.pk,
                defaults={
                    "resolved": resolved,
                    "resolved_at": fact.last_assistant_at if resolved else now,
                },
            )
            if not created:
                continue
            judged += 1
            if resolved:
                _announce_resolution(client=client, record=record, fact=fact)
    return judged


def _announce_resolution(
    *, client: Client, record: ConversationResolution, fact: ConversationFacts
) -> None:
    public_id = fact.public_id
    assert record.resolved_at is not None  # resolved ⇒ the assistant answered
    emit(
        "conversation.resolved",
        client_id=client.pk,
        conversation=public_id,
        data={
            "conversation": public_id,
            "by": "assistant",
            "resolved_at": record.resolved_at.isoformat(),
            "score": fact.score,
        },
    )


def resolutions_record_all(*, now: datetime | None = None) -> int:
    """`resolutions_record` for every active client (each one's look-up is an index range)."""
    now = now or timezone.now()
    judged = 0
    for client in Client.objects.filter(is_active=True).select_related("plan").order_by("pk"):
        judged += resolutions_record(client=client, now=now)
    return judged
