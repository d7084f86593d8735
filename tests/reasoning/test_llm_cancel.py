"""A call that runs past LLM_TIMEOUT closes its connection, so a server that notices the
disconnect stops generating instead of finishing an answer nobody reads (a CPU model took
15–105 s per call and kept generating abandoned requests). The server here is a slow local
one that never answers and records when the client hangs up — plain and streamed calls."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from pytest_django.fixtures import Settings

from apps.reasoning.llm import LLMError, llm_complete, streaming
from apps.reasoning.steps.respond import RespondOut

MESSAGES = [
    {"role": "system", "content": "You are the support assistant for Acme."},
    {"role": "user", "content": "When do you open?"},
]
TIMEOUT = 0.5
HANG_UP_WAIT = 10.0  # the most the test waits for the disconnect (an event, not a sleep)


class SlowServer:
    """Reads a request, optionally starts a server-sent-events answer, then sends nothing more
    until the client closes the connection (recorded with the time it took)."""

    def __init__(self, *, stream_first_chunk: bool) -> None:
        self.stream_first_chunk = stream_first_chunk
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.requested = threading.Event()
        self.hung_up = threading.Event()
        self.requested_at = 0.0
        self.hung_up_after = 0.0
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, body = data.split(b"\r\n\r\n", 1)
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            while len(body) < length:
                body += conn.recv(65536)
            self.requested_at = time.monotonic()
            self.requested.set()
            if self.stream_first_chunk:
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"transfer-encoding: chunked\r\n\r\n"
                )
                event = b'data: {"choices":[{"index":0,"delta":{"content":"{"}}]}\n\n'
                conn.sendall(b"%x\r\n%s\r\n" % (len(event), event))
            # "Generating": wait for the client to hang up (recv returns b"" or fails).
            conn.settimeout(0.05)
            while not self._stop.is_set():
                try:
                    if conn.recv(1024) == b"":
                        break
                except TimeoutError:
                    continue
                except OSError:
                    break
            else:
                return
            self.hung_up_after = time.monotonic() - self.requested_at
            self.hung_up.set()

    def stop(self) -> None:
        self._stop.set()
        self.sock.close()


@pytest.fixture
def slow(settings: Settings, db: None) -> Iterator[Callable[..., SlowServer]]:
    servers: list[SlowServer] = []

    def start(*, stream_first_chunk: bool = False) -> SlowServer:
        server = SlowServer(stream_first_chunk=stream_first_chunk)
        servers.append(server)
        settings.OPENAI_API_KEY = "test-key"
        settings.OPENAI_BASE_URL = server.base_url
        settings.LLM_RESPONSE_FORMAT = "json_schema"
        settings.LLM_TIMEOUT = TIMEOUT
        return server

    yield start
    for server in servers:
        server.stop()


def test_a_timed_out_call_hangs_up_on_the_server(slow) -> None:
    server = slow()
    with pytest.raises(LLMError) as failed:
        llm_complete(step="respond", messages=MESSAGES, output=RespondOut)
    assert failed.value.kind == "timeout"
    assert server.hung_up.wait(HANG_UP_WAIT), "the connection was left open after the timeout"
    assert server.hung_up_after < HANG_UP_WAIT


def test_a_timed_out_streamed_call_hangs_up_on_the_server(slow) -> None:
    server = slow(stream_first_chunk=True)
    with pytest.raises(LLMError) as failed, streaming(lambda partial: True):
        llm_complete(step="respond", messages=MESSAGES, output=RespondOut)
    assert failed.value.kind == "timeout"
    assert server.hung_up.wait(HANG_UP_WAIT), "the stream was left open after the timeout"
