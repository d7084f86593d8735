"""Hand-made conversations for the outcome metrics: every timestamp chosen by the test."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.utils import timezone

from apps.billing.models import UsageRecord
from apps.clients.models import Client
from apps.conversations.models import (
    Conversation,
    ConversationRating,
    Message,
    Role,
    Visibility,
)
from apps.escalations.models import Escalation
from tests.console.conftest import browser_for  # noqa: F401  (fixture, re-exported)

# A fixed "now" well after every hand-made conversation, so "idle for the window" is exact.
NOW = datetime(2026, 3, 20, 12, 0, tzinfo=timezone.get_fixed_timezone(0))
DAY = datetime(2026, 3, 10, 9, 0, tzinfo=timezone.get_fixed_timezone(0))


DEFAULT_LINES = [(Role.USER, 0), (Role.ASSISTANT, 30)]


def make_conversation(
    client: Client,
    *,
    started: datetime = DAY,
    lines: list[tuple[str, int]] | None = None,
    visitor_id: str = "",
    contact_email: str = "",
    handoff: str = "",
    score: int | None = None,
    cost: str = "0",
    billed: str = "0",
    status: str = "open",
) -> Conversation:
    """A conversation started at `started` with visible `lines` (role, seconds after start);
    by default the customer writes at 0 s and the assistant answers at 30 s."""
    conversation = Conversation.objects.create(
        client=client, visitor_id=visitor_id, contact_email=contact_email, status=status
    )
    Conversation.objects.for_client(client).filter(pk=conversation.pk).update(created_at=started)
    for seq, (role, seconds) in enumerate(lines_or_default(lines), 1):
        message = Message.objects.create(
            client=client,
            conversation=conversation,
            seq=seq,
            role=role,
            text=f"{role} line {seq}",
            visibility=Visibility.VISIBLE,
        )
        Message.objects.for_client(client).filter(pk=message.pk).update(
            created_at=started + timedelta(seconds=seconds)
        )
    last = max((seconds for _, seconds in lines_or_default(lines)), default=None)
    if last is not None:
        Conversation.objects.for_client(client).filter(pk=conversation.pk).update(
            last_message_at=started + timedelta(seconds=last)
        )
    if handoff:
        Escalation.objects.create(client=client, conversation=conversation, reason=handoff)
    if score is not None:
        ConversationRating.objects.create(client=client, conversation=conversation, score=score)
    if Decimal(cost) or Decimal(billed):
        UsageRecord.objects.create(
            client=client,
            conversation=conversation,
            mode="adaptive",
            step="respond",
            model="gpt-4o-mini",
            cost_usd=Decimal(cost),
            billed_usd=Decimal(billed),
        )
    return conversation


def lines_or_default(lines: list[tuple[str, int]] | None) -> list[tuple[str, int]]:
    return DEFAULT_LINES if lines is None else lines


def at(**delta: Any) -> datetime:
    return DAY + timedelta(**delta)
