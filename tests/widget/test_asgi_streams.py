"""The production ASGI application (config/asgi.py): event-stream paths are answered by
`apps.platform.asgi.StreamingPaths` — middleware and view in a borrowed thread, the body from the
event loop — and every other path by Django's ASGI handler."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urlencode

import pytest
from asgiref.sync import async_to_sync
from django.core import signals
from django.core.asgi import get_asgi_application
from django.core.handlers.asgi import ASGIHandler

from apps.conversations.models import Role
from apps.conversations.services import message_append
from apps.platform.asgi import StreamingPaths
from apps.widget import streams as widget_streams
from tests.support.shop import assess
from tests.widget.conftest import stored
from tests.widget.test_push import parse

pytestmark = pytest.mark.django_db(transaction=True)

EVENTS = r"^/api/v1/widget/conversations/[^/]+/events$"


def scope(
    path: str, query: dict[str, str], headers: dict[str, str], method: str = "GET"
) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": urlencode(query).encode(),
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 40000),
        "server": ("testserver", 80),
    }


async def call(
    app: Any, request: dict[str, Any], disconnect_on: bytes | None = None, body: bytes = b""
):
    """Run one request through `app`. `disconnect_on`: the client goes away as soon as the
    response body holds these bytes (an event, not a guess at how long that takes)."""
    sent: list[dict[str, Any]] = []
    first = True
    seen = asyncio.Event()

    async def receive() -> dict[str, Any]:
        nonlocal first
        if first:
            first = False
            return {"type": "http.request", "body": body, "more_body": False}
        if disconnect_on is None:
            await asyncio.Event().wait()  # never: the response ends by itself
        await seen.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        so_far = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
        if disconnect_on is not None and disconnect_on in so_far:
            seen.set()

    if body:
        request = {
            **request,
            "headers": [*request["headers"], (b"content-length", b"%d" % len(body))],
        }
    await asyncio.wait_for(app(request, receive, send), 30)
    start = next(m for m in sent if m["type"] == "http.response.start")
    content = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], dict(start["headers"]), content.decode()


@pytest.fixture
def app() -> StreamingPaths:
    return StreamingPaths(get_asgi_application(), [EVENTS], [r"^/api/v1/"])


def test_an_event_stream_through_the_streaming_path(widget, app, short_streams):
    conversation_id, token = widget.conversation()
    conversation = stored(conversation_id)
    message_append(client=widget.client, conversation=conversation, role=Role.USER, text="Hi")
    path = f"/api/v1/widget/conversations/{conversation_id}/events"
    request = scope(path, {"key": widget.key, "token": token}, {"Origin": widget.origin})

    status, headers, body = async_to_sync(call)(app, request)
    assert status == 200
    assert headers[b"Content-Type"].startswith(b"text/event-stream")
    assert headers[b"X-Content-Type-Options"] == b"nosniff"  # the middleware ran
    events = parse(body)
    assert events[0] == {"retry": str(widget_streams.RETRY_MS)}
    assert [e["id"] for e in events if "id" in e] == ["1"]
    assert events[-1] == {"event": "typing", "data": '{"typing":false}'}


def test_errors_and_other_paths(widget, app):
    conversation_id, _token = widget.conversation()
    path = f"/api/v1/widget/conversations/{conversation_id}/events"
    status, _headers, body = async_to_sync(call)(
        app, scope(path, {"key": widget.key}, {"Origin": widget.origin})
    )
    assert status == 401
    assert '"not_authenticated"' in body
    status, _headers, body = async_to_sync(call)(app, scope("/healthz", {}, {}))
    assert (status, body) == (200, '{"ok": true}')


def test_a_client_that_goes_away_ends_its_stream(widget, app, monkeypatch):
    monkeypatch.setattr(widget_streams, "STREAM_SECONDS", 600)  # would poll for ten minutes
    monkeypatch.setattr(widget_streams, "POLL_SECONDS", 0.05)
    conversation_id, token = widget.conversation()
    path = f"/api/v1/widget/conversations/{conversation_id}/events"
    request = scope(path, {"key": widget.key, "token": token}, {"Origin": widget.origin})
    status, _headers, body = async_to_sync(call)(app, request, disconnect_on=b"event: status")
    assert status == 200
    assert parse(body)[1] == {"event": "status", "data": '{"status":"open"}'}


def test_the_api_through_the_direct_path(widget, app, llm):
    """Plain API requests: middleware, view and close in one thread; the same answers as
    Django's handler, each request finished exactly once, no connection left behind."""
    conversation_id, token = widget.conversation()
    llm.script("assess", assess(response="It ships tomorrow."))
    finished: list[object] = []

    def on_finished(**kwargs: Any) -> None:
        finished.append(kwargs.get("sender"))

    headers = {
        "Origin": widget.origin,
        "X-Widget-Key": widget.key,
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
    }
    path = f"/api/v1/widget/conversations/{conversation_id}/messages"
    signals.request_finished.connect(on_finished)
    try:
        status, response_headers, body = async_to_sync(call)(
            app, scope(path, {}, headers, method="POST"), body=b'{"text": "When do you ship?"}'
        )
        assert status == 201, body
        assert response_headers[b"X-Content-Type-Options"] == b"nosniff"  # the middleware ran
        assert [r["text"] for r in json.loads(body)["replies"]] == ["It ships tomorrow."]
        status, _headers, body = async_to_sync(call)(app, scope(path, {"after": "1"}, headers))
        assert status == 200
        assert [m["text"] for m in json.loads(body)["results"]] == ["It ships tomorrow."]
        status, _headers, body = async_to_sync(call)(
            app,
            scope(path, {}, {**headers, "Authorization": "Bearer wrong"}, method="POST"),
            body=b'{"text": "x"}',
        )
        assert status == 404, body
    finally:
        signals.request_finished.disconnect(on_finished)
    assert finished == [ASGIHandler, ASGIHandler, ASGIHandler]
