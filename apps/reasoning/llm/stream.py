"""Streaming a reply while it is written: `with streaming(sink):` and the SSE reading behind it."""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from types import SimpleNamespace
from typing import Any

import httpx2
import jiter
import openai

from apps.platform.http import rest_of_body_within
from apps.reasoning.llm.client import (
    STEP_HEADER,
    TEMPERATURE,
    llm_model,
    messages_param,
    sdk_client,
)
from apps.reasoning.llm.formats import ProviderKey, refuses_format

logger = logging.getLogger("apps.reasoning.llm")


# A caller that can show a reply while it is written (the widget) sets a sink with `streaming`:
# the calls made inside it ask the provider to stream (`stream=True`) and hand the sink the
# reply's JSON object as parsed so far (`jiter`'s partial mode: the fields complete up to now,
# the last string as far as it arrived), once per chunk. The result is the same as without it.
# A sink that returns False wants no more (e.g. the reply will not be shown): the gateway stops
# parsing the partial JSON for it and just collects the rest.
StreamSink = Callable[[dict[str, Any]], bool | None]
STREAM_SINK: ContextVar[StreamSink | None] = ContextVar("llm_stream_sink", default=None)


class streaming:
    """`with streaming(sink):` — the model calls made inside stream their reply to `sink`
    (None = no streaming). What the gateway returns or raises does not change; a provider that
    cannot stream is answered without it (the sink then hears nothing)."""

    def __init__(self, sink: StreamSink | None) -> None:
        self.sink = sink
        self._token: Any = None

    def __enter__(self) -> None:
        self._token = STREAM_SINK.set(self.sink)

    def __exit__(self, *exc: object) -> None:
        STREAM_SINK.reset(self._token)


# Providers (base URL, model) that refused `stream=True` in this process: asked without it.
no_stream: set[ProviderKey] = set()


def refuses_stream(exc: openai.OpenAIError) -> bool:
    """A 400/422 that names `stream`: the provider does not stream (a refused response_format
    is told apart first, by `refuses_format`)."""
    if not isinstance(exc, openai.APIStatusError) or exc.status_code not in (400, 422):
        return False
    if refuses_format(exc):
        return False
    return "stream" in str(exc.message or "").lower()


def streamed_completion(
    sent: list[dict[str, str]],
    *,
    max_tokens: int,
    step: str,
    timeout: float | None,
    sink: StreamSink,
    **kwargs: Any,
) -> Any:
    """One call with `stream=True`: each chunk's text is added to the reply and the reply's
    JSON as parsed so far goes to `sink`. Returns what `create` would have returned (the
    reply, its finish reason, model and usage — the last chunk's, asked for with
    `stream_options.include_usage`). A provider that answers with one JSON completion instead
    of a stream is read as such. Transport failures mid-stream raise the SDK's errors, as a
    call without streaming would."""
    response = sdk_client().chat.completions.with_raw_response.create(
        model=llm_model(),
        **messages_param(sent),
        temperature=TEMPERATURE,
        max_tokens=max_tokens,
        extra_headers={STEP_HEADER: step},
        timeout=timeout,
        stream=True,
        stream_options={"include_usage": True},
        **kwargs,
    )
    http_response = response.http_response
    try:
        if "event-stream" not in http_response.headers.get("content-type", ""):
            # A provider that ignores `stream`: one ordinary completion.
            from openai.types.chat import ChatCompletion

            return ChatCompletion.model_validate(json.loads(http_response.read()))
        parts: list[str] = []
        model, usage, finish_reason, refusal = "", None, None, None
        shown, listening = 0, True
        # The chunks are read as plain JSON, not as the SDK's pydantic chunk objects (which
        # cost ~40 ms of CPU per streamed reply): only the few fields below are needed.
        events = _sse_data(http_response)
        for data in events:
            if data.startswith("[DONE]"):
                _drain(events)
                break
            chunk = _stream_chunk(data, http_response)
            model = model or str(chunk.get("model") or "")
            if chunk.get("usage") is not None:
                usage = chunk["usage"]
            for choice in chunk.get("choices") or ():
                if not isinstance(choice, dict):
                    continue
                delta = choice.get("delta")
                if isinstance(delta, dict):
                    if isinstance(delta.get("content"), str) and delta["content"]:
                        parts.append(delta["content"])
                    if delta.get("refusal"):
                        refusal = (refusal or "") + str(delta["refusal"])
                if choice.get("finish_reason"):
                    finish_reason = choice["finish_reason"]
            if listening and len(parts) > shown:
                shown = len(parts)
                listening = tell_sink(sink, "".join(parts))
    except (httpx2.TimeoutException, TimeoutError) as exc:
        raise openai.APITimeoutError(request=http_response.request) from exc
    except (httpx2.HTTPError, OSError) as exc:
        raise openai.APIConnectionError(request=http_response.request) from exc
    finally:
        http_response.close()
    message = SimpleNamespace(content="".join(parts), refusal=refusal)
    return SimpleNamespace(
        model=model or llm_model(),
        usage=_stream_usage(usage),
        choices=[SimpleNamespace(message=message, finish_reason=finish_reason)],
    )


# After `[DONE]` the body is read to its end, so that its connection goes back to the pool: a
# response closed half-read drops its connection, and the next call would connect (and with
# TLS, handshake) again before its first token. A provider that holds the body open after
# `[DONE]` costs at most this much.
DRAIN_SECONDS = 0.1


def _drain(events: Iterator[str]) -> None:
    with contextlib.suppress(httpx2.HTTPError, OSError), rest_of_body_within(DRAIN_SECONDS):
        for _ in events:
            pass


def _sse_data(http_response: httpx2.Response) -> Iterator[str]:
    """The `data` of each server-sent event of a response (the SSE framing as the `openai`
    SDK's decoder reads it: `data:` lines joined by newlines, an empty line ends the event,
    comments and other fields skipped; lines end with CRLF, LF or CR). The body's bytes are
    split into lines here rather than by httpx's text and line decoders: a streamed reply has
    one chunk per token, and those two layers cost more CPU than the rest of the chunk's
    handling (devtools/benchmarks/turn_profile.py). A line is decoded whole, so a character split
    between two chunks arrives intact."""
    data: list[str] = []
    pending = b""
    for chunk in http_response.iter_bytes():
        pending += chunk
        # A CR at the end may be the first half of a CRLF: keep it for the next chunk.
        cut = len(pending) - 1 if pending.endswith(b"\r") else len(pending)
        complete, pending = pending[:cut], pending[cut:]
        lines = complete.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        pending = lines.pop() + pending
        for line in lines:
            event = _sse_line(line, data)
            if event is not None:
                yield event
    if pending.rstrip(b"\r"):
        _sse_line(pending.rstrip(b"\r"), data)
    if data:
        yield "\n".join(data)


def _sse_line(line: bytes, data: list[str]) -> str | None:
    """Read one line into `data`; at an empty line, the event it ends (and `data` emptied)."""
    if not line:
        if not data:
            return None
        event = "\n".join(data)
        data.clear()
        return event
    if line.startswith(b"data:"):
        value = line[5:].decode("utf-8", errors="replace")
        data.append(value[1:] if value.startswith(" ") else value)
    elif line == b"data":
        data.append("")
    return None


def _stream_usage(usage: Any) -> SimpleNamespace | None:
    """A streamed `usage` dict, read as the gateway reads the SDK's usage object (its
    `prompt_tokens_details` stays a dict, which the gateway's `_cached_tokens` reads)."""
    if not isinstance(usage, dict):
        return None
    return SimpleNamespace(
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
        prompt_tokens_details=usage.get("prompt_tokens_details"),
    )


def _stream_chunk(data: str, http_response: httpx2.Response) -> dict[str, Any]:
    """One streamed chunk as a dict. An `error` in it raises `openai.APIError` with its
    message, as the SDK's stream does; so does a chunk that is not a JSON object (the SDK
    would raise a bare ValueError, which is no provider failure the gateway knows)."""
    try:
        chunk = json.loads(data)
    except ValueError:
        chunk = None
    if not isinstance(chunk, dict):
        raise openai.APIError(
            message="the provider streamed a chunk that is not a JSON object",
            request=http_response.request,
            body=None,
        )
    error = chunk.get("error")
    if error:
        message = error.get("message") if isinstance(error, dict) else None
        if not message or not isinstance(message, str):
            message = "An error occurred during streaming"
        raise openai.APIError(message=message, request=http_response.request, body=error)
    return chunk


def tell_sink(sink: StreamSink, text: str) -> bool:
    """The reply so far, parsed as far as it goes, to the sink (which must never break the
    call: a failing sink is logged and hears no more). False: the sink wants no more."""
    start = text.find("{")
    if start < 0:
        return True
    partial = _partial_json(text[start:])
    if partial is None:
        return True  # not JSON (yet, or at all): nothing to tell
    if not isinstance(partial, dict):
        return True
    try:
        return sink(partial) is not False
    except Exception:
        logger.exception("LLM stream sink failed")
        return False


# A JSON string as far as it goes (its closing quote, or an escape's second half, may not have
# arrived yet).
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*(?:"|\\?\Z)', re.DOTALL)
_RAW_CONTROL = re.compile(r"[\x00-\x1f]")


def _partial_json(text: str) -> Any:
    """`text` parsed as far as it goes, or None. Models often write a line break inside a
    string as a raw newline, which JSON forbids; the final reply forgives it (`json_repair`),
    so the partial reply does too: such characters inside strings are escaped and the text
    read again. Otherwise the reply shown while written would stop at its first raw newline
    and differ from the reply sent."""
    data = text.encode()
    try:
        return jiter.from_json(data, partial_mode="trailing-strings")
    except ValueError:
        if not _RAW_CONTROL.search(text):
            return None
    escaped = _JSON_STRING.sub(lambda m: _RAW_CONTROL.sub(_escape_control, m.group()), text)
    try:
        return jiter.from_json(escaped.encode(), partial_mode="trailing-strings")
    except ValueError:
        return None


def _escape_control(match: re.Match[str]) -> str:
    return json.dumps(match.group())[1:-1]
