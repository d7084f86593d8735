"""The sweeper (apps/reasoning/sweeper.py): turns left unfinished past their lease are
re-queued once, then handed to a person; a tool that already ran is never run again; a turn a
worker holds is left alone."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.conversations.models import Message
from apps.escalations.models import Escalation
from apps.reasoning.models import ReasoningTrace
from apps.reasoning.services import handle_turn
from apps.reasoning.sweeper import turns_sweep
from apps.tools.models import ToolExecution
from tests.support.shop import assess

pytestmark = pytest.mark.django_db
ORDER = {"order_id": "TH-12345"}


def _age(model, pk, seconds: float, field: str = "updated_at") -> None:
    model.objects.unscoped("test ages a row").filter(pk=pk).update(
        **{field: timezone.now() - timedelta(seconds=seconds)}
    )


@pytest.fixture
def lease(settings) -> int:
    settings.REASONING_TURN_LEASE_SECONDS = 60
    return 60


def _lost_message(chat, monkeypatch, text: str) -> Message:
    """A stored message whose task never ran (a lost task, a broker that dropped it)."""
    monkeypatch.setattr("apps.reasoning.services._enqueue", lambda message_id, client_id: None)
    message = handle_turn(client=chat.client, conversation=chat.conversation, text=text)
    monkeypatch.undo()
    return message


def test_a_lost_turn_is_requeued_and_answered(chat, llm, lease, monkeypatch):
    message = _lost_message(chat, monkeypatch, "Where is my parcel?")
    assert turns_sweep().requeued == 0  # within its lease: a worker may still pick it up
    _age(Message, message.pk, lease + 1, "created_at")
    llm.script("assess", assess(response="On its way."))

    result = turns_sweep()  # eager here: the re-queued turn runs at once

    assert result.requeued == 1
    assert [m.text for m in chat.all(role="assistant", visibility="visible")] == ["On its way."]
    trace = ReasoningTrace.objects.get(user_message=message)
    assert trace.status == "done"
    assert {"lost", "requeued"} <= set(trace.steps.values_list("name", flat=True))
    assert turns_sweep().requeued == 0  # idempotent


def test_a_stuck_turn_is_requeued_without_running_its_tool_twice(chat, llm, webhook, lease):
    llm.script("assess", assess(tool_call="get_order_status", tool_params=ORDER))
    llm.script("critique", {"decision": "PROCEED", "reasoning": "ok", "message": ""})
    llm.default("compose", {"response": "It shipped."})
    chat.say("Where is TH-12345?")
    assert webhook.executed_count == 1
    # Pretend the worker died after the tool ran, before the turn was closed.
    trace = ReasoningTrace.objects.unscoped("test checks the database directly").get()
    ReasoningTrace.objects.unscoped("test checks the database directly").filter(pk=trace.pk).update(
        status="processing"
    )
    Message.objects.filter(trace=trace, role="assistant", visibility="visible").delete()
    _age(ReasoningTrace, trace.pk, lease + 1)
    llm.script("assess", assess(tool_call="get_order_status", tool_params=ORDER))
    llm.script("critique", {"decision": "PROCEED", "reasoning": "ok", "message": ""})

    assert turns_sweep().requeued == 1

    trace.refresh_from_db()
    assert trace.status == "done"
    assert webhook.executed_count == 1  # the idempotency key returned the stored result
    assert ToolExecution.objects.unscoped("test checks the database directly").count() == 1
    assert [m.text for m in chat.all(role="assistant", visibility="visible")] == ["It shipped."]


def test_a_turn_stuck_again_after_requeue_is_handed_off(chat, llm, lease, monkeypatch):
    message = _lost_message(chat, monkeypatch, "Where is my parcel?")
    _age(Message, message.pk, lease + 1, "created_at")
    # the re-queued task is lost too
    monkeypatch.setattr(
        "apps.reasoning.tasks.process_turn.delay", lambda message_id, client_id=None: None
    )
    assert turns_sweep().requeued == 1
    trace = ReasoningTrace.objects.get(user_message=message)
    assert trace.status == "processing"
    _age(ReasoningTrace, trace.pk, lease + 1)
    # The re-queued task may still wait behind others: not given up within a lease of it.
    assert (turns_sweep().requeued, turns_sweep().given_up) == (0, 0)
    trace.refresh_from_db()
    assert trace.status == "processing" and not chat.all(kind="handoff")
    requeued = trace.steps.get(name="requeued")
    _age(type(requeued), requeued.pk, lease + 1, "created_at")

    result = turns_sweep()

    assert result.given_up == 1
    [handoff] = chat.all(kind="handoff")
    assert handoff.visibility == "visible"
    escalation = Escalation.objects.unscoped("test checks the database directly").get()
    assert escalation.reason == "system_failure"
    trace.refresh_from_db()
    assert trace.status == "failed" and trace.escalated and trace.error
    assert turns_sweep().given_up == 0  # idempotent
    assert llm.requests == []


def test_a_turn_a_worker_holds_is_left_alone(chat, llm, lease, monkeypatch):
    message = _lost_message(chat, monkeypatch, "hello")
    trace = ReasoningTrace.objects.create(
        client=chat.client, conversation=chat.conversation, user_message=message, mode="adaptive"
    )
    _age(Message, message.pk, lease + 1, "created_at")  # old message, but its turn is live

    assert (turns_sweep().requeued, turns_sweep().given_up) == (0, 0)
    trace.refresh_from_db()
    assert trace.status == "processing"
    assert not trace.steps.exists()
