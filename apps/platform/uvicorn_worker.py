"""The Procfile's web worker: gunicorn's `uvicorn_worker.UvicornWorker` with a request head that is
bounded — in size, in number of fields and in time — by the server itself, not by a proxy the
operator may not have (docs/deployment.md).

Uvicorn's httptools protocol reads a request head of any size (it keeps appending the header
being read until its line ends) and waits for it forever. `BoundedHttpToolsProtocol` is that
protocol with three limits, read from the settings when a connection opens:

- REQUEST_HEADERS_MAX_BYTES: the bytes received before the head is complete (request line and
  header fields), counted as they arrive, so a head that never ends is cut off at the limit
  plus one read; a complete head is measured exactly. Over it: 431, connection closed.
- REQUEST_HEADERS_MAX_COUNT: header fields per request. Over it: 431, connection closed.
- REQUEST_HEADER_TIMEOUT: seconds from the connection's opening (or a kept-alive connection's
  next request's first byte) to the end of the head. Past it: 408 (or nothing, if not a byte
  came), connection closed — a slowloris holds nothing for long.

Request bodies are bounded in the ASGI application (apps/platform/asgi.BoundedRequests), which knows
the routes."""

from __future__ import annotations

import asyncio
from typing import Any

from django.conf import settings
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn_worker import UvicornWorker

# Seconds a refused connection is still read (and its bytes dropped) after the answer.
LINGER_SECONDS = 1.0


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_head_bytes = int(settings.REQUEST_HEADERS_MAX_BYTES)
        self.max_fields = int(settings.REQUEST_HEADERS_MAX_COUNT)
        self.head_timeout = float(settings.REQUEST_HEADER_TIMEOUT)
        self._in_head = True  # the next bytes belong to a request head
        self._head_bytes = 0  # received since this head began (an upper bound)
        self._fields = 0
        self._field_bytes = 0
        self._head_timer: asyncio.TimerHandle | None = None
        self._refused = False

    # -- the connection

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._in_head:
            self._head_bytes += len(data)
        super().data_received(data)
        if self._in_head and not self._refused and self._head_bytes > self.max_head_bytes:
            # The head is still incomplete and already too large: the parser keeps what it has
            # of the current field, so stop here.
            self._refuse(431, "Request header fields too large.")

    # -- parser callbacks

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._fields = 0
        self._field_bytes = 0
        if self._head_timer is None and not self._refused:  # a kept-alive connection's next
            self._arm_head_timer()

    # (After a refusal the parser may still finish the bytes it was given: they are ignored.)

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._refused:
            return
        self._fields += 1
        self._field_bytes += len(name) + len(value) + 4  # ": " and CRLF
        if self._fields > self.max_fields:
            self._refuse(431, "Too many request header fields.")
        elif len(self.url) + self._field_bytes > self.max_head_bytes:
            self._refuse(431, "Request header fields too large.")
        else:
            super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._disarm_head_timer()
        if not self._refused:
            super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if not self._refused:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if self._refused:
            return
        super().on_message_complete()
        self._in_head = True
        self._head_bytes = 0

    # -- limits

    def _arm_head_timer(self) -> None:
        self._disarm_head_timer()
        self._head_timer = self.loop.call_later(self.head_timeout, self._head_timed_out)

    def _disarm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if not self._in_head or self.transport.is_closing():
            return
        if self._head_bytes:
            self._refuse(408, "Request header timeout.")
        else:  # a connection that never sent a byte: nothing to answer
            self._refused = True
            self.transport.close()

    def _refuse(self, status: int, message: str) -> None:
        """Answer `status` and close the connection; nothing more of it is read."""
        self._refused = True
        self._disarm_head_timer()
        if self.transport.is_closing():
            return
        body = message.encode("ascii")
        head = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            head.extend([name, b": ", value, b"\r\n"])
        head.extend(
            [
                b"content-type: text/plain; charset=utf-8\r\n",
                b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
                b"connection: close\r\n\r\n",
                body,
            ]
        )
        self.transport.write(b"".join(head))
        if self.transport.can_write_eof():
            # A lingering close: what the client still sends is read and dropped for a moment,
            # so that the answer reaches it (closing with unread bytes would reset the
            # connection, and the client would see an error instead of the status).
            self.transport.write_eof()
            self.loop.call_later(LINGER_SECONDS, self.transport.close)
        else:
            self.transport.close()
        self.logger.warning("Refused a request: %d %s", status, message)


class BoundedUvicornWorker(UvicornWorker):
    """`uvicorn_worker.UvicornWorker` (uvloop when installed, the httptools parser) with the
    bounded request head above."""

    CONFIG_KWARGS = {
        "loop": "auto",
        "http": "apps.platform.uvicorn_worker:BoundedHttpToolsProtocol",
    }

    def load_wsgi(self) -> None:
        """Load the application, then freeze what starting built (apps/platform/heap.py) and
        take a core of its own when CPU_AFFINITY says so (apps/platform/affinity.py)."""
        super().load_wsgi()
        from apps.platform import affinity, heap

        heap.settle()
        affinity.claim("web")
