"""An HTTP endpoint that answers at once with its headers and then trickles the body, one byte
every `interval` seconds — per-read timeouts never fire on it, only a wall-clock limit does."""

from __future__ import annotations

import threading

from devtools.fake_llm import BackgroundHTTPServer, RequestHandler


class TrickleServer(BackgroundHTTPServer):
    def __init__(self, *, interval: float = 0.5, length: int = 10_000) -> None:
        super().__init__()
        self.interval = interval
        self.length = length
        self.requests = 0
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"{self.origin}/v1"

    def handle_request(self, handler: RequestHandler) -> None:
        handler.read_body()
        with self._lock:
            self.requests += 1
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(self.length))
        handler.end_headers()
        handler.wfile.flush()
        body = b'{"ok": true, "result": {"padding": "' + b" " * self.length
        for byte in body[: self.length]:
            if not self.sleep(self.interval):
                break
            try:
                handler.wfile.write(bytes([byte]))
                handler.wfile.flush()
            except OSError:  # the client gave up: that is the point
                break
        handler.close_connection = True
