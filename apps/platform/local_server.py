"""A local HTTP server run from a daemon thread: the certificate's agents, proxy and retail app,
and the test suite's fake model and MCP server, all start, answer and stop the same way.

`ServerThread` serves a standard-library server (`ThreadingHTTPServer`), `UvicornThread` an ASGI
app under uvicorn; both bind 127.0.0.1 and, unless told a port, a free one. `Serving` gives a
class with `start()`/`stop()` its `with` block. `LocalRequestHandler` is the standard-library
handler's keep-alive set-up and the body helpers (read a request, send a whole or a chunked
response).

Only the standard library is imported at module level: the fake model (devtools/fake_llm.py)
builds on this module and deliberately runs without Django or uvicorn.
"""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    import uvicorn

LOCALHOST = "127.0.0.1"

Headers = Mapping[str, str] | Iterable[tuple[str, str]]


def free_port(host: str = LOCALHOST) -> int:
    """A port nothing listens on right now (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class Serving:
    """`start()` and `stop()`, and a `with` block that calls them."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class LocalRequestHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive without the access log, and the body helpers."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are separate writes: avoid 40 ms stalls

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the server keeps its own record where it needs one."""

    def read_body(self) -> bytes:
        """Read the request body (Content-Length or chunked transfer encoding)."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks: list[bytes] = []
            while True:
                size_line = self.rfile.readline()
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # discard trailers
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()  # CRLF after each chunk
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _send_headers(self, status: int, headers: Headers) -> None:
        self.send_response(status)
        for name, value in headers.items() if isinstance(headers, Mapping) else headers:
            self.send_header(name, value)

    def send(self, status: int, body: bytes, headers: Headers) -> None:
        """Send a complete response with an explicit Content-Length."""
        self._send_headers(status, headers)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.wfile.flush()

    def send_chunked(self, status: int, chunks: Iterator[bytes], headers: Headers) -> None:
        """Send a response whose body is written piece by piece (chunked transfer encoding),
        each piece flushed as soon as it is produced (server-sent events)."""
        self._send_headers(status, headers)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for chunk in chunks:
                if chunk:
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:  # the client went away mid-stream
            self.close_connection = True


class ServerThread:
    """`server.serve_forever()` in a daemon thread. The server is bound (and so answers) as soon
    as it is built; `stop()` ends the loop, closes the socket and waits for the thread."""

    def __init__(
        self,
        server: socketserver.BaseServer,
        *,
        name: str | None = None,
        poll_interval: float = 0.05,
    ) -> None:
        self.server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": poll_interval},
            name=name,
            daemon=True,
        )

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])  # type: ignore[index]

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self, *, before_close: Callable[[], None] | None = None) -> None:
        """Stop serving; `before_close` runs once no new request is accepted (to drop open
        keep-alive connections, say)."""
        self.server.shutdown()
        if before_close is not None:
            before_close()
        self.server.server_close()
        self._thread.join(timeout=5)


class UvicornThread:
    """An ASGI app served by uvicorn in a daemon thread on 127.0.0.1. `start()` returns once the
    server accepts connections; `stop()` asks it to exit and waits for the thread."""

    START_TIMEOUT_SECONDS = 15

    def __init__(self, app: Any, *, name: str, port: int = 0) -> None:
        import uvicorn  # here, not at the top: see the module docstring

        self.name = name
        self.port = port or free_port()
        config = uvicorn.Config(
            app,
            host=LOCALHOST,
            port=self.port,
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=1,  # do not wait for a hanging request
        )
        self._server: uvicorn.Server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name=name, daemon=True)

    def start(self) -> Self:
        self._thread.start()
        deadline = time.monotonic() + self.START_TIMEOUT_SECONDS
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the {self.name} did not start")
            time.sleep(0.02)
        return self

    def wait(self) -> None:
        """Block until the server exits (a command that serves until interrupted)."""
        self._thread.join()

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
