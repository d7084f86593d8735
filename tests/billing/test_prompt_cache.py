"""Prompt caching: the scripted server reports cached prefixes the way OpenAI documents it,
the gateway carries `cached_tokens` to the usage record, and the record is priced at the
model's cached-input rate, to the cent of what the provider itself charges."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import openai
import pytest
from django.conf import LazySettings

from apps.billing.models import UsageRecord
from apps.billing.services import price_tokens, usage_cost
from apps.reasoning.llm import llm_complete
from apps.reasoning.meter import Meter
from apps.reasoning.steps.respond import RespondOut
from devtools.fake_llm import (
    CACHE_BLOCK_TOKENS,
    CACHE_MIN_TOKENS,
    FakeLLMServer,
    PromptCache,
    count_prompt_tokens,
    prompt_token_pieces,
)
from tests.factories import ClientFactory, ModelPriceFactory

REPLY: dict[str, Any] = {"response": "Hi!", "tool_call": None, "tool_params": {}}


def _messages(shared_chars: int, tail: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "R" * shared_chars},
        {"role": "user", "content": tail},
    ]


def _ask(server: FakeLLMServer, messages: list[dict[str, str]], key: str = "k") -> dict[str, Any]:
    client = openai.OpenAI(api_key=key, base_url=server.base_url, max_retries=0)
    server.script("unknown", REPLY)
    completion = client.chat.completions.create(model="m", messages=messages)
    assert completion.usage is not None
    return completion.usage.model_dump()


def test_token_pieces_match_the_servers_token_count() -> None:
    messages = _messages(4001, "hello there")
    assert len(prompt_token_pieces(messages)) == count_prompt_tokens(messages)


def test_short_prompts_are_never_cached() -> None:
    with FakeLLMServer() as server:
        messages = _messages(1000, "x")  # ~256 tokens
        _ask(server, messages)
        usage = _ask(server, messages)
    assert usage["prompt_tokens_details"]["cached_tokens"] == 0


def test_a_repeated_long_prefix_is_cached_in_whole_blocks() -> None:
    with FakeLLMServer() as server:
        first = _ask(server, _messages(8000, "first question"))
        second = _ask(server, _messages(8000, "a different second question"))
        repeat = _ask(server, _messages(8000, "a different second question"))
    assert first["prompt_tokens_details"]["cached_tokens"] == 0
    # The shared part: 4 framing tokens + 2,000 content tokens of the system message.
    shared = 4 + 8000 // 4
    cached = second["prompt_tokens_details"]["cached_tokens"]
    assert cached == shared // CACHE_BLOCK_TOKENS * CACHE_BLOCK_TOKENS
    assert cached >= CACHE_MIN_TOKENS and cached % CACHE_BLOCK_TOKENS == 0
    total = repeat["prompt_tokens"]
    assert repeat["prompt_tokens_details"]["cached_tokens"] == total // 128 * 128


def test_a_match_shorter_than_1024_tokens_is_not_cached() -> None:
    cache = PromptCache()
    base = ["t"] * 2000
    assert cache.lookup_and_store("a", base) == 0
    other = base[:1000] + ["u"] * 1000
    assert cache.lookup_and_store("a", other) == 0
    assert cache.lookup_and_store("a", base[:1100] + ["v"] * 500) == 1024


def test_another_api_key_does_not_share_the_cache() -> None:
    with FakeLLMServer() as server:
        _ask(server, _messages(8000, "q"), key="shop-a")
        usage = _ask(server, _messages(8000, "q"), key="shop-b")
    assert usage["prompt_tokens_details"]["cached_tokens"] == 0


def test_caching_can_be_turned_off() -> None:
    with FakeLLMServer(prompt_caching=False) as server:
        _ask(server, _messages(8000, "q"))
        usage = _ask(server, _messages(8000, "q"))
    assert usage["prompt_tokens_details"]["cached_tokens"] == 0


def test_the_cache_forgets_the_oldest_prefixes_beyond_its_capacity() -> None:
    cache = PromptCache(capacity=20)
    first = ["a"] * 1280  # 10 block prefixes
    cache.lookup_and_store("c", first)
    cache.lookup_and_store("c", ["b"] * 1280)
    cache.lookup_and_store("c", ["z"] * 1280)  # 30 prefixes: the first prompt's are gone
    assert cache.lookup_and_store("c", first) == 0


# -- the gateway, the meter and the price --------------------------------------------------------


@pytest.fixture
def llm(settings: LazySettings, db: None) -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        settings.OPENAI_API_KEY = "test-key"
        settings.OPENAI_BASE_URL = server.base_url
        settings.LLM_MODEL = "gpt-4o-mini"
        settings.LLM_RESPONSE_FORMAT = "json_schema"
        yield server


def test_the_gateway_reports_cached_tokens(llm: FakeLLMServer) -> None:
    llm.default("respond", REPLY)
    llm_complete(step="respond", messages=_messages(8000, "one"), output=RespondOut)
    result = llm_complete(step="respond", messages=_messages(8000, "two"), output=RespondOut)
    assert result.cached_tokens == llm.usage_log[-1]["cached_tokens"] > 0
    assert result.cached_tokens <= result.prompt_tokens


def test_cost_prices_cached_tokens_at_the_cached_rate() -> None:
    price = ModelPriceFactory.build(
        model="m",
        input_per_million=Decimal("2.00"),
        cached_input_per_million=Decimal("0.50"),
        output_per_million=Decimal("8.00"),
    )
    cost = price_tokens(price=price, prompt_tokens=3000, completion_tokens=100, cached_tokens=2048)
    expected = (Decimal(952) * 2 + Decimal(2048) * Decimal("0.5") + Decimal(100) * 8) / 10**6
    assert cost == expected.quantize(Decimal("0.00000001"))
    price.cached_input_per_million = None
    uncached = price_tokens(
        price=price, prompt_tokens=3000, completion_tokens=100, cached_tokens=2048
    )
    assert uncached == (Decimal(3000) * 2 + Decimal(100) * 8) / 10**6


@pytest.mark.django_db
def test_usage_records_equal_the_providers_own_invoice_to_the_cent(llm: FakeLLMServer) -> None:
    prices = {"gpt-4o-mini": (Decimal("0.15"), Decimal("0.075"), Decimal("0.60"))}
    ModelPriceFactory(
        model="gpt-4o-mini",
        input_per_million=prices["gpt-4o-mini"][0],
        cached_input_per_million=prices["gpt-4o-mini"][1],
        output_per_million=prices["gpt-4o-mini"][2],
    )
    client = ClientFactory()
    meter = Meter(client=client, mode="standard", purpose="benchmark", token_cap=None)
    llm.default("respond", REPLY)
    for i in range(40):
        meter.call(
            step="respond", messages=_messages(6000 + 50 * (i % 3), f"q{i}"), output=RespondOut
        )
    records = list(UsageRecord.objects.for_client(client))
    assert len(records) == 40
    assert sum(r.cached_tokens for r in records) == sum(e["cached_tokens"] for e in llm.usage_log)
    assert sum(r.cached_tokens for r in records) > 0
    ours = sum((r.cost_usd for r in records), Decimal(0))
    assert ours == llm.provider_cost(prices)
    assert round(ours, 2) == round(llm.provider_cost(prices), 2)
    uncached = sum(
        (
            usage_cost(
                model="gpt-4o-mini",
                prompt_tokens=r.prompt_tokens,
                completion_tokens=r.completion_tokens,
            )
            for r in records
        ),
        Decimal(0),
    )
    assert ours < uncached
