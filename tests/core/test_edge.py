"""The edge as shipped: the Procfile's `web` command (gunicorn + the bounded uvicorn worker, the
httptools parser) under production settings refuses, by itself, what would exhaust it — a
request head of megabytes (431, the worker's memory unchanged), a body over its route's limit
(413 before a byte of it is read, or as soon as a streamed body passes the limit, nothing
spooled to a file), and half-sent requests (closed after REQUEST_HEADER_TIMEOUT).

Raw sockets, so the requests are exactly as malformed or slow as an attacker would send them."""

from __future__ import annotations

import os
import select
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import procfile

# The deployment (release: migrate + collectstatic; gunicorn boot) is the slow part.
pytestmark = [pytest.mark.timeout(300)]

HEADER_TIMEOUT = 2.0
BODY_TIMEOUT = 3.0
WIDGET_LIMIT = 64 * 1024  # the default WIDGET_REQUEST_BODY_MAX_BYTES
HEAD_LIMIT = 32 * 1024  # the default REQUEST_HEADERS_MAX_BYTES


@dataclass
class Edge:
    port: int
    web: subprocess.Popen[bytes]
    tmp: Path

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=10)

    def worker_pids(self) -> list[int]:
        """The gunicorn worker processes (children of the arbiter) of the deployment."""
        return [
            found.pid
            for found in procfile.group_processes(self.web.pid)
            if "gunicorn" in found.command and found.ppid != 1
        ]

    def worker_rss_kib(self) -> int:
        """Resident memory of the busiest gunicorn process of the deployment (the worker)."""
        rss = []
        for pid in self.worker_pids():
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    rss.append(int(line.split()[1]))
        return max(rss)


@pytest.fixture(scope="module")
def edge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Edge]:
    tmp = tmp_path_factory.mktemp("edge")
    port = procfile.free_port()
    env = procfile.process_env(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings.production",
            "SECRET_KEY": "edge-test-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz",
            "ALLOWED_HOSTS": "127.0.0.1",
            "DATABASE_URL": f"sqlite:///{tmp / 'edge.sqlite3'}",
            # Required in production; no turn runs in these tests.
            "CELERY_BROKER_URL": "redis://127.0.0.1:9/0",
            "STATIC_ROOT": str(tmp / "static"),
            "SECURE_SSL_REDIRECT": "False",
            "SECURE_HSTS_SECONDS": "0",
            "EMAIL_URL": "smtp://127.0.0.1:1",
            "WEB_CONCURRENCY": "1",
            "REQUEST_HEADER_TIMEOUT": str(HEADER_TIMEOUT),
            "REQUEST_BODY_TIMEOUT": str(BODY_TIMEOUT),
            "TMPDIR": str(tmp / "tmp"),
            "PORT": str(port),
        }
    )
    (tmp / "tmp").mkdir()
    procfile.run_release(env)
    log = tmp / "web.log"
    web = procfile.start("web", env, log)
    try:
        procfile.wait_for_http(f"http://127.0.0.1:{port}/healthz", web, log)
        yield Edge(port=port, web=web, tmp=tmp)
    finally:
        procfile.stop(web)
        print(log.read_text()[-4000:])  # noqa: T201  (shown when a test fails)


def _read_response(sock: socket.socket, timeout: float = 10) -> bytes:
    """Everything the server sends until it closes the connection (b"" if it sends nothing),
    or until `timeout` seconds pass without a byte (the server kept the connection open)."""
    sock.settimeout(timeout)
    chunks = []
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _status(response: bytes) -> int:
    return int(response.split(b" ", 2)[1]) if response.startswith(b"HTTP/1.1 ") else 0


def _readable(sock: socket.socket, wait: float) -> bool:
    return bool(select.select([sock], [], [], wait)[0])


def _get(edge: Edge, extra_headers: bytes = b"") -> bytes:
    with edge.connect() as sock:
        sock.sendall(
            b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            + extra_headers
            + b"\r\n"
        )
        return _read_response(sock)


def test_ordinary_requests_pass_the_edge(edge: Edge):
    response = _get(edge, b"Cookie: " + b"a" * 4000 + b"\r\n" + b"X-Many: 1\r\n" * 40)
    assert _status(response) == 200, response[:300]
    assert response.endswith(b'{"ok": true}')


def test_megabytes_of_request_headers_are_refused_without_growing_the_worker(edge: Edge):
    for _ in range(3):  # warm the worker up (its first requests import and allocate)
        assert _status(_get(edge)) == 200
    before = edge.worker_rss_kib()
    statuses = []
    for _ in range(5):
        with edge.connect() as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
            sent = 0
            # 4 MB of one header, as fast as the server takes it, until it answers.
            while sent < 4 * 1024 * 1024 and not _readable(sock, 0.01):
                try:
                    sock.sendall(b"a" * 65536)
                except (BrokenPipeError, ConnectionResetError):
                    break
                sent += 65536
            response = _read_response(sock)
        statuses.append(_status(response))
        assert sent < 1024 * 1024, "the server kept reading a head far over its limit"
    grown = edge.worker_rss_kib() - before

    assert statuses == [431] * 5
    assert grown < 4 * 1024, f"the worker grew by {grown} KiB"
    assert _status(_get(edge)) == 200  # and it still serves


def test_too_many_header_fields_are_refused(edge: Edge):
    response = _get(edge, b"".join(b"X-F%d: 1\r\n" % i for i in range(150)))
    assert _status(response) == 431


def _post_head(path: bytes, length_header: bytes) -> bytes:
    return (
        b"POST " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"X-Widget-Key: wk_test\r\nConnection: close\r\n" + length_header + b"\r\n"
    )


def _tmp_files(edge: Edge) -> list[str]:
    return os.listdir(edge.tmp / "tmp")


def test_a_body_over_the_routes_limit_is_refused_by_its_content_length_before_it_is_read(
    edge: Edge,
):
    with edge.connect() as sock:
        sock.sendall(_post_head(b"/api/v1/widget/conversations", b"Content-Length: 314572800\r\n"))
        # Not a byte of the 300 MB body is sent: the answer comes from the header alone.
        assert _readable(sock, 10), "no answer before the body"
        response = _read_response(sock)
    assert _status(response) == 413
    assert b"connection: close" in response.lower()
    assert b'"code": "too_large"' in response
    assert _tmp_files(edge) == []


def test_a_streamed_body_is_refused_as_soon_as_it_passes_the_limit(edge: Edge):
    with edge.connect() as sock:
        sock.sendall(_post_head(b"/api/v1/widget/conversations", b"Transfer-Encoding: chunked\r\n"))
        sent = 0
        piece = b"x" * 8192
        while sent < 8 * 1024 * 1024 and not _readable(sock, 0.05):
            sock.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
            sent += len(piece)
        response = _read_response(sock)
    assert _status(response) == 413
    assert sent < WIDGET_LIMIT + 256 * 1024  # refused near the limit, not at the end
    assert _tmp_files(edge) == []


def test_a_body_under_the_limit_reaches_the_application(edge: Edge):
    body = b'{"locale": "en"}'
    with edge.connect() as sock:
        sock.sendall(
            _post_head(b"/api/v1/widget/conversations", b"Content-Length: %d\r\n" % len(body))
            + body
        )
        response = _read_response(sock)
    # The (unknown) widget key is the application's to refuse, not the edge's.
    assert _status(response) not in (0, 408, 413, 431), response[:300]


def test_a_body_that_stops_arriving_is_answered_408_after_the_body_timeout(edge: Edge):
    with edge.connect() as sock:
        sock.sendall(_post_head(b"/api/v1/widget/conversations", b"Content-Length: 1000\r\n"))
        sock.sendall(b'{"locale": ')  # ... and the rest never comes
        started = time.monotonic()
        response = _read_response(sock, timeout=BODY_TIMEOUT + 10)
        waited = time.monotonic() - started
    assert _status(response) == 408
    assert b'"code": "timeout"' in response
    assert BODY_TIMEOUT - 0.5 < waited < BODY_TIMEOUT + 3


def test_half_sent_requests_are_closed_after_the_header_timeout(edge: Edge):
    half = [edge.connect() for _ in range(20)]
    silent = [edge.connect() for _ in range(5)]
    for sock in half:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: a")
    started = time.monotonic()
    # A slowloris keeps trickling bytes: it does not reset the timeout.
    while time.monotonic() - started < HEADER_TIMEOUT - 0.5:
        for sock in half:
            sock.sendall(b"a")
        time.sleep(0.3)
    answers = [_read_response(sock, timeout=HEADER_TIMEOUT + 5) for sock in half + silent]
    elapsed = time.monotonic() - started
    for sock in half + silent:
        sock.close()

    assert [_status(a) for a in answers[:20]] == [408] * 20
    assert answers[20:] == [b""] * 5  # closed without a word: they never sent one
    assert elapsed < HEADER_TIMEOUT + 4
    assert _status(_get(edge)) == 200
