"""A worker killed mid-turn (SIGKILL: the OOM killer, a lost node, a deploy) and restarted by its
supervisor: the turn is taken over — by the sweeper on the beat schedule, or by Redis
redelivering the unacknowledged task — within lease + sweep interval + one turn, answered once,
and the customer's message is kept."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from django.conf import settings

from apps.conversations.models import Message
from apps.reasoning.models import ReasoningTrace
from tests.faults import settings as fault_settings
from tests.faults.conftest import (
    BROKER_URL,
    assess,
    beat_args,
    needs_broker,
    publishing_to,
    wait_for,
    worker_args,
)
from tests.support.fake_llm import Delay

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
    assert wait_for(lambda: llm.calls("assess"), timeout=60), worker.output()[-3000:]
    worker.kill()
    killed_at = time.monotonic()
    processes("worker-2", worker_args(), **env)  # its supervisor restarts it

    def answered() -> list[Message]:
        return list(Message.objects.filter(role="assistant", visibility="visible"))

    replies = wait_for(answered, timeout=BOUND + 30, step=0.25)
    took = time.monotonic() - killed_at

    assert replies, worker.output()[-3000:]
    assert [m.text for m in replies] == ["Back!"]
    assert took < BOUND + 10  # + the restarted worker's start-up on a busy CI machine
    assert Message.objects.filter(role="user").count() == 1
    trace = ReasoningTrace.objects.get()
    assert trace.status == "done"
    time.sleep(2)  # a late duplicate (redelivery after the sweeper) must not answer again
    assert len(answered()) == 1
    print(f"\nFAULT worker-killed: reply {took:.1f}s after the kill (bound {BOUND}s)")  # noqa: T201
    assert settings.CELERY_TASK_ACKS_LATE and settings.CELERY_TASK_REJECT_ON_WORKER_LOST
