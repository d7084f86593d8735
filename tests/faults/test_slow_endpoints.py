"""Slow and trickling endpoints: a model that answers after LLM_TIMEOUT, an LLM endpoint that
sends its headers and then one byte at a time. The turn's deadline bounds everything: the
customer gets the fallback reply and a hand-off within it, staff see why (reason `deadline` or
`llm_failure`, each attempt on the trace). These need no PostgreSQL or broker: they run in
every `make test`."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from apps.conversations.models import Message
from apps.escalations.models import Escalation
from apps.reasoning.models import ReasoningTrace
from devtools.fake_llm import Delay
from tests.faults.trickle import TrickleServer
from tests.support.shop import Chat

pytestmark = [pytest.mark.faults, pytest.mark.django_db]
SLACK = 2.0  # bookkeeping after the deadline, on a busy 2-core machine


@pytest.fixture
def chat(shop, conversation, django_capture_on_commit_callbacks) -> Chat:
    return Chat(shop, conversation, django_capture_on_commit_callbacks)


@pytest.fixture
def trickling_llm(settings: Any) -> Iterator[TrickleServer]:
    with TrickleServer(interval=0.2) as server:
        settings.OPENAI_API_KEY = "test-key"
        settings.OPENAI_BASE_URL = server.base_url
        yield server


def _timed(chat: Chat, text: str) -> tuple[list[Message], float]:
    started = time.monotonic()
    replies = chat.say(text)
    return replies, time.monotonic() - started


def test_trickling_llm_endpoint_is_cut_at_llm_timeout(chat, trickling_llm, settings):
    settings.LLM_TIMEOUT = 1.0
    settings.REASONING_TURN_DEADLINE_SECONDS = 10
    replies, took = _timed(chat, "Where is my parcel?")

    assert [r.kind for r in replies] == ["handoff"]
    # two attempts (the step and its one retry), each cut at LLM_TIMEOUT
    assert trickling_llm.requests == 2
    assert took < 2 * settings.LLM_TIMEOUT + SLACK
    escalation = Escalation.objects.unscoped("test checks the database directly").get()
    assert escalation.reason == "llm_failure" and "timeout" in escalation.detail
    assert (
        Message.objects.unscoped("test checks the database directly").filter(role="user").count()
        == 1
    )
    print(f"\nFAULT trickling-llm (LLM_TIMEOUT=1): hand-off after {took:.2f}s")  # noqa: T201


def test_trickling_llm_endpoint_is_cut_at_the_turn_deadline(chat, trickling_llm, settings):
    settings.LLM_TIMEOUT = 30.0
    settings.REASONING_TURN_DEADLINE_SECONDS = 2
    replies, took = _timed(chat, "Where is my parcel?")

    assert [r.kind for r in replies] == ["handoff"]
    assert took < settings.REASONING_TURN_DEADLINE_SECONDS + SLACK
    assert (
        Escalation.objects.unscoped("test checks the database directly").get().reason == "deadline"
    )
    trace = ReasoningTrace.objects.unscoped("test checks the database directly").get()
    assert "deadline" in list(trace.steps.values_list("name", flat=True))
    print(f"\nFAULT trickling-llm (deadline 2 s): hand-off after {took:.2f}s")  # noqa: T201


def test_slow_model_is_bounded_by_the_deadline_not_multiplied_by_retries(chat, llm, settings):
    # The case scaled down: a model answering after 3.1 s with LLM_TIMEOUT=3 took
    # 6 × the timeout per step (SDK retries × ours); now one step is at most 2 attempts and
    # the turn ends by its deadline.
    settings.LLM_TIMEOUT = 3.0
    settings.REASONING_TURN_DEADLINE_SECONDS = 4
    llm.default("assess", Delay(3.1, then={"response": "too late"}))
    replies, took = _timed(chat, "Where is my parcel?")

    assert [r.kind for r in replies] == ["handoff"]
    assert took < settings.REASONING_TURN_DEADLINE_SECONDS + SLACK
    assert len(llm.calls("assess")) == 2  # the first cut at 3 s, the retry at the deadline
    assert (
        Escalation.objects.unscoped("test checks the database directly").get().reason == "deadline"
    )
    print(f"\nFAULT slow-model (3.1 s, LLM_TIMEOUT=3, deadline 4): hand-off after {took:.2f}s")  # noqa: T201
