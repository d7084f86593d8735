"""The wall-clock transport against real sockets: servers that trickle their headers or their
body, a deadline that cuts a request short, and a connection pinned to a checked address."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator

import httpx2
import pytest

from apps.core.deadlines import DeadlineExceeded, deadline_scope, remaining, time_for
from apps.platform.http import WallClockTransport, wall_clock_client

Handler = Callable[[socket.socket, bytes], None]


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], str]]:
    """Start a raw TCP server on an ephemeral port whose connections run `handler`; returns the
    base URL. Every server and connection is closed at the end of the test."""
    closers: list[Callable[[], None]] = []

    def start(handler: Handler) -> str:
        listener = socket.create_server(("127.0.0.1", 0))
        stop = threading.Event()

        def accept_loop() -> None:
            listener.settimeout(0.2)
            while not stop.is_set():
                try:
                    conn, _ = listener.accept()
                except (TimeoutError, OSError):
                    continue
                threading.Thread(target=_run, args=(conn,), daemon=True).start()

        def _run(conn: socket.socket) -> None:
            with conn:
                conn.settimeout(5)
                request = b""
                while b"\r\n\r\n" not in request:
                    chunk = conn.recv(4096)
                    if not chunk:
                        return
                    request += chunk
                # The client hanging up mid-answer is exactly what a limit does.
                with contextlib.suppress(OSError):
                    handler(conn, request)

        thread = threading.Thread(target=accept_loop, daemon=True)
        thread.start()

        def close() -> None:
            stop.set()
            thread.join(2)
            listener.close()

        closers.append(close)
        return f"http://127.0.0.1:{listener.getsockname()[1]}"

    yield start
    for close in closers:
        close()


def trickle(data: bytes, every: float, stop_after: float = 30.0) -> Handler:
    def handler(conn: socket.socket, _request: bytes) -> None:
        started = time.monotonic()
        for byte in data:
            if time.monotonic() - started > stop_after:
                return
            conn.sendall(bytes([byte]))
            time.sleep(every)

    return handler


def answer(body: bytes) -> Handler:
    def handler(conn: socket.socket, request: bytes) -> None:
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )

    return handler


def echo_host(conn: socket.socket, request: bytes) -> None:
    host = next(
        line.split(b":", 1)[1].strip()
        for line in request.split(b"\r\n")
        if line.lower().startswith(b"host:")
    )
    answer(host)(conn, request)


def _elapsed(call: Callable[[], object]) -> tuple[float, BaseException | None]:
    started = time.monotonic()
    try:
        call()
    except BaseException as exc:
        return time.monotonic() - started, exc
    return time.monotonic() - started, None


def test_a_normal_reply_passes(serve):
    url = serve(answer(b'{"ok": true}'))
    with wall_clock_client(limit=2.0) as http:
        response = http.get(url)
    assert response.json() == {"ok": True}


def test_a_body_trickled_byte_by_byte_is_cut_at_the_limit(serve):
    # Headers at once, then a body byte every 0.2 s: each read succeeds well inside any read
    # timeout, so only a wall-clock limit ends it.
    headers = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"
    url = serve(lambda conn, req: (conn.sendall(headers), trickle(b"x" * 1000, 0.2)(conn, req)))
    with wall_clock_client(limit=1.0, timeout=5.0) as http:
        elapsed, exc = _elapsed(lambda: http.get(url))
    assert isinstance(exc, httpx2.ReadTimeout)
    assert elapsed < 3.0  # the limit (1 s) plus scheduling slack; a per-read timeout: 200 s


def test_headers_trickled_byte_by_byte_are_cut_at_the_limit(serve):
    url = serve(trickle(b"HTTP/1.1 200 OK\r\nX-Slow: " + b"y" * 500 + b"\r\n\r\n", 0.2))
    with wall_clock_client(limit=1.0, timeout=5.0) as http:
        elapsed, exc = _elapsed(lambda: http.get(url))
    assert isinstance(exc, httpx2.ReadTimeout)
    assert elapsed < 3.0


def test_a_request_may_set_its_own_limit(serve):
    headers = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"
    url = serve(lambda conn, req: (conn.sendall(headers), trickle(b"x" * 100, 0.2)(conn, req)))
    with wall_clock_client(limit=60.0) as http:
        elapsed, exc = _elapsed(lambda: http.get(url, extensions={"wall_clock": 0.8}))
    assert isinstance(exc, httpx2.ReadTimeout)
    assert elapsed < 3.0


def test_the_enclosing_deadline_cuts_a_longer_limit(serve):
    headers = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"
    url = serve(lambda conn, req: (conn.sendall(headers), trickle(b"x" * 100, 0.2)(conn, req)))
    with wall_clock_client(limit=60.0) as http, deadline_scope(0.8):
        elapsed, exc = _elapsed(lambda: http.get(url))
    assert isinstance(exc, httpx2.ReadTimeout)
    assert elapsed < 3.0


def test_no_request_starts_after_the_deadline(serve):
    url = serve(answer(b"{}"))
    with wall_clock_client(limit=5.0) as http, deadline_scope(0.05):
        time.sleep(0.1)
        _, exc = _elapsed(lambda: http.get(url))
    assert isinstance(exc, httpx2.ConnectTimeout)


def test_a_pinned_connection_goes_to_the_checked_address_with_the_hostname_kept(serve):
    # The URL names a host that does not resolve at all; the pin makes the connection go to the
    # address that was checked, while the Host header still names the host.
    url = serve(echo_host)
    port = url.rsplit(":", 1)[1]
    with httpx2.Client(transport=WallClockTransport(limit=5.0)) as http:
        response = http.get(
            f"http://tool.example.invalid:{port}/hook", extensions={"connect_to": "127.0.0.1"}
        )
    assert response.text == f"tool.example.invalid:{port}"


def test_without_a_pin_the_hostname_is_resolved(serve):
    url = serve(echo_host)
    port = url.rsplit(":", 1)[1]
    with httpx2.Client(transport=WallClockTransport(limit=5.0)) as http:
        _, exc = _elapsed(lambda: http.get(f"http://tool.example.invalid:{port}/hook"))
    assert isinstance(exc, httpx2.ConnectError)


def test_deadline_scopes_nest_and_only_shorten():
    assert remaining() is None
    assert time_for(7.0) == 7.0
    with deadline_scope(10.0):
        outer = remaining()
        assert outer is not None and 9.0 < outer <= 10.0
        with deadline_scope(60.0):  # cannot extend the outer deadline
            inner = remaining()
            assert inner is not None and inner <= 10.0
        with deadline_scope(1.0):
            left = time_for(7.0)
            assert left is not None and left <= 1.0
    assert remaining() is None


def test_time_for_refuses_once_the_deadline_passed():
    with deadline_scope(0.01):
        time.sleep(0.03)
        with pytest.raises(DeadlineExceeded):
            time_for(5.0)
