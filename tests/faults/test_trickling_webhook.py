"""A tool webhook that sends its headers and then one byte at a time (tool timeout 1 s): the
call is cut at the tool's timeout (a wall-clock limit, not per read), the execution is recorded
as failed — never left `running` — and the customer gets a hand-off within the deadline."""

from __future__ import annotations

import time

import pytest

from apps.conversations.models import Message
from apps.escalations.models import Escalation
from apps.tools.models import ClientTool, ExecutionStatus, ToolExecution
from tests.faults.trickle import TrickleServer
from tests.support.shop import Chat, assess, critique

pytestmark = [pytest.mark.faults, pytest.mark.django_db]
ORDER = {"order_id": "TH-12345"}
SLACK = 2.0


@pytest.fixture
def chat(shop, conversation, django_capture_on_commit_callbacks) -> Chat:
    return Chat(shop, conversation, django_capture_on_commit_callbacks)


def test_trickling_webhook_is_cut_and_the_turn_hands_off(chat, shop, llm, settings):
    settings.REASONING_TURN_DEADLINE_SECONDS = 8
    with TrickleServer(interval=0.3) as hook:
        ClientTool.objects.filter(client=shop).update(
            webhook_url=f"{hook.origin}/hook", timeout_seconds=1, max_retries=1
        )
        llm.default(
            "assess", assess(tool_call="get_order_status", tool_params=ORDER, confidence=10)
        )
        llm.default("critique", critique("PROCEED"))
        started = time.monotonic()
        replies = chat.say("Where is TH-12345?")
        took = time.monotonic() - started

    assert [r.kind for r in replies] == ["handoff"]
    assert took < settings.REASONING_TURN_DEADLINE_SECONDS + SLACK
    assert Escalation.objects.unscoped("test checks the database directly").get().reason in (
        "tool_failure",
        "deadline",
    )
    execution = ToolExecution.objects.unscoped("test checks the database directly").get()
    assert execution.status == ExecutionStatus.FAILED  # recorded, never left running
    assert execution.failure_kind == "timed_out"
    assert execution.attempts == hook.requests == 2  # the call and its retry, same key
    assert (
        Message.objects.unscoped("test checks the database directly").filter(role="user").count()
        == 1
    )
    print(f"\nFAULT trickling-webhook (timeout 1 s, 1 retry): hand-off after {took:.2f}s")  # noqa: T201
