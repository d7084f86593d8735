"""The LLM gateway reads a streamed reply's server-sent events from the body's bytes
(`apps.reasoning.llm.stream._sse_data`), not through httpx's text and line decoders. It must frame
events exactly as the `openai` SDK's decoder does, however the bytes are cut into chunks."""

from __future__ import annotations

import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.reasoning.llm.stream import _sse_data

BODY = (
    ": a comment line\r\n"
    "event: ignored\r\n"
    'data: {"choices":[{"delta":{"content":"Grüß"}}]}\r\n'
    "\r\n"
    'data: {"choices":[{"delta":{"content":" Gott — 日本"}}]}\n'
    "\n"
    "data: first line\r"
    "data:second line\r"
    "\r"
    "data\n"
    "\n"
    "data: [DONE]\n"
).encode()
EXPECTED = [
    '{"choices":[{"delta":{"content":"Grüß"}}]}',
    '{"choices":[{"delta":{"content":" Gott — 日本"}}]}',
    "first line\nsecond line",
    "",
    "[DONE]",
]


def _response(chunks: list[bytes]) -> httpx2.Response:
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=iter(chunks))


def _cut(body: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c for c in cuts if 0 < c < len(body)})
    return [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]


def test_whole_body_in_one_chunk() -> None:
    assert list(_sse_data(_response([BODY]))) == EXPECTED


def test_one_byte_at_a_time_splits_crlf_and_multibyte_characters() -> None:
    assert list(_sse_data(_response([BODY[i : i + 1] for i in range(len(BODY))]))) == EXPECTED


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=len(BODY) - 1), max_size=12))
def test_any_chunking_gives_the_same_events(cuts: list[int]) -> None:
    assert list(_sse_data(_response(_cut(BODY, cuts)))) == EXPECTED


@pytest.mark.parametrize("tail", [b"data: last", b"data: last\r", b"data: last\n"])
def test_an_unterminated_last_event_is_still_read(tail: bytes) -> None:
    assert list(_sse_data(_response([b"data: a\n\n", tail]))) == ["a", "last"]
