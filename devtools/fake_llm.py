"""A scripted, OpenAI-compatible chat-completions server for tests.

The server speaks just enough of the OpenAI REST API for the real ``openai`` SDK to talk to it:

* ``POST /v1/chat/completions`` answers with the next scripted reply for the request's *step*;
* ``GET /v1/models`` answers with a one-model list;
* ``POST /v1/embeddings`` answers with a deterministic vector per input: a hashed bag of
  words (``embedding_vector``), so texts sharing words are close; ``llm.embedding_failures = n``
  fails the next ``n`` embeddings requests with HTTP 500. Requests are kept in
  ``llm.embedding_requests`` (their inputs).

The step of a request comes from the ``X-GuideDesk-Step`` header, falling back to the
``response_format.json_schema.name`` and finally to ``"unknown"``.

Usage::

    with FakeLLMServer() as llm:
        llm.script("assess", {"score": 3}, Fail(status=429, retry_after=1))
        client = openai.OpenAI(api_key="test", base_url=llm.base_url, max_retries=0)
        ...
        assert llm.calls("assess")[0].prompt_text.startswith("You are")

``llm.refuse("json_schema")`` makes the server refuse that response_format the way
llama-cpp-python does (HTTP 500 naming ``response_format``; pass ``status``/``message`` for a
400 variant); refused requests are recorded with ``refused=True`` and consume no scripted reply.
``Truncated(reply)`` answers with ``finish_reason: "length"``.

Prompt caching is emulated the way OpenAI documents it: a prompt of 1,024 tokens or more whose
beginning matches a recent request of the same caller (the same API key and model, and the same
``prompt_cache_key`` when one is sent) reports the matched prefix, in whole 128-token blocks, as
``usage.prompt_tokens_details.cached_tokens``. Tokens are the server's own count
(``count_prompt_tokens``): each message is its 4 framing tokens and its content in 4-character
pieces. ``FakeLLMServer(prompt_caching=False)`` turns it off; ``llm.usage_log`` keeps each
answered request's usage and ``llm.provider_cost(prices)`` prices it as a provider would.

A request with ``stream: true`` is answered as OpenAI streams: server-sent ``data:`` chunks
(``chat.completion.chunk``, the content in 4-character tokens), ``data: [DONE]`` at the end, and
with ``stream_options.include_usage`` a last chunk with no choices and the ``usage`` (cached
tokens included). The first token comes after ``first_token_seconds`` and each next one after
``token_seconds`` (both 0 by default; the load benchmark uses 0.3 s and 20 ms).
``ignore_stream=True`` answers a streamed request with one JSON completion, as a provider
without streaming would.

Only the standard library is used (with the stdlib-only `apps.platform.local_server`); Django
is deliberately not imported.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import re
import socket
import sys
import threading
import time
import uuid
import zlib
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any, ClassVar, Self, cast
from urllib.parse import urlsplit

from apps.platform.local_server import LocalRequestHandler, ServerThread, Serving

__all__ = [
    "BackgroundHTTPServer",
    "Delay",
    "Fail",
    "FakeLLMServer",
    "LLMFallback",
    "LLMReply",
    "NoUsage",
    "PromptCache",
    "RecordedRequest",
    "RequestHandler",
    "Truncated",
    "WithUsage",
    "assess_reply",
    "count_prompt_tokens",
    "count_tokens",
    "embedding_vector",
    "message_text",
    "prompt_token_pieces",
]

STEP_HEADER = "x-guidedesk-step"
UNKNOWN_STEP = "unknown"
TOKENS_PER_MESSAGE = 4
# Prompt caching (OpenAI's documented behaviour): prompts of at least this many tokens, a cached
# prefix counted in whole blocks of this size, remembered for this many block prefixes per server.
CACHE_MIN_TOKENS = 1024
CACHE_BLOCK_TOKENS = 128
CACHE_CAPACITY = 200_000
# Guard against reply callables that keep returning callables forever.
_MAX_REPLY_UNWRAPS = 64


# --------------------------------------------------------------------------------------------
# Shared HTTP plumbing (also used by fake_webhook.py)
# --------------------------------------------------------------------------------------------


class _ThreadingServer(ThreadingHTTPServer):
    daemon_threads = True
    owner: BackgroundHTTPServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (timeout, closed pool) is normal in tests: stay quiet about it.
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class RequestHandler(LocalRequestHandler):
    """Per-connection handler: HTTP/1.1 keep-alive, delegates every request to the owner."""

    server_version = "GuideDeskFake/1.0"

    @property
    def owner(self) -> BackgroundHTTPServer:
        return cast(_ThreadingServer, self.server).owner

    def setup(self) -> None:
        super().setup()
        self.owner._track(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.owner._untrack(self.connection)

    def _dispatch(self) -> None:
        self.owner.handle_request(self)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _dispatch

    @property
    def url_path(self) -> str:
        return urlsplit(self.path).path

    @property
    def lower_headers(self) -> dict[str, str]:
        return {key.lower(): value for key, value in self.headers.items()}

    def send_json(
        self, status: int, payload: Any, headers: Mapping[str, str] | None = None
    ) -> None:
        body = json.dumps(payload).encode()
        self.send(status, body, {"Content-Type": "application/json", **(headers or {})})

    def abandon(self) -> None:
        """Drop the connection without answering (used when the server is stopping)."""
        self.close_connection = True


class BackgroundHTTPServer(Serving):
    """A ``ThreadingHTTPServer`` on ``127.0.0.1:<ephemeral port>`` served from a daemon thread.

    Subclasses implement :meth:`handle_request`. ``stop()`` interrupts pending sleeps (see
    :meth:`sleep`) and closes open keep-alive connections, so it returns promptly.
    """

    host: ClassVar[str] = "127.0.0.1"

    def __init__(self) -> None:
        self._serving: ServerThread | None = None
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Self:
        if self._serving is not None:
            raise RuntimeError(f"{type(self).__name__} is already running")
        self._stopping.clear()
        httpd = _ThreadingServer((self.host, 0), RequestHandler)
        httpd.owner = self
        name = f"{type(self).__name__}-{httpd.server_address[1]}"
        self._serving = ServerThread(httpd, name=name, poll_interval=0.01).start()
        return self

    def stop(self) -> None:
        serving = self._serving
        if serving is None:
            return
        self._stopping.set()
        serving.stop(before_close=self._close_connections)
        self._serving = None

    def _close_connections(self) -> None:
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    @property
    def running(self) -> bool:
        return self._serving is not None

    @property
    def port(self) -> int:
        if self._serving is None:
            raise RuntimeError(f"{type(self).__name__} is not running; call start() first")
        return self._serving.port

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:<port>`` (no trailing slash)."""
        return f"http://{self.host}:{self.port}"

    # -- helpers for subclasses -------------------------------------------------------------

    def sleep(self, seconds: float) -> bool:
        """Sleep ``seconds``; return False if the server was stopped meanwhile."""
        if seconds <= 0:
            return not self._stopping.is_set()
        return not self._stopping.wait(seconds)

    def handle_request(self, handler: RequestHandler) -> None:
        raise NotImplementedError

    def _track(self, connection: socket.socket) -> None:
        with self._connections_lock:
            self._connections.add(connection)

    def _untrack(self, connection: socket.socket) -> None:
        with self._connections_lock:
            self._connections.discard(connection)


# --------------------------------------------------------------------------------------------
# Reply shapes
# --------------------------------------------------------------------------------------------


def assess_reply(response: str = "", **fields: Any) -> dict[str, Any]:
    """An ``assess`` (or ``synthesize``) reply: a confident answer with no tool and nothing
    missing, ``fields`` replacing any of that. The reply text comes last, in the order the
    schema asks for it, so a streamed reply shows its deciding fields first."""
    return {
        "tool_call": None,
        "tool_params": {},
        "confidence": 9,
        "missing_params": [],
        "is_destructive": False,
        "needs_confirmation": False,
        "needs_more_context": [],
        **fields,
        "response": response,
    }


# --------------------------------------------------------------------------------------------
# Token counting
# --------------------------------------------------------------------------------------------


EMBEDDING_DIMENSIONS = 64


def embedding_vector(text: str, dimensions: int = EMBEDDING_DIMENSIONS) -> list[float]:
    """A deterministic, normalised hashed bag of words (lower-cased words of 3+ letters, each
    adding 1 to the dimension its crc32 picks): texts sharing words point the same way."""
    vector = [0.0] * dimensions
    for word in re.findall(r"\w{3,}", text.lower()):
        vector[zlib.crc32(word.encode()) % dimensions] += 1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


def count_tokens(text: str) -> int:
    """Deterministic token approximation: ``max(1, ceil(len(text) / 4))``."""
    return max(1, math.ceil(len(text) / 4))


def message_text(message: Mapping[str, Any]) -> str:
    """The textual content of one chat message (string content or the text parts of a list)."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", "")) if isinstance(part, Mapping) else str(part)
            for part in content
        )
    return str(content)


def count_prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """Prompt tokens as the fake server bills them: ``count_tokens`` per content + 4/message."""
    return sum(count_tokens(message_text(m)) + TOKENS_PER_MESSAGE for m in messages)


def prompt_token_pieces(messages: list[dict[str, Any]]) -> list[str]:
    """The prompt as the server's tokens, for prefix caching: per message 4 framing tokens (its
    role) and its content in 4-character pieces (one empty piece for empty content), so
    ``len(prompt_token_pieces(m)) == count_prompt_tokens(m)``."""
    pieces: list[str] = []
    for message in messages:
        role = str(message.get("role", ""))
        text = message_text(message)
        pieces.extend(f"<{role}:{i}>" for i in range(TOKENS_PER_MESSAGE))
        pieces.extend([text[i : i + 4] for i in range(0, len(text), 4)] or [""])
    return pieces


class PromptCache:
    """Which prompt prefixes a caller sent recently, by the hash of every whole-block prefix
    (the first 128 tokens, the first 256, ...). Bounded: the oldest prefixes are forgotten."""

    def __init__(self, capacity: int = CACHE_CAPACITY) -> None:
        self.capacity = capacity
        self._seen: dict[tuple[str, str], None] = {}
        self._lock = threading.Lock()

    def lookup_and_store(self, caller: str, pieces: list[str]) -> int:
        """The cached tokens of this prompt (0 below 1,024 tokens or without a 1,024-token
        match), then remember its prefixes for the next requests."""
        import hashlib

        digest = hashlib.sha256()
        prefixes: list[str] = []
        for start in range(0, len(pieces) - len(pieces) % CACHE_BLOCK_TOKENS, CACHE_BLOCK_TOKENS):
            for piece in pieces[start : start + CACHE_BLOCK_TOKENS]:
                digest.update(piece.encode("utf-8", "surrogatepass"))
                digest.update(b"\x00")
            prefixes.append(digest.copy().hexdigest())
        cached = 0
        with self._lock:
            if len(pieces) >= CACHE_MIN_TOKENS:
                for blocks, key in enumerate(prefixes, start=1):
                    if (caller, key) not in self._seen:
                        break
                    cached = blocks * CACHE_BLOCK_TOKENS
                if cached < CACHE_MIN_TOKENS:
                    cached = 0
            for key in prefixes:
                self._seen.pop((caller, key), None)
                self._seen[(caller, key)] = None
            while len(self._seen) > self.capacity:
                self._seen.pop(next(iter(self._seen)))
        return cached

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()


# --------------------------------------------------------------------------------------------
# Scripting vocabulary
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordedRequest:
    """One chat-completion request as the server received it."""

    step: str
    body: dict[str, Any]
    headers: dict[str, str]  # lower-case keys
    messages: list[dict[str, Any]]
    prompt_text: str  # every message's content, joined with "\n"
    received_at: float = field(default_factory=time.monotonic)
    refused: bool = False  # answered with an error for its response_format (see `refuse`)

    @property
    def model(self) -> str | None:
        model = self.body.get("model")
        return model if isinstance(model, str) else None

    @property
    def response_format(self) -> dict[str, Any] | None:
        value = self.body.get("response_format")
        return value if isinstance(value, dict) else None

    @property
    def form(self) -> str:
        """How the request asked for JSON: ``json_schema``, ``json_object+schema`` (a
        json_object with a ``schema``, as llama-cpp-python accepts), ``json_object`` or
        ``text`` (no response_format)."""
        fmt = self.response_format
        if fmt is None:
            return "text"
        kind = str(fmt.get("type"))
        if kind == "json_object" and isinstance(fmt.get("schema"), dict):
            return "json_object+schema"
        return kind

    @property
    def json_schema(self) -> dict[str, Any] | None:
        """``response_format.json_schema.schema`` when the request used json_schema mode."""
        fmt = self.response_format or {}
        spec = fmt.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        return schema if isinstance(schema, dict) else None


@dataclass(frozen=True)
class Fail:
    """Answer with an HTTP error and an OpenAI-style ``{"error": {...}}`` body.

    ``body`` replaces the default envelope: a dict is sent as JSON, a str is sent verbatim
    (e.g. an HTML error page from a proxy).
    """

    status: int = 500
    body: dict[str, Any] | str | None = None
    retry_after: float | str | None = None
    message: str | None = None


@dataclass(frozen=True)
class Delay:
    """Sleep ``seconds`` and then answer with ``then`` (use it to trigger client timeouts)."""

    seconds: float
    then: LLMReply


@dataclass(frozen=True)
class WithUsage:
    """Answer with ``reply`` but report these token counts (None = counted as usual)."""

    reply: LLMReply
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


@dataclass(frozen=True)
class Truncated:
    """Answer with ``reply`` cut off: ``finish_reason: "length"`` (the reply hit max_tokens).
    ``completion_tokens`` defaults to the request's ``max_tokens`` when it has one."""

    reply: LLMReply
    completion_tokens: int | None = None


@dataclass(frozen=True)
class NoUsage:
    """Answer with ``reply`` and omit the ``usage`` object (providers that report none)."""

    reply: LLMReply


type LLMReply = (
    dict[str, Any]
    | str
    | Fail
    | Delay
    | WithUsage
    | NoUsage
    | Truncated
    | Callable[[RecordedRequest], LLMReply]
)
"""A scripted reply: dict (JSON content), str (verbatim content), wrapper or callable."""

type LLMFallback = Callable[[RecordedRequest], LLMReply | None]
"""Global handler used when a step has neither queued replies nor a default; None = pass."""


_ERROR_TYPES: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("not_found_error", None),
    409: ("conflict_error", None),
    422: ("invalid_request_error", None),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}


def _error_envelope(status: int, message: str) -> dict[str, Any]:
    if status in _ERROR_TYPES:
        error_type, code = _ERROR_TYPES[status]
    elif status >= 500:
        error_type, code = "server_error", "server_error"
    else:
        error_type, code = "invalid_request_error", None
    return {"error": {"message": message, "type": error_type, "param": None, "code": code}}


@dataclass(frozen=True)
class _Response:
    status: int
    body: bytes
    headers: dict[str, str]
    stream: Iterator[bytes] | None = None  # a body written as it is produced (SSE)

    @classmethod
    def json(cls, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> _Response:
        return cls(
            status,
            json.dumps(payload).encode(),
            {"Content-Type": "application/json", **(headers or {})},
        )

    @classmethod
    def error(cls, status: int, message: str) -> _Response:
        return cls.json(status, _error_envelope(status, message))


# --------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------


class FakeLLMServer(BackgroundHTTPServer):
    """Scripted OpenAI-compatible server; see the module docstring."""

    def __init__(
        self,
        *,
        latency: float = 0.0,
        model: str = "fake-model",
        prompt_caching: bool = True,
        first_token_seconds: float = 0.0,
        token_seconds: float = 0.0,
        ignore_stream: bool = False,
    ) -> None:
        super().__init__()
        self.latency = latency
        # Streamed replies (``stream: true``): the first token after this, each next after that.
        self.first_token_seconds = first_token_seconds
        self.token_seconds = token_seconds
        self.ignore_stream = ignore_stream
        self.model = model
        self.prompt_caching = prompt_caching
        self.prompt_cache = PromptCache()
        # One entry per answered request that reported usage: model, prompt, cached, completion.
        self.usage_log: list[dict[str, Any]] = []
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._queues: dict[str, deque[LLMReply]] = {}
        self._defaults: dict[str, LLMReply] = {}
        self._fallback: LLMFallback | None = None
        self._refused: dict[str, tuple[int, str]] = {}
        self.embedding_requests: list[list[str]] = []
        self.embedding_failures = 0

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1`` — pass it to ``openai.OpenAI(base_url=...)``."""
        return f"{self.origin}/v1"

    # -- scripting ---------------------------------------------------------------------------

    def script(self, step: str, *replies: LLMReply) -> None:
        """Append ``replies`` to the FIFO queue of ``step``."""
        with self._lock:
            self._queues.setdefault(step, deque()).extend(replies)

    def default(self, step: str, reply: LLMReply | None) -> None:
        """Reply used whenever ``step``'s queue is empty (None removes it)."""
        with self._lock:
            if reply is None:
                self._defaults.pop(step, None)
            else:
                self._defaults[step] = reply

    def fallback(self, handler: LLMFallback | None) -> None:
        """Global handler for requests no queue/default covers; it may return None to pass."""
        with self._lock:
            self._fallback = handler

    def refuse(self, *forms: str, status: int = 500, message: str | None = None) -> None:
        """Refuse requests whose response_format is one of ``forms`` (see
        ``RecordedRequest.form``) with HTTP ``status``. The default message is what
        llama-cpp-python's server says of a json_schema response_format (its pydantic error,
        naming ``response_format``)."""
        with self._lock:
            for form in forms:
                self._refused[form] = (status, message or _refusal_message(form))

    def accept_all_formats(self) -> None:
        """Refuse no response_format any more (undoes ``refuse``)."""
        with self._lock:
            self._refused.clear()

    def pending(self, step: str | None = None) -> int:
        """Number of queued, not yet consumed replies (for one step or all steps)."""
        with self._lock:
            if step is not None:
                return len(self._queues.get(step, ()))
            return sum(len(queue) for queue in self._queues.values())

    def calls(self, step: str | None = None) -> list[RecordedRequest]:
        """Recorded chat-completion requests, optionally only those of ``step``."""
        with self._lock:
            return [r for r in self.requests if step is None or r.step == step]

    def reset(self) -> None:
        """Forget recorded requests, queued replies, defaults and the fallback."""
        with self._lock:
            self.requests.clear()
            self._queues.clear()
            self._defaults.clear()
            self._fallback = None
            self._refused.clear()
            self.embedding_requests.clear()
            self.embedding_failures = 0
            self.usage_log.clear()
        self.prompt_cache.clear()

    def provider_cost(self, prices: Mapping[str, tuple[Any, Any, Any]]) -> Any:
        """What this provider would invoice for the requests in ``usage_log``, in USD (a
        ``Decimal``): per model ``(input, cached input, output)`` USD per million tokens; the
        uncached prompt tokens at the input price, the cached ones at the cached price. Models
        without a price cost nothing. Each request is rounded half up to 8 places, as a
        provider's per-request ledger would be."""
        from decimal import ROUND_HALF_UP, Decimal

        total = Decimal(0)
        with self._lock:
            log = list(self.usage_log)
        for entry in log:
            price = prices.get(entry["model"])
            if price is None:
                continue
            inp, cached, out = (Decimal(str(p)) for p in price)
            uncached = entry["prompt_tokens"] - entry["cached_tokens"]
            cost = (
                Decimal(uncached) * inp
                + Decimal(entry["cached_tokens"]) * cached
                + Decimal(entry["completion_tokens"]) * out
            ) / Decimal(1_000_000)
            total += cost.quantize(Decimal("0.00000001"), rounding=ROUND_HALF_UP)
        return total

    # -- HTTP --------------------------------------------------------------------------------

    def handle_request(self, handler: RequestHandler) -> None:
        body = handler.read_body()
        path = handler.url_path.rstrip("/")
        response: _Response | None
        if handler.command == "GET" and path == "/v1/models":
            response = self._models()
        elif handler.command == "POST" and path == "/v1/chat/completions":
            response = self._chat_completion(body, handler.lower_headers)
        elif handler.command == "POST" and path == "/v1/embeddings":
            response = self._embeddings(body)
        else:
            response = _Response.error(404, f"{handler.command} {handler.path} is not faked")
        if response is None:
            handler.abandon()
        elif response.stream is not None:
            handler.send_chunked(response.status, response.stream, response.headers)
        else:
            handler.send(response.status, response.body, response.headers)

    def _embeddings(self, raw: bytes) -> _Response:
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return _Response.error(400, "the body is not JSON")
        inputs = body.get("input")
        if isinstance(inputs, str):
            inputs = [inputs]
        if not isinstance(inputs, list) or not all(isinstance(i, str) for i in inputs):
            return _Response.error(400, "input must be a string or a list of strings")
        with self._lock:
            self.embedding_requests.append(list(inputs))
            if self.embedding_failures > 0:
                self.embedding_failures -= 1
                return _Response.error(500, "scripted embeddings failure")
        data = [
            {"object": "embedding", "index": i, "embedding": embedding_vector(text)}
            for i, text in enumerate(inputs)
        ]
        tokens = sum(count_tokens(t) for t in inputs)
        return _Response.json(
            200,
            {
                "object": "list",
                "data": data,
                "model": body.get("model") or self.model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )

    def _models(self) -> _Response:
        model = {"id": self.model, "object": "model", "created": 0, "owned_by": "guidedesk-fake"}
        return _Response.json(200, {"object": "list", "data": [model]})

    def _chat_completion(self, raw: bytes, headers: dict[str, str]) -> _Response | None:
        try:
            body = json.loads(raw)
        except ValueError:
            return _Response.error(400, "request body is not valid JSON")
        if not isinstance(body, dict):
            return _Response.error(400, "request body must be a JSON object")
        messages = body.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            return _Response.error(400, "'messages' must be a list of objects")

        request = RecordedRequest(
            step=_resolve_step(body, headers),
            body=body,
            headers=headers,
            messages=messages,
            prompt_text="\n".join(message_text(m) for m in messages),
        )
        with self._lock:
            refusal = self._refused.get(request.form)
            if refusal is not None:
                request = dataclasses.replace(request, refused=True)
            self.requests.append(request)

        if not self.sleep(self.latency):
            return None
        if refusal is not None:
            return _Response.error(*refusal)

        reply = self._next_reply(request)
        if reply is None:
            return _Response.error(500, f"no scripted reply for step {request.step!r}")
        return self._render(request, reply)

    def _next_reply(self, request: RecordedRequest) -> LLMReply | None:
        with self._lock:
            queue = self._queues.get(request.step)
            if queue:
                return queue.popleft()
            if request.step in self._defaults:
                return self._defaults[request.step]
            fallback = self._fallback
        return fallback(request) if fallback is not None else None

    def _render(self, request: RecordedRequest, reply: LLMReply) -> _Response | None:
        settled = self._settle(request, reply)
        if not isinstance(settled, _Settled):
            return settled
        completion: dict[str, Any] = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.model or self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": settled.content, "refusal": None},
                    "logprobs": None,
                    "finish_reason": settled.finish_reason,
                }
            ],
        }
        if settled.include_usage:
            completion["usage"] = self._usage(request, settled, completion["model"])
        if request.body.get("stream") and not self.ignore_stream:
            return self._streamed(request, completion, settled.content)
        return _Response.json(200, completion)

    def _settle(self, request: RecordedRequest, reply: LLMReply) -> _Settled | _Response | None:
        """Unwrap the scripted reply (delays, usage overrides, truncation, callables) down to
        its text; an error response for a failure, None when the server is stopping."""
        settled = _Settled()
        current: LLMReply = reply
        for _ in range(_MAX_REPLY_UNWRAPS):
            if isinstance(current, Fail):
                return _fail_response(current)
            if isinstance(current, dict):
                settled.content = json.dumps(current, ensure_ascii=False)
                return settled
            if isinstance(current, str):
                settled.content = current
                return settled
            if isinstance(current, Delay):
                if not self.sleep(current.seconds):
                    return None
                current = current.then
            elif isinstance(current, WithUsage | NoUsage | Truncated):
                current = settled.unwrap(current, request)
            elif callable(current):
                try:
                    current = current(request)
                except Exception as exc:  # surface handler bugs as a loud 500
                    return _Response.error(
                        500, f"scripted reply callable raised {type(exc).__name__}: {exc}"
                    )
            else:
                return _Response.error(500, f"unsupported scripted reply: {current!r}")
        return _Response.error(500, "scripted reply callables did not settle on a reply")

    def _usage(self, request: RecordedRequest, settled: _Settled, model: str) -> dict[str, Any]:
        """The completion's `usage` (overrides first), logged for the test to read."""
        prompt_tokens = (
            count_prompt_tokens(request.messages)
            if settled.prompt_tokens is None
            else settled.prompt_tokens
        )
        completion_tokens = (
            count_tokens(settled.content)
            if settled.completion_tokens is None
            else settled.completion_tokens
        )
        cached_tokens = 0
        if self.prompt_caching:
            cached_tokens = self.prompt_cache.lookup_and_store(
                _cache_caller(request), prompt_token_pieces(request.messages)
            )
            cached_tokens = min(cached_tokens, prompt_tokens)
        with self._lock:
            self.usage_log.append(
                {
                    "step": request.step,
                    "model": model,
                    "prompt_tokens": prompt_tokens,
                    "cached_tokens": cached_tokens,
                    "completion_tokens": completion_tokens,
                }
            )
        return {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached_tokens},
        }

    def _streamed(
        self, request: RecordedRequest, completion: dict[str, Any], content: str
    ) -> _Response:
        """``completion`` as OpenAI streams it: a role chunk, the content token by token (each
        a 4-character piece, as ``count_tokens`` counts them), a chunk with the finish reason,
        the usage chunk when ``stream_options.include_usage`` asks for it, then ``[DONE]``."""
        options = request.body.get("stream_options")
        with_usage = isinstance(options, dict) and bool(options.get("include_usage"))
        choice = completion["choices"][0]
        head = {k: completion[k] for k in ("id", "created", "model")}
        head["object"] = "chat.completion.chunk"

        def event(payload: dict[str, Any]) -> bytes:
            return b"data: " + json.dumps({**head, **payload}).encode() + b"\n\n"

        def chunks() -> Iterator[bytes]:
            yield event(
                {"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}
            )
            pieces = [content[i : i + 4] for i in range(0, len(content), 4)]
            for index, piece in enumerate(pieces):
                wait = self.first_token_seconds if index == 0 else self.token_seconds
                if not self.sleep(wait):
                    return
                delta = {"content": piece}
                yield event({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
            finish = {"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}
            yield event({"choices": [finish]})
            if with_usage and "usage" in completion:
                yield event({"choices": [], "usage": completion["usage"]})
            yield b"data: [DONE]\n\n"

        headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        return _Response(200, b"", headers, stream=chunks())


def _refusal_message(form: str) -> str:
    """What llama-cpp-python's server answers (HTTP 500) to a response_format it lacks."""
    kind = "json_object" if form == "json_object+schema" else form
    return (
        "[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
        "'msg': \"Input should be 'text' or 'json_object'\", "
        f"'input': '{kind}', 'ctx': {{'expected': \"'text' or 'json_object'\"}}}}]"
    )


def _cache_caller(request: RecordedRequest) -> str:
    """Whose cache a request reads: its API key, model and ``prompt_cache_key``."""
    key = request.body.get("prompt_cache_key")
    return "\x00".join(
        [request.headers.get("authorization", ""), request.model or "", str(key or "")]
    )


def _resolve_step(body: Mapping[str, Any], headers: Mapping[str, str]) -> str:
    header = headers.get(STEP_HEADER, "").strip()
    if header:
        return header
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and isinstance(fmt.get("json_schema"), dict):
        name = fmt["json_schema"].get("name")
        if isinstance(name, str) and name:
            return name
    return UNKNOWN_STEP


@dataclass
class _Settled:
    """A scripted reply unwrapped to its text, with what its wrappers said about usage."""

    content: str = ""
    finish_reason: str = "stop"
    include_usage: bool = True
    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    def unwrap(self, wrapper: WithUsage | NoUsage | Truncated, request: RecordedRequest) -> Any:
        """Take what `wrapper` says; the reply it wraps."""
        if isinstance(wrapper, NoUsage):
            self.include_usage = False
        elif isinstance(wrapper, WithUsage):
            if wrapper.prompt_tokens is not None:
                self.prompt_tokens = wrapper.prompt_tokens
            if wrapper.completion_tokens is not None:
                self.completion_tokens = wrapper.completion_tokens
        else:
            self.finish_reason = "length"
            max_tokens = request.body.get("max_tokens")
            if wrapper.completion_tokens is not None:
                self.completion_tokens = wrapper.completion_tokens
            elif isinstance(max_tokens, int):
                self.completion_tokens = max_tokens
        return wrapper.reply


def _fail_response(fail: Fail) -> _Response:
    headers: dict[str, str] = {}
    if fail.retry_after is not None:
        value = fail.retry_after
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        headers["Retry-After"] = str(value)
    if isinstance(fail.body, str):
        return _Response(
            fail.status,
            fail.body.encode(),
            {"Content-Type": "text/plain; charset=utf-8", **headers},
        )
    payload = fail.body
    if payload is None:
        payload = _error_envelope(fail.status, fail.message or f"fake error {fail.status}")
    return _Response.json(fail.status, payload, headers)
