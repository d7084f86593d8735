"""A worker killed mid-turn (SIGKILL: the OOM killer, a lost node, a deploy) and restarted by its
supervisor: the turn is taken over — by the sweeper on the beat schedule, or by Redis
redelivering the unacknowledged task — within lease + sweep interval + one turn, answered once,
and the customer's message is kept."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from apps.conversations.models import Message
from apps.reasoning.models import ReasoningTrace
from devtools.fake_llm import Delay
from tests.faults import settings as fault_settings
from tests.faults.conftest import (
    BROKER_URL,
    assert_interrupted_turn_finished,
    beat_args,
    needs_broker,
    publishing_to,
    terminate_backends,
    wait_for,
    worker_args,
)
from tests.support.shop import assess

pytestmark = [pytest.mark.faults, needs_broker, pytest.mark.django_db(transaction=True)]

LEASE = fault_settings.REASONING_TURN_LEASE_SECONDS
BOUND = (
    LEASE
    + fault_settings.REASONING_SWEEP_INTERVAL_SECONDS
    + (fault_settings.REASONING_TURN_DEADLINE_SECONDS)
)


def test_turn_of_a_killed_worker_is_taken_over_and_answered_once(
    widget, llm, processes, tmp_path: Path
):
    env = {"CELERY_BROKER_URL": BROKER_URL, "OPENAI_BASE_URL": llm.base_url}
    worker = processes("worker-1", worker_args(), **env)
    processes("beat", beat_args(tmp_path), **env)
    conversation_id, token = widget.conversation()
    # The first model call hangs: the worker is killed during it. The next one answers.
    llm.script("assess", Delay(60, then=assess(response="never")), assess(response="Back!"))

    with publishing_to(BROKER_URL):
        response = widget.say(conversation_id, token, "Where is my parcel?")
    assert response.status_code == 202, response.content  # queued for the worker
    if not wait_for(lambda: llm.calls("assess"), timeout=90):
        worker.dump_stacks()
        pytest.fail(f"the worker never called the model:\n{worker.output()[-6000:]}")
    worker.kill()
    killed_at = time.monotonic()
    restarted = processes("worker-2", worker_args(), **env)  # its supervisor restarts it
    # The bound runs from the kill, or from the restarted worker being ready when its start-up
    # (imports, broker connection) took longer than that on a busy machine (the suite's
    # parallel workers, the real-model server): start-up is the host's, not the product's.
    if not wait_for(lambda: " ready." in restarted.output(), timeout=180):
        pytest.fail(f"the restarted worker never came up:\n{restarted.output()[-3000:]}")
    ready_at = time.monotonic()

    def answered() -> list[Message]:
        return list(
            Message.objects.unscoped("test checks the database directly").filter(
                role="assistant", visibility="visible"
            )
        )

    replies = wait_for(answered, timeout=BOUND + 30, step=0.25)
    took = time.monotonic() - max(killed_at, ready_at - LEASE)

    if not replies:
        pytest.fail(f"no reply after the takeover:\n{_takeover_story(restarted.output())}")
    assert [m.text for m in replies] == ["Back!"]
    assert took < BOUND + 10
    assert (
        Message.objects.unscoped("test checks the database directly").filter(role="user").count()
        == 1
    )
    trace = ReasoningTrace.objects.unscoped("test checks the database directly").get()
    assert trace.status == "done"
    time.sleep(2)  # a late duplicate (redelivery after the sweeper) must not answer again
    assert len(answered()) == 1
    print(f"\nFAULT worker-killed: reply {took:.1f}s after the kill (bound {BOUND}s)")  # noqa: T201
    assert settings.CELERY_TASK_ACKS_LATE and settings.CELERY_TASK_REJECT_ON_WORKER_LOST


def test_database_drop_mid_turn_on_a_worker_is_retried_and_answered(widget, llm, processes):
    env = {"CELERY_BROKER_URL": BROKER_URL, "OPENAI_BASE_URL": llm.base_url}
    worker = processes("worker", worker_args(), **env)
    conversation_id, token = widget.conversation()
    terminated: list[int] = []

    def answer_after_a_database_drop(request: Any) -> dict[str, Any]:
        if not terminated:  # every connection to the test database, the worker's included
            terminated.append(terminate_backends())
        return assess(response="Answered after a retry.")

    llm.script("assess", answer_after_a_database_drop, answer_after_a_database_drop)
    with publishing_to(BROKER_URL):
        response = widget.say(conversation_id, token, "Where is my parcel?")
    assert response.status_code == 202, response.content
    connection.close()  # this test's connection was terminated too
    if not wait_for(lambda: terminated, timeout=90):
        worker.dump_stacks()
        pytest.fail(f"the worker never called the model:\n{worker.output()[-6000:]}")
    dropped_at = time.monotonic()

    replies = wait_for(
        lambda: list(
            Message.objects.unscoped("test checks the database directly").filter(
                role="assistant", visibility="visible"
            )
        ),
        timeout=60,
        step=0.25,
    )
    took = time.monotonic() - dropped_at

    assert replies, worker.output()[-3000:]
    assert [m.text for m in replies] == ["Answered after a retry."]
    assert_interrupted_turn_finished()
    print(f"\nFAULT db-terminated-mid-turn (worker): reply after {took:.1f}s")  # noqa: T201


def _takeover_story(output: str) -> str:
    """What the restarted worker did with the turn (the beat's sweeps left out) and where the
    turn's trace stands: enough to tell a sweep that never re-queued from a re-queued turn
    that failed."""
    lines = [
        line
        for line in output.splitlines()
        if "sweep_turns" not in line
        and ("run_turn" in line or "WARNING" in line or "ERROR" in line)
    ]
    traces = [
        (t.status, list(t.steps.values_list("name", flat=True)))
        for t in ReasoningTrace.objects.unscoped("test checks the database directly").all()
    ]
    return "\n".join([f"traces: {traces}", *lines[-40:]])
