"""Hand-back: staff give the conversation back to the assistant, and what the customer wrote
while they waited gets an answer.

While a person owns a conversation, the customer's messages are stored and their turns are
recorded as skipped (`handle_turn`). At hand-back the latest of them that nobody answered gets
one turn, through the normal turn path; the earlier unanswered ones are in its history."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Q

from apps.clients.models import Client
from apps.conversations.models import Conversation, Message, Role, Visibility
from apps.escalations.models import Escalation, EscalationStatus
from apps.escalations.services import escalation_resolve
from apps.reasoning.models import ReasoningTrace, TraceStatus
from apps.reasoning.services import turn_queue_on_commit


def escalation_hand_back(
    *, client: Client, escalation: Escalation, actor: Any = None
) -> Escalation:
    """Resolve the escalation (the assistant owns the conversation again) and queue a turn for
    the customer's latest message of the hand-off that got no reply. Idempotent: resolving an
    already resolved escalation queues nothing."""
    with transaction.atomic():
        locked = Escalation.objects.select_for_update().get(pk=escalation.pk, client=client)
        was_open = locked.status == EscalationStatus.OPEN
        resolved = escalation_resolve(client=client, escalation=locked, actor=actor)
        if not was_open:
            return resolved
        conversation = Conversation.objects.for_client(client).get(pk=resolved.conversation_id)
        message = handoff_message_unanswered(
            client=client, conversation=conversation, escalation=resolved
        )
        if message is not None:
            # The message's turn was recorded as skipped (a person owned the conversation; no
            # model ran, nothing was spent). Dropping that record puts the message back where
            # every new message starts — waiting for its turn — so the normal path runs it,
            # and with a broker the sweeper adopts it should the queued task be lost.
            ReasoningTrace.objects.for_client(client).filter(
                user_message=message, status=TraceStatus.SKIPPED
            ).delete()
            turn_queue_on_commit(message_id=message.pk, client_id=client.pk)
    return resolved


def handoff_message_unanswered(
    *, client: Client, conversation: Conversation, escalation: Escalation
) -> Message | None:
    """The customer's latest message written during this escalation's hand-off, if neither
    the assistant nor staff replied after it; None otherwise. Its turn must not have run to an
    answer (a skipped turn, or none)."""
    started = (
        Message.objects.for_client(client)
        .filter(conversation=conversation, data__escalation_id=str(escalation.public_id))
        .order_by("seq")
        .values_list("seq", flat=True)
        .first()
    )
    during = Q(seq__gt=started) if started is not None else Q(created_at__gt=escalation.created_at)
    latest = (
        Message.objects.for_client(client)
        .filter(conversation=conversation, role=Role.USER)
        .filter(during)
        .order_by("-seq")
        .first()
    )
    if latest is None:
        return None
    answered = (
        Message.objects.for_client(client)
        .filter(
            conversation=conversation,
            role__in=[Role.ASSISTANT, Role.STAFF],
            visibility=Visibility.VISIBLE,
            seq__gt=latest.seq,
        )
        .exists()
    )
    if answered:
        return None
    turn = ReasoningTrace.objects.for_client(client).filter(user_message=latest).first()
    if turn is not None and turn.status != TraceStatus.SKIPPED:
        return None
    return latest


def conversation_hand_back(
    *, client: Client, conversation: Conversation, actor: Any = None, answer_waiting: bool = True
) -> Escalation | None:
    """Staff give the conversation back to the assistant. With `answer_waiting` (the default)
    the customer's message staff left unanswered gets a turn (`escalation_hand_back`); without,
    the assistant simply owns the conversation again and waits for the customer's next
    message. None when no escalation is open (the assistant already owns it): nothing
    changes."""
    escalation = (
        Escalation.objects.for_client(client)
        .filter(conversation=conversation, status=EscalationStatus.OPEN)
        .first()
    )
    if escalation is None:
        return None
    if answer_waiting:
        return escalation_hand_back(client=client, escalation=escalation, actor=actor)
    return escalation_resolve(client=client, escalation=escalation, actor=actor)
