"""The widget's event stream served the ASGI way (Django's async test client builds the same
ASGIRequest uvicorn does): the same protocol as the WSGI stream, and — with Redis — events pushed
to an open stream after commit instead of polled (apps/conversations/events.py).

The Redis tests use the broker the suite was given (CELERY_BROKER_URL, e.g. index 5 locally,
CI's Redis in CI) and skip without one."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.db import connection, transaction
from django.test import AsyncClient

from apps.conversations import events
from apps.conversations.models import Conversation, Role
from apps.conversations.services import message_append
from apps.escalations.services import staff_reply
from apps.widget import streams as widget_streams
from tests.support.broker import NEEDS_REDIS, REDIS_URL
from tests.widget.conftest import API, Widget, stored


def parse(body: str) -> list[dict[str, str]]:
    parsed: list[dict[str, str]] = []
    for block in body.split("\n\n"):
        fields = dict(
            line.partition(": ")[::2]
            for line in block.splitlines()
            if line and not line.startswith(":")
        )
        if fields:
            parsed.append(fields)
    return parsed


async def open_stream(widget: Widget, conversation_id: str, token: str, **headers: str) -> Any:
    response = await AsyncClient().get(
        f"{API}conversations/{conversation_id}/events",
        {"key": widget.key, "token": token},
        headers={"Origin": widget.origin, "Accept": "text/event-stream", **headers},
    )
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/event-stream")
    return response


async def read_all(response: Any) -> list[dict[str, str]]:
    chunks = [c if isinstance(c, bytes) else c.encode() async for c in response.streaming_content]
    return parse(b"".join(chunks).decode())


async def next_events(stream: AsyncIterator[Any], seconds: float = 10) -> list[dict[str, str]]:
    chunk = await asyncio.wait_for(anext(stream), seconds)
    return parse(chunk.decode() if isinstance(chunk, bytes) else chunk)


def say(conversation: Conversation, text: str, role: str = Role.ASSISTANT) -> None:
    message_append(client=conversation.client, conversation=conversation, role=role, text=text)


async def elsewhere(func: Any, *args: Any, **kwargs: Any) -> None:
    """Run a write in another thread (another connection, committed), like a worker would; the
    thread's connection is closed after, so none is left open on the test database."""

    def run() -> None:
        try:
            func(*args, **kwargs)
        finally:
            connection.close()

    await sync_to_async(run, thread_sensitive=False)()


# ------------------------------------------------------------------- same protocol, polling


@pytest.mark.django_db(transaction=True)  # the stream reads in other threads
def test_asgi_stream_without_redis_speaks_the_documented_protocol(widget, short_streams):
    conversation_id, token = widget.conversation()
    conversation = stored(conversation_id)
    for text in ("one", "two", "three"):
        say(conversation, text)

    async def scenario() -> tuple[list[dict[str, str]], list[dict[str, str]]]:
        assert events.hub() is None  # no Redis: the stream polls
        full = await read_all(await open_stream(widget, conversation_id, token))
        resumed = await read_all(
            await open_stream(widget, conversation_id, token, **{"Last-Event-ID": "2"})
        )
        return full, resumed

    full, resumed = async_to_sync(scenario)()
    assert full[0] == {"retry": str(widget_streams.RETRY_MS)}
    assert full[1] == {"event": "status", "data": '{"status":"open"}'}
    messages = [e for e in full if e.get("event") == "message"]
    assert [e["id"] for e in messages] == ["1", "2", "3"]
    assert [json.loads(e["data"])["text"] for e in messages] == ["one", "two", "three"]
    assert full[-1] == {"event": "typing", "data": '{"typing":false}'}
    assert [e["id"] for e in resumed if "id" in e] == ["3"]


# ------------------------------------------------------------------------------ push (Redis)


@NEEDS_REDIS
@pytest.mark.django_db(transaction=True)
def test_a_committed_message_is_pushed_to_the_open_stream(widget, push_streams):
    conversation_id, token = widget.conversation()
    conversation = stored(conversation_id)
    say(conversation, "Hi", role=Role.USER)

    async def scenario() -> list[list[dict[str, str]]]:
        response = await open_stream(widget, conversation_id, token)
        stream = aiter(response.streaming_content)
        seen = [await next_events(stream), await next_events(stream)]
        hub = events.hub()
        assert hub is not None
        await asyncio.wait_for(hub.connected.wait(), 10)
        await elsewhere(say, conversation, "Hello from the model")
        seen.append(await next_events(stream))
        await elsewhere(
            staff_reply, client=widget.client, conversation=conversation, text="Hi, this is Sam."
        )
        seen.append(await next_events(stream))
        await response.streaming_content.aclose()
        await events.close_hub()
        return seen

    first, second, pushed, staff = async_to_sync(scenario)()
    assert first == [{"retry": str(widget_streams.RETRY_MS)}]
    assert second[0] == {"event": "status", "data": '{"status":"open"}'}
    assert [e["id"] for e in second if "id" in e] == ["1"]
    assert [e["id"] for e in pushed] == ["2"]
    assert json.loads(pushed[0]["data"])["text"] == "Hello from the model"
    assert {"event": "status", "data": '{"status":"escalated"}'} in staff
    assert [json.loads(e["data"])["role"] for e in staff if e.get("event") == "message"] == [
        "system",
        "staff",
    ]


@NEEDS_REDIS
@pytest.mark.django_db(transaction=True)
def test_changes_are_published_after_commit_and_never_for_a_rollback(widget, settings):
    import redis

    settings.REDIS_URL = REDIS_URL
    conversation_id, _token = widget.conversation()
    conversation = stored(conversation_id)
    listener = redis.Redis.from_url(REDIS_URL).pubsub(ignore_subscribe_messages=True)
    channel = f"{events.CHANNEL_PREFIX}{conversation.pk}"
    listener.subscribe(channel)

    class Rollback(Exception):
        pass

    def rolled_back() -> None:
        with transaction.atomic():
            say(conversation, "never committed")
            raise Rollback

    try:
        with pytest.raises(Rollback):
            rolled_back()
        with transaction.atomic():
            say(conversation, "committed")
            assert listener.get_message(timeout=0.5) is None  # not before the commit
        received = listener.get_message(timeout=5)
        assert received is not None
        assert received["channel"].decode() == channel
        assert listener.get_message(timeout=0.5) is None  # the rollback published nothing
    finally:
        listener.close()
