"""A local HTTP server run from a daemon thread: the certificate's agents, proxy and retail app,
and the test suite's fake model and MCP server, all start, answer and stop the same way.

`ServerThread` serves a standard-library server (`ThreadingHTTPServer`), `UvicornThread` an ASGI
app under uvicorn; both bind 127.0.0.1 and, unless told a port, a free one. `Serving` gives a
class with `start()`/`stop()` its `with` block.

Only the standard library is imported at module level: the fake model (devtools/fake_llm.py)
builds on this module and deliberately runs without Django or uvicorn.
"""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    import uvicorn

LOCALHOST = "127.0.0.1"


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
