"""The playground's event stream served the ASGI way (Django's async test client builds the same
ASGIRequest uvicorn does): polling without Redis, and — with Redis — a step the recorder stores
in another thread pushed to the open stream (channel `guidedesk:playground:<run id>`)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.db import connection
from django.test import AsyncClient

from apps.conversations import events
from apps.conversations.models import Conversation
from apps.playground import streams
from apps.playground.models import RunStatus
from apps.playground.services import CHANNEL_PREFIX, PlaygroundOwner
from apps.reasoning.traces import TurnRecorder
from tests.playground.fixtures import make_run
from tests.support.broker import NEEDS_REDIS, REDIS_URL
from tests.widget.test_push import next_events, parse

pytestmark = pytest.mark.django_db(transaction=True)  # the stream reads in other threads


def events_url(run: Any) -> str:
    return f"/console/playground/runs/{run.public_id}/events?client={run.client.slug}"


async def open_stream(django_client: Any, run: Any) -> Any:
    cookie = django_client.cookies
    client = AsyncClient()
    client.cookies = cookie
    response = await client.get(events_url(run), headers={"Accept": "text/event-stream"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/event-stream")
    return response


def test_asgi_stream_without_redis_sends_the_steps_then_ends(agent, client_a, monkeypatch):
    monkeypatch.setattr(streams, "POLL_SECONDS", 0)
    run = make_run(client_a)

    async def scenario() -> list[dict[str, str]]:
        assert events.hub(prefix=CHANNEL_PREFIX) is None  # no Redis: the stream polls
        response = await open_stream(agent, run)
        chunks = [
            c if isinstance(c, bytes) else c.encode() async for c in response.streaming_content
        ]
        return parse(b"".join(chunks).decode())

    got = async_to_sync(scenario)()
    assert got[0] == {"retry": str(streams.RETRY_MS)}
    assert [int(e["id"]) for e in got if e.get("event") == "step"] == list(
        range(run.trace.steps.count())
    )
    assert got[-1] == {"event": "end", "data": '{"status":"done"}'}


@NEEDS_REDIS
def test_a_recorded_step_is_pushed_to_the_open_stream(agent, client_a, settings, monkeypatch):
    settings.REDIS_URL = REDIS_URL
    monkeypatch.setattr(streams, "POLL_SECONDS", 3600)  # anything after the first read is pushed
    run = make_run(client_a, status=RunStatus.RUNNING)
    last = run.trace.steps.count() - 1

    def record() -> None:
        try:
            recorder = TurnRecorder(
                trace=run.trace,
                client=run.client,
                conversation=Conversation(client=run.client),
                owner=PlaygroundOwner(run),
            )
            recorder.step("feedback", output={"step": 5, "feedback": "Pushed."})
        finally:
            connection.close()

    async def scenario() -> list[dict[str, str]]:
        response = await open_stream(agent, run)
        stream = aiter(response.streaming_content)
        await next_events(stream)  # retry
        await next_events(stream)  # the stored steps and the run
        hub = events.hub(prefix=CHANNEL_PREFIX)
        assert hub is not None
        await asyncio.wait_for(hub.connected.wait(), 10)
        await sync_to_async(record, thread_sensitive=False)()
        pushed = await next_events(stream, seconds=3)  # well before the 5 s safety poll
        await response.streaming_content.aclose()
        await events.close_hub()
        return pushed

    pushed = async_to_sync(scenario)()
    steps = [e for e in pushed if e.get("event") == "step"]
    assert [int(e["id"]) for e in steps] == [last + 1]
    assert json.loads(steps[0]["data"])["output"]["feedback"] == "Pushed."
