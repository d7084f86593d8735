"""Outbound HTTP with a wall-clock limit per request, and optional address pinning.

httpx's timeouts bound each socket operation, not the request: an endpoint that sends its
headers and then one byte every two seconds never trips a five-second read timeout, and holds
the caller for as long as it likes. `WallClockTransport` gives every socket operation of a
request (connect, TLS handshake, each write, each read — of the headers and of the body) at most
what is left of the request's own limit and of the enclosing deadline (`apps.core.deadlines`),
so the whole request ends by its limit whatever the peer does, and fails with the usual
`httpx2.TimeoutException` subclasses (which the openai SDK and our executors already handle).

The same network backend can pin a request's TCP connection to an address checked beforehand
(`extensions={"connect_to": "203.0.113.7"}`): DNS is not consulted again between the check and
the call, so a rebinding answer cannot slip in, while the URL — and with it the Host header, TLS
SNI and certificate verification — keeps the hostname.

We build on httpx2/httpcore2, the HTTP stack the openai SDK uses, so model calls and tool
webhooks share one mechanism.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import httpcore2
import httpx2

from apps.core import deadlines

# The absolute time (monotonic clock) the request being sent or read on this thread must end
# by, and the address its connection is pinned to. Set around the transport's work only.
_request_end: ContextVar[float | None] = ContextVar("guidedesk_http_end", default=None)
_request_pin: ContextVar[str | None] = ContextVar("guidedesk_http_pin", default=None)

# A tighter end for the body reads made inside `rest_of_body_within` (a drain after the content
# that matters).
_body_end: ContextVar[float | None] = ContextVar("guidedesk_http_body_end", default=None)

WALL_CLOCK = "wall_clock"  # request extension: this request's limit in seconds
CONNECT_TO = "connect_to"  # request extension: the IP address to connect to


def _time_left(timeout: float | None, exc: type[Exception]) -> float | None:
    """A socket operation's timeout cut to what is left of the request's wall-clock limit."""
    end = _request_end.get()
    if end is None:
        return timeout
    left = end - time.monotonic()
    if left <= 0:
        raise exc("the request's wall-clock limit was reached")
    return left if timeout is None else min(timeout, left)


class _LimitedStream(httpcore2.NetworkStream):
    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _time_left(timeout, httpcore2.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _time_left(timeout, httpcore2.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore2.NetworkStream:
        bounded = _time_left(timeout, httpcore2.ConnectTimeout)
        return _LimitedStream(self._inner.start_tls(ssl_context, server_hostname, bounded))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _LimitedBackend(httpcore2.NetworkBackend):
    def __init__(self, inner: httpcore2.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.NetworkStream:
        stream = self._inner.connect_tcp(
            _request_pin.get() or host,
            port,
            _time_left(timeout, httpcore2.ConnectTimeout),
            local_address,
            socket_options,
        )
        return _LimitedStream(stream)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.NetworkStream:
        bounded = _time_left(timeout, httpcore2.ConnectTimeout)
        return _LimitedStream(self._inner.connect_unix_socket(path, bounded, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


@contextmanager
def _limits(end: float | None, pin: str | None) -> Iterator[None]:
    end_token = _request_end.set(end)
    pin_token = _request_pin.set(pin)
    try:
        yield
    finally:
        _request_pin.reset(pin_token)
        _request_end.reset(end_token)


@contextmanager
def rest_of_body_within(seconds: float) -> Iterator[None]:
    """Body reads (of responses from a `WallClockTransport`) made inside this block end within
    `seconds`: reading a response to its end only so that its connection can be kept costs at
    most that against a peer that holds the body open (the read then times out and the
    connection is dropped)."""
    token = _body_end.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _body_end.reset(token)


class _LimitedBody(httpx2.SyncByteStream):
    """The response body, read under the same limit as the headers were."""

    def __init__(self, inner: httpx2.SyncByteStream, end: float | None, pin: str | None) -> None:
        self._inner, self._end, self._pin = inner, end, pin

    def __iter__(self) -> Iterator[bytes]:
        iterator = iter(self._inner)
        while True:
            end, tighter = self._end, _body_end.get()
            if tighter is not None:
                end = tighter if end is None else min(end, tighter)
            with _limits(end, self._pin):
                chunk = next(iterator, None)
            if chunk is None:
                return
            yield chunk

    def close(self) -> None:
        self._inner.close()


class WallClockTransport(httpx2.HTTPTransport):
    """An httpx2 transport whose every request ends within `limit` seconds (connect and all
    reads included) and within the enclosing deadline. A request may set its own limit with
    `extensions={"wall_clock": seconds}` and pin its connection with `{"connect_to": ip}`."""

    def __init__(self, *, limit: float | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.limit = limit
        # httpcore2 reads the backend each time it opens a connection; wrapping the pool's
        # backend is the supported seam (ConnectionPool(network_backend=…)) reached after
        # HTTPTransport built the pool with its TLS, proxy and limits settings.
        pool: Any = self._pool
        pool._network_backend = _LimitedBackend(pool._network_backend)

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        limit = request.extensions.get(WALL_CLOCK, self.limit)
        try:
            allowed = deadlines.time_for(limit)
        except deadlines.DeadlineExceeded as exc:
            raise httpx2.ConnectTimeout("the deadline was reached", request=request) from exc
        end = None if allowed is None else time.monotonic() + allowed
        pin = request.extensions.get(CONNECT_TO)
        with _limits(end, pin):
            response = super().handle_request(request)
        assert isinstance(response.stream, httpx2.SyncByteStream)
        return httpx2.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_LimitedBody(response.stream, end, pin),
            extensions=response.extensions,
        )


def wall_clock_client(*, limit: float | None, **kwargs: Any) -> httpx2.Client:
    """An httpx2 client on a `WallClockTransport`. `kwargs` go to the client (headers,
    follow_redirects …); transport options (verify, limits …) can be passed as
    `transport_options`."""
    transport_options = kwargs.pop("transport_options", {})
    transport = WallClockTransport(limit=limit, **transport_options)
    return httpx2.Client(transport=transport, **kwargs)
