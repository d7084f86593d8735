"""The broker down (Redis restarted, unreachable): a customer's message is still stored and
answered — the turn runs in the web process when it cannot be queued. Uses a redis-server of
its own on a free port, started and stopped here (never the machine's Redis)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
import redis

from apps.conversations.models import Message
from apps.platform.local_server import free_port
from tests.faults.conftest import (
    Process,
    needs_postgres,
    publishing_to,
    wait_for,
)
from tests.support.shop import assess

REDIS_SERVER = shutil.which("redis-server")
pytestmark = [
    pytest.mark.faults,
    needs_postgres,
    pytest.mark.skipif(REDIS_SERVER is None, reason="fault suite: needs redis-server"),
    pytest.mark.django_db(transaction=True),
]


@pytest.fixture
def own_broker(tmp_path: Path, processes) -> tuple[str, Process]:
    port = free_port()
    assert REDIS_SERVER is not None
    server = processes(
        "redis",
        [
            REDIS_SERVER,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
        ],
    )
    url = f"redis://127.0.0.1:{port}/0"

    def up() -> bool:
        try:
            return bool(redis.Redis.from_url(url, socket_timeout=1).ping())
        except redis.RedisError:
            return False

    assert wait_for(up, timeout=20), server.output()
    return url, server


def test_broker_going_down_still_answers_the_customer(widget, llm, own_broker):
    url, broker = own_broker
    conversation_id, token = widget.conversation()
    llm.script("assess", assess(response="Queued for later."), assess(response="Still here."))
    with publishing_to(url):
        queued = widget.say(conversation_id, token, "first")
        assert queued.status_code == 202  # queued on the broker (no worker here)
        broker.kill()  # the broker goes away, its connections with it
        started = time.monotonic()
        response = widget.say(conversation_id, token, "Where is my parcel?")
        took = time.monotonic() - started

    assert response.status_code == 201, response.content
    assert response["Content-Type"].startswith("application/json")
    # the turn queued on the lost broker is answered first, then this one, in order
    replies = [r["text"] for r in response.json()["replies"]]
    assert replies == ["Queued for later.", "Still here."]
    assert (
        Message.objects.unscoped("test checks the database directly").filter(role="user").count()
        == 2
    )
    assert took < 15
    print(f"\nFAULT broker-down: reply after {took:.2f}s")  # noqa: T201
