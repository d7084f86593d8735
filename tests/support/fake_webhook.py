"""A local tool-webhook server for tests.

GuideDesk POSTs ``{"tool", "params", "conversation_id", "idempotency_key"}`` with the headers
``Idempotency-Key`` and ``X-GuideDesk-Signature: sha256=<hex HMAC-SHA256 of the raw body>``, and
expects ``{"ok": true, "result": {...}}`` or ``{"ok": false, "error": "..."}`` back.

Usage::

    with FakeWebhookServer(dedupe=True) as hook:
        hook.script(Reply.fail("boom", status=500), Reply.ok({"booking_id": 7}))
        tool.url = hook.url()
        ...
        assert verify_signature(hook.requests[0], "s3cret")
        assert hook.executed_count == 2

With nothing scripted and no default, every request gets ``200 {"ok": true, "result":
{"echo": <params>}}``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from devtools.fake_llm import BackgroundHTTPServer, RequestHandler

__all__ = [
    "FakeWebhookServer",
    "Reply",
    "WebhookReply",
    "WebhookRequest",
    "sign",
    "verify_signature",
]

SIGNATURE_HEADER = "x-guidedesk-signature"
IDEMPOTENCY_HEADER = "idempotency-key"
SIGNATURE_PREFIX = "sha256="


@dataclass
class WebhookRequest:
    """One request as the webhook received it."""

    method: str
    path: str
    query: str
    headers: dict[str, str]  # lower-case keys
    raw_body: bytes
    json: Any  # parsed body, or None when it was not valid JSON
    received_at: float = field(default_factory=time.monotonic)
    replayed: bool = False  # dedupe mode: answered from the idempotency store, not executed

    @property
    def idempotency_key(self) -> str | None:
        return self.headers.get(IDEMPOTENCY_HEADER)

    @property
    def signature(self) -> str | None:
        return self.headers.get(SIGNATURE_HEADER)

    def _field(self, name: str) -> Any:
        return self.json.get(name) if isinstance(self.json, dict) else None

    @property
    def tool(self) -> Any:
        return self._field("tool")

    @property
    def params(self) -> Any:
        return self._field("params")

    @property
    def conversation_id(self) -> Any:
        return self._field("conversation_id")


@dataclass(frozen=True)
class Reply:
    """A scripted webhook response.

    ``json`` is serialised as the body; ``body`` (bytes/str) is sent verbatim instead, to test
    non-JSON answers. With neither, the body is empty. ``delay`` sleeps before answering.
    """

    status: int = 200
    json: Any = None
    delay: float = 0.0
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes | str | None = None

    @classmethod
    def ok(cls, result: Any = None, *, status: int = 200, delay: float = 0.0) -> Reply:
        """``{"ok": true, "result": result}`` (result defaults to ``{}``)."""
        return cls(status, {"ok": True, "result": {} if result is None else result}, delay)

    @classmethod
    def fail(cls, error: str, *, status: int = 200, delay: float = 0.0) -> Reply:
        """``{"ok": false, "error": error}`` — pass ``status=500`` etc. for an HTTP failure."""
        return cls(status, {"ok": False, "error": error}, delay)


type WebhookReply = Reply | Callable[[WebhookRequest], Reply]


def sign(body: bytes, secret: str | bytes) -> str:
    """The ``X-GuideDesk-Signature`` value for ``body``: ``sha256=<hex hmac>``."""
    key = secret.encode() if isinstance(secret, str) else secret
    return SIGNATURE_PREFIX + hmac.new(key, body, hashlib.sha256).hexdigest()


def verify_signature(request: WebhookRequest, secret: str | bytes) -> bool:
    """True iff the request's signature header is the HMAC-SHA256 of its raw body."""
    received = request.signature
    if received is None:
        return False
    return hmac.compare_digest(received.strip().encode(), sign(request.raw_body, secret).encode())


@dataclass(frozen=True)
class _Stored:
    status: int
    body: bytes
    headers: dict[str, str]

    @property
    def successful(self) -> bool:
        return 200 <= self.status < 300


def _error(status: int, message: str) -> _Stored:
    body = json.dumps({"ok": False, "error": message}).encode()
    return _Stored(status, body, {"Content-Type": "application/json"})


def _fingerprint(request: WebhookRequest) -> str:
    if request.json is not None:
        return json.dumps(request.json, sort_keys=True)
    return request.raw_body.hex()


class FakeWebhookServer(BackgroundHTTPServer):
    """Scripted tool webhook; see the module docstring.

    ``dedupe=True`` makes it behave like a well-behaved idempotent backend: a request whose
    ``Idempotency-Key`` already produced a 2xx gets the stored response replayed byte-for-byte
    (without executing again); concurrent requests with the same key are serialised; reusing a
    key with a different payload gets 422. Non-2xx outcomes are not stored, so retries execute.
    """

    def __init__(self, *, dedupe: bool = False) -> None:
        super().__init__()
        self.dedupe = dedupe
        self.requests: list[WebhookRequest] = []
        self._lock = threading.Lock()
        self._queue: deque[WebhookReply] = deque()
        self._default: WebhookReply | None = None
        self._executed = 0
        self._completed: dict[str, tuple[str, _Stored]] = {}
        self._key_locks: dict[str, threading.Lock] = {}

    verify_signature = staticmethod(verify_signature)

    def url(self, path: str = "/hook") -> str:
        return f"{self.origin}/{path.lstrip('/')}"

    # -- scripting ---------------------------------------------------------------------------

    def script(self, *replies: WebhookReply) -> None:
        """Append ``replies`` to the FIFO queue."""
        with self._lock:
            self._queue.extend(replies)

    def default(self, reply: WebhookReply | None) -> None:
        """Reply used when the queue is empty (None restores the echo behaviour)."""
        with self._lock:
            self._default = reply

    @property
    def executed_count(self) -> int:
        """Distinct executions: requests that ran a scripted/default reply (not replays)."""
        with self._lock:
            return self._executed

    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def calls(self, path: str | None = None) -> list[WebhookRequest]:
        with self._lock:
            return [r for r in self.requests if path is None or r.path == path]

    def reset(self) -> None:
        """Forget requests, queued replies, the default, the idempotency store and counters."""
        with self._lock:
            self.requests.clear()
            self._queue.clear()
            self._default = None
            self._executed = 0
            self._completed.clear()
            self._key_locks.clear()

    # -- HTTP --------------------------------------------------------------------------------

    def handle_request(self, handler: RequestHandler) -> None:
        raw = handler.read_body()
        if handler.command != "POST":
            stored: _Stored | None = _error(405, f"{handler.command} not allowed; POST only")
        else:
            try:
                parsed: Any = json.loads(raw) if raw else None
            except ValueError:
                parsed = None
            path, _, query = handler.path.partition("?")
            request = WebhookRequest(
                method=handler.command,
                path=path,
                query=query,
                headers=handler.lower_headers,
                raw_body=raw,
                json=parsed,
            )
            with self._lock:
                self.requests.append(request)
            stored = self._respond(request)
        if stored is None:
            handler.abandon()
        else:
            handler.send(stored.status, stored.body, stored.headers)

    def _respond(self, request: WebhookRequest) -> _Stored | None:
        key = request.idempotency_key if self.dedupe else None
        if key is None:
            return self._execute(request)
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:  # a duplicate in flight waits for the first one's outcome
            with self._lock:
                previous = self._completed.get(key)
            fingerprint = _fingerprint(request)
            if previous is not None:
                if previous[0] != fingerprint:
                    return _error(422, f"Idempotency-Key {key!r} reused with a different payload")
                request.replayed = True
                return previous[1]
            stored = self._execute(request)
            if stored is not None and stored.successful:
                with self._lock:
                    self._completed[key] = (fingerprint, stored)
            return stored

    def _execute(self, request: WebhookRequest) -> _Stored | None:
        with self._lock:
            self._executed += 1
            scripted = self._queue.popleft() if self._queue else self._default
        if scripted is None:
            reply = Reply(200, {"ok": True, "result": {"echo": request.params}})
        elif isinstance(scripted, Reply):
            reply = scripted
        else:
            try:
                reply = scripted(request)
            except Exception as exc:  # surface handler bugs as a loud 500
                return _error(500, f"fake webhook handler raised {type(exc).__name__}: {exc}")
            if not isinstance(reply, Reply):
                return _error(500, f"fake webhook handler returned {reply!r}, not a Reply")
        if not self.sleep(reply.delay):
            return None
        return _materialise(reply)


def _materialise(reply: Reply) -> _Stored:
    headers = dict(reply.headers)
    has_content_type = any(name.lower() == "content-type" for name in headers)
    if reply.body is not None:
        body = reply.body.encode() if isinstance(reply.body, str) else reply.body
        default_type = "text/plain; charset=utf-8"
    elif reply.json is not None:
        body = json.dumps(reply.json).encode()
        default_type = "application/json"
    else:
        body, default_type = b"", ""
    if default_type and not has_content_type:
        headers["Content-Type"] = default_type
    return _Stored(reply.status, body, headers)
