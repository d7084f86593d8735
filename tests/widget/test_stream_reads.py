"""The event streams' hot reads, written in plain SQL (docs/benchmarks.md): they must return
exactly what the ORM and DRF versions did — same JSON per message, same state, same tenancy."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from apps.conversations.models import Conversation, Kind, Role, Visibility
from apps.conversations.serializers import WidgetMessageSerializer
from apps.conversations.services import conversation_create, message_append
from apps.reasoning.models import ReasoningTrace, TraceStatus
from apps.reasoning.selectors import conversation_live_state
from apps.widget.selectors import (
    widget_message_events_after,
    widget_message_jsons,
    widget_messages_after,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def conversation(client_a) -> Conversation:
    return conversation_create(client=client_a)[0]


def _append(conversation: Conversation, **kw) -> None:
    message_append(client=conversation.client, conversation=conversation, **kw)


def test_a_streams_messages_are_exactly_the_serializers_json(conversation):
    _append(conversation, role=Role.USER, text="Où est ma commande ? 📦")
    _append(
        conversation,
        role=Role.ASSISTANT,
        text="Refund or exchange?",
        kind=Kind.CLARIFICATION,
        data={"options": ["Refund", "Exchange"], "model": "gpt-x", "mode": "deliberative"},
    )
    _append(conversation, role=Role.ASSISTANT, text="secret", visibility=Visibility.INTERNAL)
    _append(conversation, role=Role.SYSTEM, text="", data={"offline": True, "tokens": 12})
    client = conversation.client
    models = widget_messages_after(
        client=client, conversation_id=conversation.pk, after=0, limit=200
    )
    expected = [dict(m) for m in WidgetMessageSerializer(models, many=True).data]
    assert [m["text"] for m in expected] == ["Où est ma commande ? 📦", "Refund or exchange?", ""]
    assert widget_message_jsons(models) == expected
    from_sql = widget_message_events_after(
        client=client, conversation_id=conversation.pk, after=0, limit=200
    )
    assert from_sql == expected
    assert from_sql[1]["data"] == {"options": ["Refund", "Exchange"], "mode": "deliberative"}
    assert from_sql[2]["data"] == {"offline": True}
    # after / limit, as the stream pages through a long history
    assert widget_message_events_after(
        client=client, conversation_id=conversation.pk, after=expected[0]["seq"], limit=1
    ) == [expected[1]]


def test_a_streams_reads_stay_within_the_client(conversation, client_b):
    _append(conversation, role=Role.USER, text="mine")
    ReasoningTrace.objects.create(
        client=conversation.client,
        conversation=conversation,
        user_message=conversation.messages.get(),
        mode="adaptive",
    )
    assert conversation_live_state(client=conversation.client, conversation_id=conversation.pk)
    assert conversation_live_state(client=client_b, conversation_id=conversation.pk) is None
    assert (
        widget_message_events_after(
            client=client_b, conversation_id=conversation.pk, after=0, limit=200
        )
        == []
    )


def test_the_live_state_sees_only_a_running_turn_within_its_lease(conversation):
    client = conversation.client
    state = conversation_live_state(client=client, conversation_id=conversation.pk)
    assert state == ("open", 0, False, {})
    _append(conversation, role=Role.USER, text="Hi")
    user = conversation.messages.get()
    trace = ReasoningTrace.objects.create(
        client=client,
        conversation=conversation,
        user_message=user,
        mode="deliberative",
        progress={"step": 2, "max_steps": 10},
    )
    assert conversation_live_state(client=client, conversation_id=conversation.pk) == (
        "open",
        1,
        True,
        {"step": 2, "max_steps": 10},
    )
    # A worker that died: its turn stops counting once the lease (task time limit) has run out.
    stale = timezone.now() - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 5)
    ReasoningTrace.objects.unscoped("test checks the database directly").filter(pk=trace.pk).update(
        updated_at=stale
    )
    assert conversation_live_state(client=client, conversation_id=conversation.pk) == (
        "open",
        1,
        False,
        {},
    )
    ReasoningTrace.objects.unscoped("test checks the database directly").filter(pk=trace.pk).update(
        updated_at=timezone.now(), status=TraceStatus.DONE
    )
    state = conversation_live_state(client=client, conversation_id=conversation.pk)
    assert state is not None and state[2] is False
    assert conversation_live_state(client=client, conversation_id=10**9) is None
