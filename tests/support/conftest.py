"""The fake servers' own tests: a scripted LLM server and the real `openai` SDK talking to it."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest

from devtools.fake_llm import FakeLLMServer


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
def client(llm: FakeLLMServer) -> Iterator[openai.OpenAI]:
    sdk = openai.OpenAI(api_key="test", base_url=llm.base_url, max_retries=0, timeout=2)
    yield sdk
    sdk.close()
