"""Events out to the business's systems: the one hook the apps that cause an event call
(docs/events.md).

The apps that cause events (conversations, escalations, approvals, tools, outcomes) sit below
`apps.events`, which keeps the subscriptions and sends the signed deliveries; they must not
import it. So they call `emit` here, in the kernel, and `apps.events` connects its receiver at
start-up (`EventsConfig.ready`). `emit` runs no query and sends nothing: it builds the event
(its id is fixed here, so every delivery and retry of it carries the same `webhook-id`) and
hands it to the receivers when the caller's transaction commits — an event whose cause rolled
back never leaves. With no receiver connected (the events app not installed) it does nothing.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

logger = logging.getLogger(__name__)

__all__ = ["INTERNAL_PREFIX", "TURN_REPLIED", "OutboundEvent", "connect", "disconnect", "emit"]

# Internal events: between the apps of this process only, never sent to the business's systems
# (apps.events ignores every type with this prefix; they are not in docs/events.md).
INTERNAL_PREFIX = "internal."
# A turn posted visible replies (its answer, a question, a hand-off notice); data:
# {"conversation_id", "trace_id", "channel"}. The e-mail channel mails them (apps.mail).
TURN_REPLIED = "internal.turn.replied"


@dataclass(frozen=True)
class OutboundEvent:
    """One event as it happened. `data` goes to every subscription of the type; `content`
    (the customer's or staff's words, tool params and results) only to subscriptions that
    opt in to customer text. `conversation` is the conversation's public id (per-conversation
    ordering of deliveries), or ""."""

    type: str
    client_id: int
    data: dict[str, Any]
    content: dict[str, Any] = field(default_factory=dict)
    conversation: str = ""
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    occurred_at: datetime = field(default_factory=timezone.now)


Receiver = Callable[[OutboundEvent], None]
_receivers: list[Receiver] = []


def connect(receiver: Receiver) -> None:
    """Add a receiver (once); called by the events app at start-up."""
    if receiver not in _receivers:
        _receivers.append(receiver)


def disconnect(receiver: Receiver) -> None:
    if receiver in _receivers:
        _receivers.remove(receiver)


def _hand_over(event: OutboundEvent) -> None:
    for receiver in list(_receivers):
        try:
            receiver(event)
        except Exception:
            # An event that cannot be queued must never fail what caused it (a turn, a reply).
            logger.exception("outbound event not queued", extra={"event_type": event.type})


def emit(
    type: str,
    *,
    client_id: int,
    data: dict[str, Any],
    content: dict[str, Any] | None = None,
    conversation: Any = "",
) -> OutboundEvent | None:
    """Queue the event `type` for the client's subscriptions once the current transaction
    commits (at once outside one). Returns the event, or None when nobody listens."""
    if not _receivers:
        return None
    event = OutboundEvent(
        type=type,
        client_id=client_id,
        data=data,
        content=content or {},
        conversation=str(conversation or ""),
    )
    transaction.on_commit(lambda: _hand_over(event))
    return event
