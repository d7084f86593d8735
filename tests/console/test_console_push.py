"""The console's live doorbells (`/console/events`, `/console/conversations/<id>/events`): with
Redis and an ASGI request they ring (`event: changed`) when a writer commits a change the page
shows, scoped to the signed-in member's client; without push (runserver, no Redis) they answer
204 so the page keeps polling.

The Redis tests use the broker the suite was given (CELERY_BROKER_URL) and skip without one."""

from __future__ import annotations

import asyncio
import contextlib
import re
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient
from django.urls import reverse

from apps.accounts.models import Role
from apps.console import views as console_views
from apps.conversations import events
from apps.conversations.models import Conversation
from apps.conversations.services import message_append
from apps.escalations.services import staff_reply
from tests.factories import MembershipFactory
from tests.support.broker import NEEDS_REDIS, REDIS_URL
from tests.widget.test_push import elsewhere, parse

QUEUE_EVENTS = reverse("console-queue-events")


def events_url(conversation: Conversation) -> str:
    return reverse("console-conversation-events", args=[conversation.public_id])


# ----------------------------------------------------------------------- who gets a doorbell


@pytest.mark.django_db
def test_signed_out_the_doorbells_answer_a_json_401(client, data_a):
    for url in (QUEUE_EVENTS, events_url(data_a.conversation)):
        response = client.get(url)
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "not_authenticated"


@pytest.mark.django_db
def test_without_push_the_doorbells_answer_204_and_the_page_polls(viewer, data_a, settings):
    settings.REDIS_URL = "redis://127.0.0.1:6379/0"  # even with Redis: WSGI cannot hold a stream
    for url in (QUEUE_EVENTS, events_url(data_a.conversation)):
        assert viewer.get(url).status_code == 204
    page = viewer.get(reverse("console-conversation", args=[data_a.conversation.public_id]))
    assert f'data-events-url="{events_url(data_a.conversation)}' in page.content.decode()
    assert (
        f'data-events-url="{QUEUE_EVENTS}' in viewer.get(reverse("console-queue")).content.decode()
    )


@pytest.mark.django_db
def test_another_tenants_conversation_has_no_doorbell(browser_for, data_a, data_b, client_b):
    b_viewer = browser_for(Role.VIEWER, client=client_b)
    response = b_viewer.get(events_url(data_a.conversation))
    assert response.status_code == 404
    assert b_viewer.get(events_url(data_b.conversation)).status_code == 204


@pytest.mark.django_db(transaction=True)
def test_over_asgi_without_redis_the_doorbell_is_204(data_a, client_a):
    membership = MembershipFactory(client=client_a, role=Role.VIEWER)

    async def scenario() -> int:
        browser = AsyncClient()
        await browser.aforce_login(membership.user)
        response = await browser.get(events_url(data_a.conversation))
        return response.status_code

    assert events.push_enabled() is False
    assert async_to_sync(scenario)() == 204


# ------------------------------------------------------------------------------ push (Redis)


class Doorbell:
    """Reads an open doorbell stream in a task of its own (a timed-out read must not cancel the
    stream's generator) and tells whether it rang."""

    def __init__(self, response: Any) -> None:
        self.response = response
        self.chunks: asyncio.Queue[list[dict[str, str]]] = asyncio.Queue()
        self.task = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        async for chunk in self.response.streaming_content:
            await self.chunks.put(parse(chunk.decode() if isinstance(chunk, bytes) else chunk))

    async def next(self, seconds: float) -> list[dict[str, str]]:
        return await asyncio.wait_for(self.chunks.get(), seconds)

    async def rings(self, seconds: float) -> bool:
        """Whether it rings within `seconds` (heart-beats do not count)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while (left := deadline - loop.time()) > 0:
            try:
                got = await self.next(left)
            except TimeoutError:
                return False
            if {"event": "changed", "data": "{}"} in got:
                return True
        return False

    async def close(self) -> None:
        """Stop reading, close the stream and the push subscription."""
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self.task
        await self.response.streaming_content.aclose()
        await events.close_hub()

    @classmethod
    async def connected(cls, user: Any, url: str, **headers: str) -> tuple[Doorbell, Any]:
        """The doorbell at `url`, opened as `user`, once its push subscription is connected and
        has rung its catch-up ring: the bell and its first chunk (the retry: line)."""
        browser = AsyncClient()
        await browser.aforce_login(user)
        response = await browser.get(url, headers=headers)
        assert response.status_code == 200
        bell = cls(response)
        first = await bell.next(10)
        hub = events.hub()
        assert hub is not None
        await asyncio.wait_for(hub.connected.wait(), 10)
        # (Re)connecting the subscription rings once: anything may have been missed meanwhile.
        assert await bell.rings(5) is True
        return bell, first


@pytest.fixture
def push(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Push through the test Redis, with no heart-beat to tell from a ring."""
    settings.REDIS_URL = REDIS_URL
    monkeypatch.setattr(console_views, "DOORBELL_HEARTBEAT_SECONDS", 3600)


@NEEDS_REDIS
@pytest.mark.django_db(transaction=True)
def test_the_conversation_doorbell_rings_on_a_committed_change(data_a, data_b, client_a, push):
    membership = MembershipFactory(client=client_a, role=Role.VIEWER)
    mine, other = data_a.conversation, data_b.conversation

    async def scenario() -> tuple[list[dict[str, str]], bool, bool, bool]:
        bell, first = await Doorbell.connected(
            membership.user, events_url(mine), Accept="text/event-stream"
        )
        assert bell.response["Content-Type"].startswith("text/event-stream")
        # Another tenant's conversation changing does not ring this one.
        await elsewhere(
            message_append, client=other.client, conversation=other, role="user", text="hi"
        )
        rang_for_other = await bell.rings(1.0)
        await elsewhere(
            message_append, client=mine.client, conversation=mine, role="user", text="hello"
        )
        rang_for_message = await bell.rings(10)
        await elsewhere(staff_reply, client=mine.client, conversation=mine, text="Hi, Sam here.")
        rang_for_staff = await bell.rings(10)
        await bell.close()
        return first, rang_for_other, rang_for_message, rang_for_staff

    first, rang_for_other, rang_for_message, rang_for_staff = async_to_sync(scenario)()
    assert first == [{"retry": str(console_views.DOORBELL_RETRY_MS)}]
    assert rang_for_other is False
    assert rang_for_message is True
    assert rang_for_staff is True


@NEEDS_REDIS
@pytest.mark.django_db(transaction=True)
def test_the_queue_doorbell_rings_for_any_conversation_of_the_client_only(
    data_a, data_b, client_a, push, monkeypatch
):
    monkeypatch.setitem(console_views.DOORBELL_COALESCE_SECONDS, "queue", 0.05)
    membership = MembershipFactory(client=client_a, role=Role.AGENT)
    mine, other = data_a.conversation, data_b.conversation

    async def scenario() -> tuple[bool, bool]:
        bell, _ = await Doorbell.connected(membership.user, QUEUE_EVENTS)
        await elsewhere(staff_reply, client=other.client, conversation=other, text="Not yours.")
        rang_for_other = await bell.rings(1.0)
        await elsewhere(staff_reply, client=mine.client, conversation=mine, text="Taking it.")
        rang_for_mine = await bell.rings(10)
        await bell.close()
        return rang_for_other, rang_for_mine

    rang_for_other, rang_for_mine = async_to_sync(scenario)()
    assert rang_for_other is False
    assert rang_for_mine is True


def test_the_doorbells_are_served_without_holding_a_thread():
    from config import asgi

    paths = asgi.STREAMING_PATHS
    for path in ("/console/events", "/console/conversations/abc123/events"):
        assert any(re.match(p, path) for p in paths), path
    assert not any(re.match(p, "/console/conversations/abc123/poll") for p in paths)
