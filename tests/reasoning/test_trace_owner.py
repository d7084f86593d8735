"""A trace belongs to exactly one owner: a conversation turn (its conversation and customer
message) or a playground run — the database refuses any other combination."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import IntegrityError, transaction

from apps.billing.models import UsageRecord
from apps.conversations.models import Role
from apps.conversations.services import conversation_create, message_append
from apps.playground.models import PlaygroundRun
from apps.playground.services import playground_run_create
from apps.reasoning.models import ReasoningTrace, TraceKind
from tests.support.shop import assess

pytestmark = pytest.mark.django_db


@pytest.fixture
def owners(client_a: Any) -> dict[str, Any]:
    conversation, _ = conversation_create(client=client_a)
    message = message_append(
        client=client_a, conversation=conversation, role=Role.USER, text="Hello?"
    )
    run = PlaygroundRun.objects.create(client=client_a, mode="standard", question="Hi")
    return {"conversation": conversation, "user_message": message, "playground_run": run}


def refused(client: Any, **fields: Any) -> bool:
    try:
        with transaction.atomic():
            ReasoningTrace.objects.create(client=client, mode="standard", **fields)
    except IntegrityError:
        return True
    return False


def test_a_turn_trace_has_its_conversation_and_message_and_no_run(client_a, owners):
    turn = {k: owners[k] for k in ("conversation", "user_message")}
    assert not refused(client_a, kind=TraceKind.TURN, **turn)
    assert refused(client_a, kind=TraceKind.TURN, conversation=owners["conversation"])
    assert refused(client_a, kind=TraceKind.TURN)
    assert refused(client_a, kind=TraceKind.TURN, playground_run=owners["playground_run"], **turn)


def test_a_playground_trace_has_its_run_and_nothing_of_a_conversation(client_a, owners):
    run = owners["playground_run"]
    assert refused(client_a, kind=TraceKind.PLAYGROUND)
    assert refused(
        client_a,
        kind=TraceKind.PLAYGROUND,
        playground_run=run,
        conversation=owners["conversation"],
    )
    assert refused(
        client_a,
        kind=TraceKind.PLAYGROUND,
        playground_run=run,
        user_message=owners["user_message"],
    )
    assert not refused(client_a, kind=TraceKind.PLAYGROUND, playground_run=run)
    assert run.trace.kind == TraceKind.PLAYGROUND


def test_an_unknown_kind_is_refused(client_a, owners):
    assert refused(client_a, kind="simulation", playground_run=owners["playground_run"])


def test_a_new_run_comes_with_its_trace(client_a):
    run = playground_run_create(
        client=client_a, question="Where is my order?", mode="standard", enqueue=False
    )
    trace = ReasoningTrace.objects.for_client(client_a).get(playground_run=run)
    assert (trace.kind, trace.mode, trace.conversation_id, trace.user_message_id) == (
        TraceKind.PLAYGROUND,
        "standard",
        None,
        None,
    )
    assert trace.steps.count() == 0 and trace.llm_calls == 0


def test_a_turns_trace_holds_what_its_calls_cost(chat, llm):
    """The figures live on the trace for every owner: a turn's trace adds up its calls' cost
    and billed amount as they are recorded, like a playground run's."""
    llm.script("assess", assess(response="We open at 9.", confidence=9))
    chat.say("When do you open?")
    trace = ReasoningTrace.objects.for_client(chat.client).get(kind=TraceKind.TURN)
    usage = UsageRecord.objects.for_client(chat.client).filter(trace=trace)
    assert usage.count() == trace.llm_calls >= 1
    assert trace.cost_usd == sum(u.cost_usd for u in usage) > 0
    assert trace.billed_usd == sum(u.billed_usd for u in usage)
