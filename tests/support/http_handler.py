"""The request handler the tests' small HTTP servers (`http.server` in a thread) build on."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any


class QuietHandler(BaseHTTPRequestHandler):
    """Logs nothing, and answers a request in one call."""

    def answer(
        self, status: int, body: bytes = b"", content_type: str | None = None, **headers: str
    ) -> None:
        """The status line, the content type (if any), `headers`, the length and `body`."""
        self.send_response(status)
        if content_type is not None:
            self.send_header("Content-Type", content_type)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)

    def answer_json(self, status: int, value: Any) -> None:
        self.answer(status, json.dumps(value).encode(), "application/json")

    def log_message(self, format: str, *args: Any) -> None:
        pass
