"""The task base (apps/core/tasks.TenantTask): a task takes `client_id` and runs in that
client's scope; a message queued before tasks carried it still runs, in its row's client."""

from __future__ import annotations

import pytest
from celery import shared_task
from django.core import mail

from apps.conversations import tasks as conversation_tasks
from apps.conversations.models import Conversation
from apps.core.tasks import TenantTask
from apps.core.tenancy import TenantScopeError, current_tenant
from apps.insights import tasks as insight_tasks
from apps.playground import tasks as playground_tasks
from apps.reasoning import tasks as reasoning_tasks
from tests.api.conftest import make_conversation_with_turn

pytestmark = pytest.mark.django_db


@shared_task(
    name="tests.tenancy.visible_conversations",
    base=TenantTask,
    tenant_from=("conversations.Conversation", "conversation_id"),
)
def visible_conversations(conversation_id: int | None = None) -> dict[str, object]:
    """What a task sees: its scope and every conversation an unscoped read returns."""
    return {
        "tenant": current_tenant(),
        "conversations": sorted(Conversation.objects.values_list("pk", flat=True)),
    }


def test_a_task_run_for_client_a_cannot_read_client_b(client_a, client_b):
    mine = make_conversation_with_turn(client_a)[0]
    make_conversation_with_turn(client_b)
    seen = visible_conversations.apply(kwargs={"client_id": client_a.pk}).get()
    assert seen == {"tenant": client_a.pk, "conversations": [mine.pk]}
    assert current_tenant() is None  # the scope ends with the task


def test_a_legacy_message_without_client_id_runs_in_its_rows_client(client_a, client_b):
    make_conversation_with_turn(client_a)
    theirs = make_conversation_with_turn(client_b)[0]
    seen = visible_conversations.apply(args=(theirs.pk,)).get()
    assert seen == {"tenant": client_b.pk, "conversations": [theirs.pk]}
    # Its row is gone: nothing to do, and nothing read unscoped.
    assert visible_conversations.apply(args=(10**9,)).get() is None


def test_a_task_naming_no_row_runs_without_a_tenant_and_fails_closed(client_a):
    make_conversation_with_turn(client_a)
    with pytest.raises(TenantScopeError, match="Conversation"):
        visible_conversations.apply(throw=True).get()


@pytest.mark.parametrize(
    ("task", "name"),
    [
        (reasoning_tasks.process_turn, "reasoning.process_turn"),
        (reasoning_tasks.write_turn_notes, "reasoning.turn_notes"),
        (conversation_tasks.email_unseen_replies, "conversations.email_unseen_replies"),
        (conversation_tasks.send_contact_confirmation, "conversations.send_contact_confirmation"),
        (playground_tasks.execute_run, "playground.execute_run"),
        (insight_tasks.generate_for_client, "insights.generate_for_client"),
    ],
)
def test_every_per_client_task_uses_the_task_base(task, name):
    assert task.name == name  # the names stay
    assert isinstance(task, TenantTask)


def test_a_real_task_for_client_a_does_not_touch_client_b(client_a, client_b):
    """The confirmation e-mail task given B's conversation but A's client id sends nothing."""
    theirs = make_conversation_with_turn(client_b)[0]
    Conversation.objects.for_client(client_b).filter(pk=theirs.pk).update(
        contact_email="visitor@example.com"
    )
    send = conversation_tasks.send_contact_confirmation
    args = (theirs.pk, "visitor@example.com", "https://guidedesk.example")
    assert send.apply(args=args, kwargs={"client_id": client_a.pk}).get() is False
    assert mail.outbox == []
    assert send.apply(args=args, kwargs={"client_id": client_b.pk}).get() is True
    assert len(mail.outbox) == 1
