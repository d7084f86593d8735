"""Widget API fixtures: a tiny widget client that talks like the iframe (the shop and its fake
LLM/webhook servers come from tests/support/shop.py; tests/conftest.py empties the cache, where
the throttle counters live, around every test)."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from apps.clients.models import Client
from apps.conversations.models import Conversation
from apps.widget import streams as widget_streams

API = "/api/v1/widget/"


class Widget:
    """Speaks to /api/v1/widget/ as the chat does: widget key, Origin, visitor token."""

    def __init__(self, client: Client, origin: str | None = None) -> None:
        self.client = client
        self.key = client.widget_key
        self.origin = origin if origin is not None else client.allowed_origins[0]
        self.http = APIClient()

    def headers(self, token: str | None = None, **extra: str) -> dict[str, str]:
        headers = {"X-Widget-Key": self.key}
        if self.origin:
            headers["Origin"] = self.origin
        if token:
            headers["Authorization"] = f"Bearer {token}"
        headers.update(extra)
        return headers

    def start(self, body: Any = None, **headers: str) -> Any:
        return self.http.post(
            f"{API}conversations",
            body if body is not None else {},
            format="json",
            headers=self.headers(**headers),
        )

    def conversation(self) -> tuple[str, str]:
        response = self.start()
        assert response.status_code == 201, response.content
        return response.json()["id"], response.json()["token"]

    def say(self, conversation_id: str, token: str | None, body: Any, **headers: str) -> Any:
        if isinstance(body, str):
            body = {"text": body}
        return self.http.post(
            f"{API}conversations/{conversation_id}/messages",
            body,
            format="json",
            headers=self.headers(token, **headers),
        )

    def messages(
        self, conversation_id: str, token: str | None, after: Any = None, **headers: str
    ) -> Any:
        query = "" if after is None else f"?after={after}"
        return self.http.get(
            f"{API}conversations/{conversation_id}/messages{query}",
            headers=self.headers(token, **headers),
        )

    def events(self, conversation_id: str, query: str = "", **headers: str) -> Any:
        return self.http.get(
            f"{API}conversations/{conversation_id}/events{query}",
            headers={"Origin": self.origin, "Accept": "text/event-stream", **headers},
        )


def start_from(widget: Widget, address: str) -> tuple[str, str]:
    """A conversation started from the visitor address `address`: (its id, its token)."""
    response = widget.http.post(
        f"{API}conversations", {}, format="json", headers=widget.headers(), REMOTE_ADDR=address
    )
    assert response.status_code == 201, response.content
    return response.json()["id"], response.json()["token"]


def say_from(widget: Widget, address: str, conversation: tuple[str, str], text: str) -> Any:
    """`text` sent in `conversation` (its id and token) from the visitor address `address`."""
    conversation_id, token = conversation
    return widget.http.post(
        f"{API}conversations/{conversation_id}/messages",
        {"text": text},
        format="json",
        headers=widget.headers(token),
        REMOTE_ADDR=address,
    )


@pytest.fixture
def widget(request: pytest.FixtureRequest) -> Widget:
    """A widget client for the reasoning suite's shop (adaptive plan, webhook tools)."""
    return Widget(request.getfixturevalue("shop"))


@pytest.fixture
def short_streams(monkeypatch: pytest.MonkeyPatch) -> None:
    """One poll per stream: the stream reads these module constants on every call."""
    monkeypatch.setattr(widget_streams, "STREAM_SECONDS", 0)
    monkeypatch.setattr(widget_streams, "POLL_SECONDS", 0)


@pytest.fixture
def push_streams(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Push on (the suite's Redis) and streams that never poll: anything after a stream's first
    read arrives because it was published."""
    from tests.support.broker import REDIS_URL

    settings.REDIS_URL = REDIS_URL
    monkeypatch.setattr(widget_streams, "PUSH_STREAM_SECONDS", 30)
    monkeypatch.setattr(widget_streams, "POLL_SECONDS", 3600)


def stored(conversation_id: str) -> Conversation:
    """The row of a conversation the widget started, by the public id the API gave it."""
    return Conversation.objects.unscoped("test checks the database directly").get(
        public_id=conversation_id
    )


def error(response: Any) -> dict[str, Any]:
    """A widget API error body's `error`, after checking that it is all the body holds."""
    body = response.json()
    assert set(body) == {"error"}, body
    return body["error"]


def sse(response: Any) -> list[dict[str, str]]:
    """Read a whole (bounded) event stream into [{"id"?, "event", "data"} | {"retry"}]."""
    body = b"".join(response.streaming_content).decode()
    events: list[dict[str, str]] = []
    for block in body.split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(": ")
            fields[name] = value
        if fields:
            events.append(fields)
    return events
