"""`conversation.resolved`: each conversation is judged once it has ended, by the outcomes
page's rule, and the event is sent for those the assistant resolved — once, whatever runs
twice (docs/events.md)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from apps.conversations.models import ConversationStatus, Role
from apps.core import outbound
from apps.outcomes.models import ConversationResolution
from apps.outcomes.services import resolutions_record, resolutions_record_all
from tests.outcomes.conftest import DAY, at, make_conversation

pytestmark = pytest.mark.django_db

WINDOW = timedelta(hours=24)  # the plan's default resolution window


@pytest.fixture
def sent() -> Iterator[list[outbound.OutboundEvent]]:
    """The `conversation.resolved` events handed over on commit."""
    events: list[outbound.OutboundEvent] = []

    def receive(event: outbound.OutboundEvent) -> None:
        if event.type == "conversation.resolved":
            events.append(event)

    outbound.connect(receive)
    yield events
    outbound.disconnect(receive)


def judge(client: Any, when: Any, capture: Any) -> int:
    with capture(execute=True):
        return resolutions_record(client=client, now=when)


def test_an_answered_conversation_is_resolved_once_it_has_ended(
    client_a, sent, django_capture_on_commit_callbacks
):
    conversation = make_conversation(client_a)  # the customer at 0 s, the answer at 30 s
    assert (
        judge(
            client_a,
            at(seconds=30) + WINDOW - timedelta(minutes=1),
            django_capture_on_commit_callbacks,
        )
        == 0
    )
    assert sent == []  # not ended yet: the customer may still write

    assert (
        judge(
            client_a,
            at(seconds=30) + WINDOW + timedelta(minutes=15),
            django_capture_on_commit_callbacks,
        )
        == 1
    )
    [event] = sent
    assert event.conversation == str(conversation.public_id)
    assert event.data == {
        "conversation": str(conversation.public_id),
        "by": "assistant",
        "resolved_at": at(seconds=30).isoformat(),
        "score": None,
    }
    # The next run, or one at the same time, finds nothing new to judge.
    assert judge(client_a, at(days=2), django_capture_on_commit_callbacks) == 0
    assert len(sent) == 1
    record = ConversationResolution.objects.for_client(client_a).get(conversation=conversation)
    assert record.resolved and record.resolved_at == at(seconds=30)


def test_a_hand_off_a_low_rating_or_a_return_is_judged_not_resolved(
    client_a, sent, django_capture_on_commit_callbacks
):
    handed_off = make_conversation(client_a, handoff="customer_request")
    unhappy = make_conversation(client_a, score=1)
    came_back = make_conversation(client_a, visitor_id="v-1")
    second = make_conversation(client_a, visitor_id="v-1", started=at(hours=2))  # within the window
    unanswered = make_conversation(client_a, lines=[(Role.USER, 0)])
    assert judge(client_a, at(hours=3) + WINDOW, django_capture_on_commit_callbacks) == 5
    judged = dict(
        ConversationResolution.objects.for_client(client_a).values_list(
            "conversation_id", "resolved"
        )
    )
    assert judged == {
        handed_off.pk: False,
        unhappy.pk: False,
        came_back.pk: False,
        unanswered.pk: False,
        second.pk: True,  # the customer's second conversation: they did not come back again
    }
    assert [event.conversation for event in sent] == [str(second.public_id)]


def test_a_good_rating_or_a_closed_conversation_is_judged_at_once(
    client_a, sent, django_capture_on_commit_callbacks
):
    rated = make_conversation(client_a, score=5)
    closed = make_conversation(client_a, status=ConversationStatus.CLOSED)
    assert judge(client_a, at(minutes=5), django_capture_on_commit_callbacks) == 2
    by_conversation = {event.conversation: event.data for event in sent}
    assert by_conversation[str(rated.public_id)]["score"] == 5
    assert str(closed.public_id) in by_conversation


def test_a_conversation_older_than_the_look_back_is_left_alone(
    client_a, sent, django_capture_on_commit_callbacks
):
    make_conversation(client_a)
    assert (
        judge(client_a, DAY + WINDOW + timedelta(days=4), django_capture_on_commit_callbacks) == 0
    )
    assert sent == []


def test_each_client_is_judged_on_its_own_conversations(
    client_a, client_b, sent, django_capture_on_commit_callbacks
):
    mine = make_conversation(client_a)
    theirs = make_conversation(client_b)
    when = at(hours=1) + WINDOW
    assert judge(client_a, when, django_capture_on_commit_callbacks) == 1
    assert {e.client_id for e in sent} == {client_a.pk}
    assert not ConversationResolution.objects.for_client(client_b).exists()
    with django_capture_on_commit_callbacks(execute=True):
        assert resolutions_record_all(now=when) == 1  # only client B's is left
    assert {(e.client_id, e.conversation) for e in sent} == {
        (client_a.pk, str(mine.public_id)),
        (client_b.pk, str(theirs.public_id)),
    }
