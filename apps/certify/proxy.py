"""An error-injecting, OpenAI-compatible proxy between an agent (GuideDesk, a bare agent) and a
model, for the reliability certificate.

`POST …/chat/completions` (streamed or not) is forwarded to the upstream; with a seeded RNG, at
`rate` per response, ONE injection class from the enabled list rewrites the model's message
(`apps/certify/injections.py`: a destructive call without asking, wrong parameters, an invented
tool, an invented policy figure, a false promise, malformed JSON, a truncated reply, obeying an
instruction hidden in a tool result or article, the wrong language). Every other path is passed
through. A response that is not injected is relayed byte for byte.

Deterministic: the n-th chat-completion request draws, as it arrives, the same two numbers
(whether, which class) for the same seed, so the same seed and the same request sequence give
the same injections. The class drawn is tried first; when it does not apply to that message
(no tool call to alter, no tool result to obey…) the next enabled class in order that
applies is used, and when none does the draw is logged as skipped.

Every draw that injects (or is skipped) is one JSON line in the log: `request_id`,
`completion_id` (the upstream's), `step` (`X-GuideDesk-Step`), `class`, `shape` (guidedesk |
openai), `changed`, `before` and `after` (the message), `stream`. An injected response also
carries the `X-Injection-Id` header (the `request_id`).

    proxy = InjectingProxy(upstream="http://127.0.0.1:8080/v1", rate=0.2, seed=1)
    proxy.start(); ...; proxy.stop()          # or: with InjectingProxy(...) as proxy:

    python -m apps.certify.proxy --upstream URL --rate 0.2 --seed 1 \\
        --classes destructive_unasked,wrong_params --log injections.jsonl [--port 8090]

Plain Python (no Django): it sits in front of any model, outside GuideDesk.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
import threading
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self, cast

import httpx

from apps.certify.injections import CLASSES, guidedesk_output, inject
from apps.platform.local_server import LocalRequestHandler, ServerThread, Serving

HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "content-encoding",
    "host",
    "accept-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-connection",
}
STEP_HEADER = "x-guidedesk-step"
STREAM_PIECE = 4  # characters per re-emitted content chunk, as the fake and offline models do


@dataclass
class Draw:
    """What the RNG decided for one response."""

    seq: int
    request_id: str
    inject: bool
    order: list[str] = field(default_factory=list)  # classes to try, the drawn one first


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    proxy: InjectingProxy


class _Handler(LocalRequestHandler):
    """Every request goes to the proxy (quietly: the injection log is the record)."""

    def _dispatch(self) -> None:
        cast(_Server, self.server).proxy.handle(self)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _dispatch


class InjectingProxy(Serving):
    """The proxy, served from a daemon thread on `host:port` (0 = any free port)."""

    def __init__(
        self,
        *,
        upstream: str,
        rate: float,
        seed: int,
        classes: list[str] | None = None,
        log_path: str | Path | None = None,
        destructive_tools: list[str] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        timeout: float = 120.0,
    ) -> None:
        unknown = sorted(set(classes or []) - set(CLASSES))
        if unknown:
            raise ValueError(f"unknown injection classes: {', '.join(unknown)}")
        if not 0 <= rate <= 1:
            raise ValueError("rate must be between 0 and 1")
        self.upstream = upstream.rstrip("/")
        self.rate = rate
        self.seed = seed
        self.classes = list(classes or CLASSES)
        self.log_path = Path(log_path) if log_path else None
        self.destructive = frozenset(destructive_tools) if destructive_tools else None
        self.host, self._port = host, port
        self.timeout = timeout
        self.injections: list[dict[str, Any]] = []  # the log, also kept in memory
        # Seeded on purpose: the same seed must give the same injections (not for secrets).
        self._rng = random.Random(seed)  # noqa: S311
        self._seq = 0
        self._lock = threading.Lock()
        self._serving: ServerThread | None = None
        self._http: httpx.Client | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> Self:
        if self._serving is not None:
            raise RuntimeError("the proxy is already running")
        server = _Server((self.host, self._port), _Handler)
        server.proxy = self
        self._http = httpx.Client(timeout=self.timeout)
        self._serving = ServerThread(server).start()
        return self

    def stop(self) -> None:
        if self._serving is None:
            return
        self._serving.stop()
        if self._http is not None:
            self._http.close()
        self._serving = self._http = None

    @property
    def port(self) -> int:
        if self._serving is None:
            raise RuntimeError("the proxy is not running")
        return self._serving.port

    @property
    def base_url(self) -> str:
        """`http://host:port/v1` — the `OPENAI_BASE_URL` to give the agent."""
        return f"http://{self.host}:{self.port}/v1"

    # -- the decision ---------------------------------------------------------------------------

    def _draw(self) -> Draw:
        with self._lock:
            self._seq += 1
            roll = self._rng.random()
            first = self._rng.randrange(len(self.classes))
            seq = self._seq
        order = self.classes[first:] + self.classes[:first]
        return Draw(seq, f"inj-{self.seed}-{seq:06d}", roll < self.rate, order)

    def _record(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self.injections.append(entry)
            if self.log_path is not None:
                with self.log_path.open("a", encoding="utf-8") as log:
                    log.write(json.dumps(entry, ensure_ascii=False) + "\n")

    def _rewrite(
        self, draw: Draw, message: dict[str, Any], request: dict[str, Any], meta: dict[str, Any]
    ) -> tuple[dict[str, Any], str | None]:
        """The message after the draw's injection (and its class), logged either way."""
        for name in draw.order:
            rewrite = inject(name, message, request, destructive=self.destructive)
            if rewrite is not None:
                self._record(
                    meta
                    | {
                        "class": name,
                        "applied": True,
                        "shape": "guidedesk" if guidedesk_output(message) else "openai",
                        "changed": rewrite.changed,
                        "before": message,
                        "after": rewrite.message,
                    }
                )
                return rewrite.message, name
        self._record(meta | {"class": None, "applied": False, "tried": draw.order})
        return message, None

    def rewrite_in_process(
        self, message: dict[str, Any], request: dict[str, Any], *, step: str | None = None
    ) -> tuple[dict[str, Any], str | None]:
        """The same seeded draw and rewrite for a model that answers in-process (GuideDesk's
        offline model, which no HTTP proxy can sit in front of): `message` as the proxy
        would have relayed it, and the class applied (None: not injected). Logged alike."""
        draw = self._draw()
        if not draw.inject:
            return message, None
        meta = {"request_id": draw.request_id, "seq": draw.seq, "step": step, "stream": False}
        return self._rewrite(draw, message, request, meta)

    # -- HTTP ---------------------------------------------------------------------------------

    def _upstream_url(self, path: str) -> str:
        return self.upstream + (path[3:] if path.startswith("/v1") else path)

    def handle(self, handler: _Handler) -> None:
        body = handler.read_body()
        headers = [(k, v) for k, v in handler.headers.items() if k.lower() not in HOP_BY_HOP]
        headers.append(("Accept-Encoding", "identity"))
        path = handler.path.split("?", 1)[0].rstrip("/")
        request: Any = None
        if handler.command == "POST" and path.endswith("/chat/completions"):
            with contextlib.suppress(ValueError):
                request = json.loads(body)
        if not isinstance(request, dict):
            request = None
        # Drawn as the request arrives (not as answers come back), so concurrent calls to a
        # slow model keep the seed's order; a draw an error response cannot use is spent.
        draw = self._draw() if request is not None else None
        assert self._http is not None
        upstream = self._http.build_request(
            handler.command, self._upstream_url(handler.path), headers=headers, content=body
        )
        try:
            response = self._http.send(upstream, stream=True)
        except httpx.HTTPError as exc:
            message = json.dumps({"error": {"message": f"upstream: {exc}", "type": "proxy"}})
            handler.send(502, message.encode(), [("Content-Type", "application/json")])
            return
        try:
            self._answer(handler, response, request, draw)
        finally:
            response.close()

    def _answer(
        self,
        handler: _Handler,
        response: httpx.Response,
        request: dict[str, Any] | None,
        draw: Draw | None,
    ) -> None:
        out_headers = [(k, v) for k, v in response.headers.items() if k.lower() not in HOP_BY_HOP]
        streamed = "text/event-stream" in response.headers.get("content-type", "")
        if draw is None or not draw.inject or response.status_code != 200:
            if streamed:
                handler.send_chunked(response.status_code, response.iter_raw(), out_headers)
            else:
                handler.send(response.status_code, response.read(), out_headers)
            return
        assert request is not None
        meta = {
            "request_id": draw.request_id,
            "seq": draw.seq,
            "step": _step(request, handler),
            "stream": streamed,
        }
        out_headers.append(("X-Injection-Id", draw.request_id))
        if streamed:
            events = _sse_events(b"".join(response.iter_raw()))
            chunks = self._rewrite_stream(draw, events, request, meta)
            handler.send_chunked(200, iter(chunks), out_headers)
        else:
            body = self._rewrite_completion(draw, response.read(), request, meta)
            handler.send(200, body, out_headers)

    def _rewrite_completion(
        self, draw: Draw, raw: bytes, request: dict[str, Any], meta: dict[str, Any]
    ) -> bytes:
        try:
            completion = json.loads(raw)
            choice = completion["choices"][0]
            message = choice["message"]
        except (ValueError, KeyError, IndexError, TypeError):
            self._record(meta | {"class": None, "applied": False, "tried": []})
            return raw
        meta["completion_id"] = completion.get("id")
        new, name = self._rewrite(draw, message, request, meta)
        if name is None:
            return raw
        choice["message"] = new
        if name == "truncated":
            choice["finish_reason"] = "length"
        elif not new.get("tool_calls") and choice.get("finish_reason") == "tool_calls":
            choice["finish_reason"] = "stop"
        elif new.get("tool_calls"):
            choice["finish_reason"] = "tool_calls"
        return json.dumps(completion, ensure_ascii=False).encode()

    def _rewrite_stream(
        self, draw: Draw, events: list[Any], request: dict[str, Any], meta: dict[str, Any]
    ) -> list[bytes]:
        """The streamed completion reassembled, rewritten and streamed again in the same shape:
        a role chunk, the content in small pieces, the tool calls, the finish reason, the usage
        chunk (when there was one), `[DONE]`."""
        chunks = [e for e in events if isinstance(e, dict)]
        message, finish, usage = _assemble(chunks)
        if not chunks:
            self._record(meta | {"class": None, "applied": False, "tried": []})
            return [_sse(e) for e in events]
        meta["completion_id"] = chunks[0].get("id")
        new, name = self._rewrite(draw, message, request, meta)
        if name == "truncated":
            finish = "length"
        elif new.get("tool_calls"):
            finish = "tool_calls"
        elif finish == "tool_calls":
            finish = "stop"
        head = {k: chunks[0][k] for k in ("id", "object", "created", "model") if k in chunks[0]}
        return _stream_message(head, new, finish, usage)


def _step(request: dict[str, Any], handler: _Handler) -> str | None:
    header = {k.lower(): v for k, v in handler.headers.items()}.get(STEP_HEADER)
    if header:
        return header
    fmt = request.get("response_format")
    if isinstance(fmt, dict) and isinstance(fmt.get("json_schema"), dict):
        name = fmt["json_schema"].get("name")
        return name if isinstance(name, str) else None
    return None


def _sse_events(raw: bytes) -> list[Any]:
    """The `data:` payloads of a server-sent event stream, JSON decoded (`"[DONE]"` kept)."""
    events: list[Any] = []
    for block in raw.decode("utf-8").replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(
            line[5:].lstrip() for line in block.split("\n") if line.startswith("data:")
        )
        if not data:
            continue
        try:
            events.append(json.loads(data))
        except ValueError:
            events.append(data)
    return events


def _sse(payload: Any) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return b"data: " + data.encode() + b"\n\n"


def _assemble(chunks: list[dict[str, Any]]) -> tuple[dict[str, Any], str | None, Any]:
    """The message a stream of chunks carries, its finish reason and its usage."""
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish, usage = None, None
    for chunk in chunks:
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                content.append(delta["content"])
            for part in delta.get("tool_calls") or []:
                call = calls.setdefault(
                    part.get("index", 0),
                    {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
                )
                call["id"] = part.get("id") or call["id"]
                function = part.get("function") or {}
                call["function"]["name"] += function.get("name") or ""
                call["function"]["arguments"] += function.get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    message: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(content) if content else None,
    }
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message, finish, usage


def _stream_message(
    head: dict[str, Any], message: dict[str, Any], finish: str | None, usage: Any
) -> list[bytes]:
    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
        return _sse(head | {"choices": [choice]})

    out = [chunk({"role": "assistant"})]
    content = message.get("content") or ""
    out += [
        chunk({"content": content[i : i + STREAM_PIECE]})
        for i in range(0, len(content), STREAM_PIECE)
    ]
    for index, call in enumerate(message.get("tool_calls") or []):
        part = {
            "index": index,
            "id": call.get("id"),
            "type": "function",
            "function": call["function"],
        }
        out.append(chunk({"tool_calls": [part]}))
    out.append(chunk({}, finish or "stop"))
    if usage is not None:
        out.append(_sse(head | {"choices": [], "usage": usage}))
    out.append(_sse("[DONE]"))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", required=True, help="the model's base URL, with /v1")
    parser.add_argument("--rate", type=float, default=0.2, help="share of responses injected")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--classes",
        default=",".join(CLASSES),
        help=f"comma-separated, from: {', '.join(CLASSES)}",
    )
    parser.add_argument("--log", default=None, help="JSONL file the injections are appended to")
    parser.add_argument(
        "--destructive-tools",
        default="",
        help="comma-separated tool names (default: names with cancel, refund, return…)",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        proxy = InjectingProxy(
            upstream=args.upstream,
            rate=args.rate,
            seed=args.seed,
            classes=[c for c in args.classes.split(",") if c],
            log_path=args.log,
            destructive_tools=[t for t in args.destructive_tools.split(",") if t] or None,
            host=args.host,
            port=args.port,
        )
    except ValueError as exc:
        parser.error(str(exc))
    with proxy:
        urls = {"base_url": proxy.base_url, "log": args.log}
        print(json.dumps(urls), flush=True)  # noqa: T201 (the command's output)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
