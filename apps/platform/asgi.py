"""Long-lived streaming responses that hold no thread.

Django's ASGI handler runs synchronous middleware in a per-request thread that lives until the
response has been sent — for an event stream, as long as the stream is open. `StreamingPaths`
serves the matching paths differently: the whole synchronous middleware + view chain runs in a
*borrowed* thread of the event loop's pool, which is given back as soon as the response object
exists (the event-stream views authenticate and return an async iterator); the body is then sent
from the event loop. Every other request goes to Django's ASGI handler unchanged.

What it keeps from Django's handler: the same request class, middleware, signals
(`request_started` / `request_finished`, which manage database connections), response encoding
(`ASGIHandler.send_response`) and client-disconnect handling (the stream's generator is
cancelled).

The same one-thread path also serves `direct` paths (the widget's API: every customer's every
message) whose responses are not streams. Django's ASGI handler hands each such request between
the event loop and threads four or five times (the request-started signal, the synchronous
middleware, back to the loop for the view, the view's own thread, the response's close), and
under load those hand-offs cost about a tenth of a web process's CPU (docs/benchmarks.md). Here
the signal, middleware, view and close run in one borrowed thread, and the loop only sends the
finished response."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.core.handlers.base import BaseHandler
from django.http import HttpResponseBase
from django.urls import set_script_prefix

from apps.platform.db import release_connection


class _SyncHandler(BaseHandler):
    def __init__(self) -> None:
        super().__init__()
        self.load_middleware(is_async=False)


class StreamingPaths:
    """ASGI app: requests whose path matches one of `patterns` are answered without holding a
    thread while their body streams; all others go to `app`."""

    def __init__(
        self, app: ASGIHandler, patterns: Iterable[str], direct: Iterable[str] = ()
    ) -> None:
        self.app = app
        self.patterns = [re.compile(p) for p in [*patterns, *direct]]
        self.sync_handler = _SyncHandler()
        # Its own pool, not the loop's default (cores + 4 threads, which the streams' reads use):
        # a request that waits (a row lock, a turn run in-process with the broker down) must not
        # hold up the others.
        self.executor = ThreadPoolExecutor(
            max_workers=settings.WEB_THREADS, thread_name_prefix="guidedesk-sync"
        )

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not any(p.match(scope["path"]) for p in self.patterns):
            await self.app(scope, receive, send)
            return
        try:
            body_file = await self.app.read_body(receive)
        except RequestAborted:
            return
        try:
            respond = sync_to_async(self._respond, thread_sensitive=False, executor=self.executor)
            response = await respond(scope, body_file)
            await self._send(response, receive, send)
        finally:
            body_file.close()

    def _respond(self, scope: dict[str, Any], body_file: Any) -> HttpResponseBase:
        """The synchronous part, in a borrowed thread: middleware and view, then the thread's
        database connection goes back before the thread does."""
        try:
            set_script_prefix(get_script_prefix(scope))
            signals.request_started.send(sender=ASGIHandler, scope=scope)
            request, error_response = self.app.create_request(scope, body_file)
            if request is None:
                assert error_response is not None
                return error_response
            response = self.sync_handler.get_response(request)
            response._handler_class = ASGIHandler  # type: ignore[attr-defined]
            if not response.streaming:
                # Finished here, in the thread that used the connections: `close()` sends
                # request_finished, which deals with them as Django's handler would.
                response.close()
            return response
        finally:
            release_connection(without_pool=True)

    async def _send(self, response: HttpResponseBase, receive: Any, send: Any) -> None:
        tasks = [
            asyncio.create_task(self.app.listen_for_disconnect(receive)),
            asyncio.create_task(self.app.send_response(response, send)),
        ]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                if not task.done():
                    task.cancel()
                with contextlib.suppress(asyncio.CancelledError, RequestAborted):
                    await task
            if not response.closed:
                # response.close() sends request_finished (closes the connections of that thread).
                await sync_to_async(response.close, thread_sensitive=False)()


class BoundedRequests:
    """ASGI app in front of everything else: a request body larger than its route's limit is
    answered 413 before Django reads (and spools) it — by its Content-Length before a byte is
    read, or, for a streamed (chunked) body, as soon as the bytes received pass the limit; a
    body whose bytes stop arriving gets 408 after `body_timeout` seconds. Either way the
    connection is closed. The request head is bounded by the server's protocol
    (apps/platform/uvicorn_worker.py); docs/deployment.md lists the settings."""

    def __init__(
        self,
        app: Any,
        *,
        default_limit: int,
        limits: Iterable[tuple[str, int]] = (),
        body_timeout: float,
    ) -> None:
        self.app = app
        self.default_limit = default_limit
        self.limits = [(re.compile(pattern), limit) for pattern, limit in limits]
        self.body_timeout = body_timeout

    def limit_for(self, path: str) -> int:
        for pattern, limit in self.limits:
            if pattern.match(path):
                return limit
        return self.default_limit

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared, chunked = _body_framing(scope)
        if not chunked and not declared:
            # No body (most requests: GETs, event streams): nothing to bound or to wait for.
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope["path"])
        if declared is not None and declared > limit:
            await _refuse(send, 413, "too_large", f"The request body is larger than {limit} bytes.")
            return
        refused: list[tuple[int, str, str]] = []
        started = False
        received = 0
        body_done = False
        deadline = asyncio.get_running_loop().time() + self.body_timeout

        async def bounded_receive() -> dict[str, Any]:
            nonlocal received, body_done
            if body_done or refused:
                return await receive()  # (only the disconnect is left to wait for)
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                refused.append((408, "timeout", "The request body did not arrive in time."))
                return {"type": "http.disconnect"}
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    refused.append(
                        (413, "too_large", f"The request body is larger than {limit} bytes.")
                    )
                    # Django's body reader stops at a disconnect (RequestAborted) and answers
                    # nothing; the refusal is sent below.
                    return {"type": "http.disconnect"}
                body_done = not message.get("more_body", False)
            return message

        async def watched_send(message: dict[str, Any]) -> None:
            nonlocal started
            started = True
            await send(message)

        await self.app(scope, bounded_receive, watched_send)
        if refused and not started:
            await _refuse(send, *refused[0])


def _body_framing(scope: dict[str, Any]) -> tuple[int | None, bool]:
    """(Content-Length, whether the body is chunked) of a request: without either it has no
    body (HTTP/1.1 framing; the server's parser has checked the values)."""
    length, chunked = None, False
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            with contextlib.suppress(ValueError):
                length = int(value)
        elif name == b"transfer-encoding":
            chunked = b"chunked" in value.lower()
    return length, chunked


async def _refuse(send: Any, status: int, code: str, message: str) -> None:
    """A JSON error (the API's shape) that closes the connection: what is left of the body is
    never read."""
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
