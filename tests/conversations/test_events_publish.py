"""A change publishes one wake-up per conversation and transaction (apps/conversations/events.py):
the streams read everything that changed on one wake-up, so a turn's end (its reply appended
and its typing line stopped, one transaction) wakes each web process once, not twice."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

from apps.conversations import events

pytestmark = pytest.mark.django_db


@pytest.fixture
def published(settings: Any, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int | None]]:
    settings.REDIS_URL = "redis://127.0.0.1:9/0"  # push on; nothing is sent (publish is caught)
    sent: list[tuple[int, int | None]] = []
    monkeypatch.setattr(
        events, "publish", lambda cid, client_id=None: sent.append((cid, client_id))
    )
    return sent


def test_one_publish_per_conversation_and_transaction(
    published: list[tuple[int, int | None]], django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        events.conversation_changed(7, 3)  # the reply appended
        events.conversation_changed(7, 3)  # the typing line stops
        events.conversation_changed(7)  # without a client: the one above wakes it too
        events.conversation_changed(8, 3)  # another conversation
    assert published == [(7, 3), (8, 3)]


def test_a_change_without_a_client_does_not_hide_the_client_queue_wake_up(
    published: list[tuple[int, int | None]], django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        events.conversation_changed(7)
        events.conversation_changed(7, 3)  # the console's queue streams of client 3 must wake
    assert published == [(7, None), (7, 3)]


def test_a_rolled_back_savepoint_does_not_swallow_a_later_change(
    published: list[tuple[int, int | None]], django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        try:
            with transaction.atomic():
                events.conversation_changed(7, 3)
                raise RuntimeError("rolled back")
        except RuntimeError:
            pass
        events.conversation_changed(7, 3)
    assert published == [(7, 3)]


@pytest.mark.django_db(transaction=True)
def test_each_transaction_publishes_its_own(published: list[tuple[int, int | None]]) -> None:
    for _ in range(2):
        with transaction.atomic():
            events.conversation_changed(7, 3)
            events.conversation_changed(7, 3)
    events.conversation_changed(7, 3)  # autocommit: at once
    assert published == [(7, 3), (7, 3), (7, 3)]
