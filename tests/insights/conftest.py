"""Insights tests: the shop, the scripted OpenAI-compatible server and helpers that make the
evidence a nightly run reads (escalations, low-confidence turns, questioned answers)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from apps.conversations.models import Conversation, Kind, Role
from apps.conversations.services import conversation_create, message_append
from apps.escalations.services import escalation_create
from tests.support.messages import internal_message


def ref(conv: Conversation) -> str:
    """The short id a run sends the model for a conversation."""
    return conv.public_id.hex[:8]


def escalated(client: Any, text: str, *, reason: str = "customer_request") -> Conversation:
    """A conversation where the customer asked `text` and it went to a human."""
    conv, _ = conversation_create(client=client)
    message_append(client=client, conversation=conv, role=Role.USER, text=text)
    escalation_create(
        client=client, conversation=conv, reason=reason, detail="asked for a person", notify=False
    )
    return conv


def questioned(client: Any, text: str) -> Conversation:
    """A conversation whose answer the evaluation step questioned (h3's internal message)."""
    conv, _ = conversation_create(client=client)
    message_append(client=client, conversation=conv, role=Role.USER, text=text)
    internal_message(
        conv,
        Kind.EVALUATION,
        "questioned",
        role=Role.SYSTEM,
        data={
            "outcome": "questioned",
            "confidence_before": 70,
            "confidence_after": 40,
            "escalated": False,
            "evaluation": "The answer is not in the policy text.",
        },
    )
    return conv


def window(days: int = 1) -> tuple[Any, Any]:
    now = timezone.now()
    return now - timedelta(days=days), now + timedelta(minutes=1)


@pytest.fixture
def make_escalated():
    return escalated
