"""The model asked for and the `openai` SDK client the gateway calls it through."""

from __future__ import annotations

import threading
from contextvars import ContextVar
from typing import Any

import openai
from django.conf import settings

from apps.platform.http import wall_clock_client

STEP_HEADER = "X-GuideDesk-Step"
OFFLINE_MODEL = "offline-demo"
TEMPERATURE = 0.2


# A simulation run's candidate may name another model for its own calls only (the offline demo
# model ignores it): set with `model_override`, read by `llm_model`.
_MODEL_OVERRIDE: ContextVar[str] = ContextVar("llm_model_override", default="")


def llm_model() -> str:
    """The model this call asks for: the current override, else `LLM_MODEL`."""
    return _MODEL_OVERRIDE.get() or str(settings.LLM_MODEL)


class model_override:
    """`with model_override("gpt-x"):` — the calls made inside ask for that model ("" = none)."""

    def __init__(self, model: str) -> None:
        self.model = model
        self._token: Any = None

    def __enter__(self) -> None:
        self._token = _MODEL_OVERRIDE.set(self.model or "")

    def __exit__(self, *exc: object) -> None:
        _MODEL_OVERRIDE.reset(self._token)


type _ClientKey = tuple[str, str | None, float]

_client_lock = threading.Lock()
_cached_client: tuple[_ClientKey, openai.OpenAI] | None = None


def sdk_client() -> openai.OpenAI:
    """The SDK client. Its requests go through `WallClockTransport`: `LLM_TIMEOUT` bounds each
    request as a whole (connect and every read), also against an endpoint that trickles its
    body, and no request outlives the turn's deadline. The SDK's own retries are off: the turn
    retries a failed step once, while its deadline leaves time (docs/operations.md)."""
    global _cached_client
    key: _ClientKey = (
        str(settings.OPENAI_API_KEY),
        settings.OPENAI_BASE_URL or None,
        float(settings.LLM_TIMEOUT),
    )
    with _client_lock:
        if _cached_client is None or _cached_client[0] != key:
            api_key, base_url, timeout = key
            http_client = wall_clock_client(limit=timeout, timeout=timeout, follow_redirects=True)
            _cached_client = (
                key,
                openai.OpenAI(
                    api_key=api_key,
                    base_url=base_url,
                    timeout=timeout,
                    max_retries=0,
                    http_client=http_client,
                ),
            )
        return _cached_client[1]


def llm_is_offline() -> bool:
    """True when no API key is configured and the offline demo model answers."""
    return not settings.OPENAI_API_KEY


def messages_param(sent: list[dict[str, str]]) -> dict[str, Any]:
    """The `messages` of a call, for `create(**…)`. The SDK's parameter transform walks every
    message against its TypedDicts (≈ 3 ms of CPU for a ten-message prompt, per call) and
    changes nothing in plain role/content strings, so they go in as `extra_body`, which the SDK
    sends as they are; the request body is the same JSON."""
    return {"messages": [], "extra_body": {"messages": sent}}
