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

from apps.core.db import release_connection


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
