"""Billing fixtures: a helper that writes finished turns (trace + usage records) on any day (the
shop, fake LLM server and chat helper come from tests/support/shop.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

import pytest
from django.utils import timezone

from apps.billing.models import UsageRecord
from apps.billing.services import usage_record_create
from apps.clients.models import Client
from apps.conversations.models import Conversation, Role
from apps.conversations.services import conversation_create, message_append
from apps.reasoning.models import ReasoningTrace, TraceStatus


@dataclass(frozen=True)
class Call:
    step: str
    prompt: int
    completion: int
    model: str = "gpt-4o-mini"


def at(day: date, hour: int = 12, minute: int = 0) -> datetime:
    return datetime.combine(day, time(hour, minute), tzinfo=timezone.get_current_timezone())


def finished_trace(client: Client, text: str, **fields: Any) -> tuple[Conversation, ReasoningTrace]:
    """A new conversation where the customer said `text`, and the finished trace of that turn
    (`fields`: the trace's mode, figures, ...)."""
    conv, _ = conversation_create(client=client)
    message = message_append(client=client, conversation=conv, role=Role.USER, text=text)
    trace = ReasoningTrace.objects.create(
        client=client, conversation=conv, user_message=message, status=TraceStatus.DONE, **fields
    )
    return conv, trace


def make_turn(
    client: Client,
    *,
    day: date,
    calls: Sequence[Call],
    mode: str | None = None,
    critique: bool = False,
    hour: int = 12,
    minute: int = 0,
    call_lag_minutes: int = 0,
) -> ReasoningTrace:
    """A finished turn of `client` that started on `day`: its trace and one usage record per
    call, priced by the real service (cost from ModelPrice, billed × the mode's multiplier)."""
    mode = mode or client.plan.ai_mode
    conv, trace = finished_trace(
        client,
        "hello",
        mode=mode,
        model=calls[0].model if calls else "",
        critique_triggered=critique,
        llm_calls=len(calls),
        prompt_tokens=sum(c.prompt for c in calls),
        completion_tokens=sum(c.completion for c in calls),
    )
    started = at(day, hour, minute)
    ReasoningTrace.objects.unscoped("test checks the database directly").filter(pk=trace.pk).update(
        created_at=started
    )
    trace.created_at = started
    for call in calls:
        record = usage_record_create(
            client=client,
            mode=mode,
            step=call.step,
            model=call.model,
            prompt_tokens=call.prompt,
            completion_tokens=call.completion,
            conversation=conv,
            trace=trace,
        )
        lagged = started + timedelta(minutes=call_lag_minutes)
        UsageRecord.objects.unscoped("test checks the database directly").filter(
            pk=record.pk
        ).update(created_at=lagged)
    return trace


@pytest.fixture
def prices(db: Any) -> None:
    from tests.factories import ModelPriceFactory

    ModelPriceFactory(model="gpt-4o-mini", input_per_million="0.15", output_per_million="0.60")
    ModelPriceFactory(model="gpt-4o", input_per_million="2.50", output_per_million="10.00")
