"""The gateway's streaming path (`llm.streaming`): the real `openai` SDK against the scripted
server streaming its reply, the partial JSON handed to the sink as it arrives."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from pytest_django.fixtures import Settings

from apps.reasoning.llm import LLMError, llm_complete, streaming
from apps.reasoning.steps.assess import AssessOut
from apps.reasoning.steps.respond import RespondOut
from devtools.fake_llm import Fail, FakeLLMServer, Truncated

MESSAGES: list[dict[str, str]] = [
    {"role": "system", "content": "You are the support assistant for Acme."},
    {"role": "user", "content": "When do you open?"},
]
REPLY: dict[str, Any] = {
    "tool_call": None,
    "tool_params": {},
    "response": "We open at nine every weekday and at ten on Saturdays.",
}


@pytest.fixture
def llm(settings: Settings, db: None) -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        settings.OPENAI_API_KEY = "test-key"
        settings.OPENAI_BASE_URL = server.base_url
        settings.LLM_RESPONSE_FORMAT = "json_schema"
        yield server


def test_a_streamed_reply_reaches_the_sink_piece_by_piece_and_parses_as_usual(
    llm: FakeLLMServer,
) -> None:
    llm.script("respond", REPLY)
    seen: list[dict[str, Any]] = []

    with streaming(seen.append):
        result = llm_complete(step="respond", messages=MESSAGES, output=RespondOut)

    [request] = llm.requests
    assert request.body["stream"] is True
    assert request.body["stream_options"] == {"include_usage": True}
    assert result.parsed.response == REPLY["response"]
    # The sink saw the reply grow: the deciding fields first, then the words of `response`.
    texts = [p["response"] for p in seen if "response" in p]
    assert len(texts) > 5
    assert all(b.startswith(a) for a, b in itertools.pairwise(texts))
    assert texts[-1] == REPLY["response"]
    first = next(p for p in seen if "response" in p)
    assert first["tool_call"] is None
    # Usage comes from the stream's last chunk, cached tokens included.
    [usage] = llm.usage_log
    assert (result.prompt_tokens, result.completion_tokens) == (
        usage["prompt_tokens"],
        usage["completion_tokens"],
    )
    assert not result.tokens_estimated


def test_without_a_sink_nothing_is_streamed(llm: FakeLLMServer) -> None:
    llm.script("respond", REPLY)
    llm_complete(step="respond", messages=MESSAGES, output=RespondOut)
    assert "stream" not in llm.requests[0].body


def test_a_provider_that_ignores_stream_still_answers(settings: Settings, db: None) -> None:
    with FakeLLMServer(ignore_stream=True) as server:
        settings.OPENAI_API_KEY = "test-key"
        settings.OPENAI_BASE_URL = server.base_url
        server.script("respond", REPLY)
        seen: list[dict[str, Any]] = []
        with streaming(seen.append):
            result = llm_complete(step="respond", messages=MESSAGES, output=RespondOut)
    assert result.parsed.response == REPLY["response"]
    assert seen == []
    assert result.prompt_tokens > 0 and not result.tokens_estimated


def test_a_provider_that_refuses_stream_is_asked_again_without_it(llm: FakeLLMServer) -> None:
    llm.script(
        "respond",
        Fail(status=400, message="stream is not supported by this model"),
        REPLY,
    )
    with streaming(lambda partial: None):
        result = llm_complete(step="respond", messages=MESSAGES, output=RespondOut)
    assert result.parsed.response == REPLY["response"]
    first, second = llm.requests
    assert first.body.get("stream") is True and "stream" not in second.body


def test_a_refused_response_format_still_falls_back_while_streaming(llm: FakeLLMServer) -> None:
    llm.refuse("json_schema")
    llm.script("assess", {"confidence": 8, "tool_call": None, "response": "Hello there."})
    seen: list[dict[str, Any]] = []
    with streaming(seen.append):
        result = llm_complete(step="assess", messages=MESSAGES, output=AssessOut)
    assert result.parsed.response == "Hello there."
    assert [r.form for r in llm.requests] == ["json_schema", "json_object+schema"]
    assert seen and seen[-1]["response"] == "Hello there."


def test_a_truncated_stream_is_a_truncated_reply(llm: FakeLLMServer) -> None:
    llm.script("respond", Truncated('{"tool_call": null, "response": "We open at'), REPLY)
    with streaming(lambda partial: None), pytest.raises(LLMError) as caught:
        llm_complete(step="respond", messages=MESSAGES, output=RespondOut)
    assert caught.value.kind == "truncated"


def test_a_failing_sink_does_not_break_the_call(llm: FakeLLMServer) -> None:
    llm.script("respond", REPLY)

    def sink(partial: dict[str, Any]) -> None:
        raise RuntimeError("boom")

    with streaming(sink):
        result = llm_complete(step="respond", messages=MESSAGES, output=RespondOut)
    assert result.parsed.response == REPLY["response"]


def test_the_stream_keeps_its_timing(settings: Settings, db: None) -> None:
    """First token after the configured delay, then one token per interval."""
    import time

    with FakeLLMServer(first_token_seconds=0.2, token_seconds=0.01) as server:
        settings.OPENAI_API_KEY = "test-key"
        settings.OPENAI_BASE_URL = server.base_url
        server.script("respond", REPLY)
        stamps: list[float] = []
        started = time.perf_counter()
        with streaming(lambda partial: stamps.append(time.perf_counter() - started)):
            llm_complete(step="respond", messages=MESSAGES, output=RespondOut)
    assert stamps[0] >= 0.2
    assert stamps[-1] - stamps[0] >= 0.01 * (len(stamps) - 1) * 0.8


def test_a_streamed_call_reports_the_providers_cached_tokens(llm: FakeLLMServer) -> None:
    """The scripted server's prompt cache works for streamed requests too: the second call with
    the same long prefix reports cached tokens in the stream's usage chunk."""
    long_rules = "Our shop's rules, repeated so the prompt is long enough to cache. " * 80
    messages = [{"role": "system", "content": long_rules}, *MESSAGES[1:]]
    llm.script("respond", REPLY, REPLY)
    results = []
    with streaming(lambda partial: None):
        for _ in range(2):
            results.append(llm_complete(step="respond", messages=messages, output=RespondOut))
    first, second = results
    assert first.cached_tokens == 0
    assert second.cached_tokens >= 1024 and second.cached_tokens % 128 == 0
    assert [entry["cached_tokens"] for entry in llm.usage_log] == [0, second.cached_tokens]


class _MidStreamServer(FakeLLMServer):
    """The scripted server whose streamed reply is followed by `tail`: raw SSE bytes sent
    before `[DONE]` (what a provider sends when it fails, or refuses, mid-stream)."""

    def __init__(self, tail: bytes) -> None:
        super().__init__()
        self.tail = tail

    def _streamed(self, request: Any, completion: dict[str, Any], content: str) -> Any:
        response = super()._streamed(request, completion, content)
        body = list(response.stream)
        return dataclasses.replace(response, stream=iter([*body[:-1], self.tail, body[-1]]))


@pytest.fixture
def mid_stream(settings: Settings, db: None) -> Iterator[Any]:
    servers: list[FakeLLMServer] = []

    def start(tail: bytes, reply: Any = REPLY) -> FakeLLMServer:
        server = _MidStreamServer(tail).start()
        servers.append(server)
        settings.OPENAI_API_KEY = "test-key"
        settings.OPENAI_BASE_URL = server.base_url
        settings.LLM_RESPONSE_FORMAT = "json_schema"
        server.script("respond", reply)
        return server

    yield start
    for server in servers:
        server.stop()


def test_an_error_event_mid_stream_fails_the_call_with_its_message(mid_stream: Any) -> None:
    mid_stream(b'data: {"error": {"message": "the model overloaded", "type": "server"}}\n\n')
    seen: list[dict[str, Any]] = []
    with streaming(seen.append), pytest.raises(LLMError) as caught:
        llm_complete(step="respond", messages=MESSAGES, output=RespondOut)
    assert caught.value.kind == "server"
    assert "the model overloaded" in caught.value.message
    assert seen  # the reply had been shown while written: the caller takes it back


def test_a_stream_chunk_that_is_not_json_fails_the_call_as_a_provider_error(
    mid_stream: Any,
) -> None:
    mid_stream(b"data: {not json\n\n")
    with streaming(lambda partial: None), pytest.raises(LLMError) as caught:
        llm_complete(step="respond", messages=MESSAGES, output=RespondOut)
    assert caught.value.kind == "server"


def test_stream_comments_and_other_fields_are_skipped(mid_stream: Any) -> None:
    """SSE framing as the SDK reads it: comment lines, `event:`/`id:` fields and CRLF line
    ends change nothing; a `data` split over two lines is one chunk."""
    chunk = b'{"choices": [{"index": 0, "delta": {},\r\ndata: "finish_reason": "stop"}]}'
    mid_stream(b": keep-alive\r\n\r\nevent: chunk\r\nid: 7\r\ndata: " + chunk + b"\r\n\r\n")
    seen: list[dict[str, Any]] = []
    with streaming(seen.append):
        result = llm_complete(step="respond", messages=MESSAGES, output=RespondOut)
    assert result.parsed.response == REPLY["response"]
    assert seen[-1]["response"] == REPLY["response"]
    assert not result.tokens_estimated and result.prompt_tokens > 0


def test_a_refusal_streamed_instead_of_a_reply_is_kept_as_its_text(mid_stream: Any) -> None:
    mid_stream(
        b'data: {"choices": [{"index": 0, "delta": {"refusal": "I cannot help with that."},'
        b' "finish_reason": null}]}\n\n',
        reply="",
    )
    with streaming(lambda partial: None), pytest.raises(LLMError) as caught:
        llm_complete(step="respond", messages=MESSAGES, output=RespondOut)
    assert caught.value.raw == "I cannot help with that."


class _CountingServer(_MidStreamServer):
    """Counts the TCP connections its clients open."""

    def __init__(self, tail: bytes = b"", hold_open: float = 0.0) -> None:
        super().__init__(tail)
        self.connections = 0
        self.hold_open = hold_open

    def _track(self, connection: Any) -> None:
        self.connections += 1
        super()._track(connection)

    def _streamed(self, request: Any, completion: dict[str, Any], content: str) -> Any:
        response = super()._streamed(request, completion, content)
        if not self.hold_open:
            return response
        assert response.stream is not None

        def held(body: Iterator[bytes]) -> Iterator[bytes]:
            yield from body
            self.sleep(self.hold_open)  # `[DONE]` sent, the body not ended

        return dataclasses.replace(response, stream=held(response.stream))


def test_streamed_calls_keep_their_connection(settings: Settings, db: None) -> None:
    """The body is read to its end after `[DONE]`: the next call reuses the connection instead
    of connecting (with TLS: handshaking) again before its first token."""
    with _CountingServer() as server:
        settings.OPENAI_API_KEY = "test-key"
        settings.OPENAI_BASE_URL = server.base_url
        server.script("respond", REPLY, REPLY, REPLY)
        for _ in range(3):
            with streaming(lambda partial: None):
                result = llm_complete(step="respond", messages=MESSAGES, output=RespondOut)
            assert result.parsed.response == REPLY["response"]
    assert server.connections == 1


def test_a_provider_holding_the_body_open_after_done_still_answers(
    settings: Settings, db: None
) -> None:
    """The drain after `[DONE]` is bounded: the reply is complete, so the call returns it
    without waiting for the body to end (which would take the call's whole 5 s limit: a
    behaviour bound, far from any timing the box could blur)."""
    with _CountingServer(hold_open=30) as server:
        settings.OPENAI_API_KEY = "test-key"
        settings.OPENAI_BASE_URL = server.base_url
        settings.LLM_TIMEOUT = 5
        server.script("respond", REPLY)
        with streaming(lambda partial: None):
            result = llm_complete(step="respond", messages=MESSAGES, output=RespondOut)
        assert result.parsed.response == REPLY["response"]
        assert result.latency_ms < 5000


def test_a_raw_line_break_in_the_reply_is_shown_as_it_will_be_sent(llm: FakeLLMServer) -> None:
    """Models write line breaks inside a JSON string as raw newlines (invalid JSON, which the
    final parse forgives): the reply shown while written goes on past them and ends as the
    reply sent, not at the first line break."""
    response = 'Your order:\n\t- "Blue mug" \\ 2 pcs\nShips tomorrow.'
    # Quotes and backslashes escaped as JSON wants, the tab and newlines left raw.
    written = response.replace("\\", "\\\\").replace('"', '\\"')
    raw = '{"tool_call": null, "tool_params": {}, "response": "' + written + '"}'
    llm.script("respond", raw)
    seen: list[dict[str, Any]] = []

    with streaming(seen.append):
        result = llm_complete(step="respond", messages=MESSAGES, output=RespondOut)

    assert result.parsed.response == response
    texts = [p["response"] for p in seen if "response" in p]
    assert any("\n" in text for text in texts[:-1])
    assert all(b.startswith(a) for a, b in itertools.pairwise(texts))
    assert texts[-1] == response
