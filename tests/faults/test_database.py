"""Database faults: connections terminated mid-turn and while idle (pg_terminate_backend on this
test database's backends only). What the customer notices: a JSON answer (never an HTML 500),
their message kept, a reply or a hand-off within the turn's deadline, the next message not
blocked by a stale lock."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.db import connection

from apps.conversations.models import Conversation, Message
from apps.escalations.models import Escalation
from apps.reasoning.models import ReasoningTrace
from tests.faults.conftest import (
    assert_interrupted_turn_finished,
    needs_postgres,
    terminate_backends,
)
from tests.support.shop import assess

pytestmark = [pytest.mark.faults, needs_postgres, pytest.mark.django_db(transaction=True)]
DEADLINE = 10


@pytest.fixture(autouse=True)
def _short_deadline(settings: Any) -> None:
    settings.REASONING_TURN_DEADLINE_SECONDS = DEADLINE
    settings.LLM_TIMEOUT = 3


def _is_json(response: Any) -> bool:
    return response["Content-Type"].startswith("application/json")


def test_connection_terminated_mid_turn_is_retried_and_answered(widget, llm):
    conversation_id, token = widget.conversation()
    terminated: list[int] = []

    def answer_after_a_database_drop(request: Any) -> dict[str, Any]:
        if not terminated:  # the database drops while the model is thinking
            terminated.append(terminate_backends())
        return assess(response="Your parcel ships today.")

    llm.script("assess", answer_after_a_database_drop, answer_after_a_database_drop)
    started = time.monotonic()
    response = widget.say(conversation_id, token, "Where is my parcel?")
    elapsed = time.monotonic() - started

    assert terminated and terminated[0] >= 1  # the turn's own connection was among them
    assert response.status_code == 201, response.content
    assert _is_json(response)
    assert [r["text"] for r in response.json()["replies"]] == ["Your parcel ships today."]
    assert elapsed < DEADLINE
    assert (
        Message.objects.unscoped("test checks the database directly")
        .filter(role="assistant", visibility="visible")
        .count()
        == 1
    )
    assert_interrupted_turn_finished()
    print(f"\nFAULT db-terminated-mid-turn: reply after {elapsed:.2f}s")  # noqa: T201


def test_database_dropping_on_every_attempt_ends_in_a_handoff(widget, llm):
    conversation_id, token = widget.conversation()

    def drop_every_time(request: Any) -> dict[str, Any]:
        terminate_backends()
        return assess(response="never seen")

    llm.default("assess", drop_every_time)
    started = time.monotonic()
    response = widget.say(conversation_id, token, "Where is my parcel?")
    elapsed = time.monotonic() - started

    assert response.status_code == 201, response.content
    assert _is_json(response)
    assert [r["kind"] for r in response.json()["replies"]] == ["handoff"]
    assert elapsed < DEADLINE
    assert (
        Message.objects.unscoped("test checks the database directly").filter(role="user").count()
        == 1
    )
    escalation = Escalation.objects.unscoped("test checks the database directly").get()
    assert escalation.reason == "system_failure"
    trace = ReasoningTrace.objects.unscoped("test checks the database directly").get()
    assert trace.status == "failed" and trace.escalated and "database" in trace.error
    assert (
        Conversation.objects.unscoped("test checks the database directly").get().turn_lock_until
        is None
    )
    # the next message is not blocked by a stale lock: a person owns the conversation now
    again = widget.say(conversation_id, token, "hello?")
    assert again.status_code == 201 and _is_json(again)
    print(f"\nFAULT db-down-every-attempt: hand-off after {elapsed:.2f}s")  # noqa: T201


def test_message_that_cannot_be_stored_answers_json_503_and_the_resend_is_kept(widget, llm):
    conversation_id, token = widget.conversation()
    connection.ensure_connection()
    assert terminate_backends() >= 1  # the idle connection the next request would use

    refused = widget.say(conversation_id, token, "Where is my parcel?")

    assert refused.status_code == 503
    assert _is_json(refused)
    assert refused.json()["error"]["code"] == "unavailable"
    assert int(refused["Retry-After"]) > 0
    assert (
        Message.objects.unscoped("test checks the database directly").filter(role="user").count()
        == 0
    )  # nothing half-stored
    llm.script("assess", assess(response="Found it."))
    resent = widget.say(conversation_id, token, "Where is my parcel?")
    assert resent.status_code == 201, resent.content
    assert [r["text"] for r in resent.json()["replies"]] == ["Found it."]
    assert (
        Message.objects.unscoped("test checks the database directly").filter(role="user").count()
        == 1
    )
