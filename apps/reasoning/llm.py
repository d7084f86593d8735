"""The LLM gateway: every model call in GuideDesk goes through `llm_complete`.

One job: send a step's messages to an OpenAI-compatible endpoint (via the official `openai`
SDK), get back JSON for that step, have `replies.py` parse it into the step's pydantic model and
report what it cost. Failures are expected events, not crashes: every one of them becomes an
`LLMError` with a `kind` the turn pipeline can act on (fallback reply, retry, escalation).

With no `OPENAI_API_KEY` the offline demo model (`apps.reasoning.offline`) answers instead and
no HTTP call is made. The wire protocol is documented in docs/llm-protocol.md.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Literal, cast

import httpx2
import jiter
import openai
from django.conf import settings
from django.core.cache import cache

from apps.billing.selectors import model_context_tokens
from apps.core import deadlines
from apps.core.db import release_connection
from apps.core.http import rest_of_body_within, wall_clock_client
from apps.reasoning import replies, steps
from apps.reasoning.offline import offline_complete

__all__ = [
    "MIN_COMPLETION_TOKENS",
    "OFFLINE_MODEL",
    "RESPONSE_FORMS",
    "STEP_HEADER",
    "LLMError",
    "LLMErrorKind",
    "LLMResult",
    "context_window",
    "correction_message",
    "estimate_tokens",
    "forget_response_formats",
    "format_instruction",
    "llm_complete",
    "llm_is_offline",
    "llm_model",
    "model_override",
    "parse_reply",
    "remembered_response_format",
    "response_format_refusals",
    "streaming",
]

logger = logging.getLogger(__name__)

LLMErrorKind = Literal[
    "timeout",
    "rate_limit",
    "server",
    "connection",
    "auth",
    "bad_request",
    "invalid_output",
    "truncated",
    "context_window",
]

STEP_HEADER = "X-GuideDesk-Step"
OFFLINE_MODEL = "offline-demo"
TEMPERATURE = 0.2
TOKENS_PER_MESSAGE = 4  # chat-format overhead per message in the usage estimate

# How the step's JSON is asked for, most constrained first. A provider that refuses one form
# (docs/llm-protocol.md, "Response format detection") gets the next within the same call.
ResponseForm = Literal["json_schema", "json_object+schema", "json_object", "text"]
RESPONSE_FORMS: tuple[ResponseForm, ...] = (
    "json_schema",
    "json_object+schema",
    "json_object",
    "text",
)
AUTO = "auto"  # LLM_RESPONSE_FORMAT's default: start at json_schema
# A step whose prompt leaves less room than this for the reply fails (`context_window`) rather
# than asking for a reply too short to hold the step's JSON.
MIN_COMPLETION_TOKENS = 128


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


# A caller that can show a reply while it is written (the widget) sets a sink with `streaming`:
# the calls made inside it ask the provider to stream (`stream=True`) and hand the sink the
# reply's JSON object as parsed so far (`jiter`'s partial mode: the fields complete up to now,
# the last string as far as it arrived), once per chunk. The result is the same as without it.
# A sink that returns False wants no more (e.g. the reply will not be shown): the gateway stops
# parsing the partial JSON for it and just collects the rest.
StreamSink = Callable[[dict[str, Any]], bool | None]
_STREAM_SINK: ContextVar[StreamSink | None] = ContextVar("llm_stream_sink", default=None)


class streaming:
    """`with streaming(sink):` — the model calls made inside stream their reply to `sink`
    (None = no streaming). What the gateway returns or raises does not change; a provider that
    cannot stream is answered without it (the sink then hears nothing)."""

    def __init__(self, sink: StreamSink | None) -> None:
        self.sink = sink
        self._token: Any = None

    def __enter__(self) -> None:
        self._token = _STREAM_SINK.set(self.sink)

    def __exit__(self, *exc: object) -> None:
        _STREAM_SINK.reset(self._token)


# --------------------------------------------------------------------------------------------
# Results and errors
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LLMResult[T]:
    """One successful model call: the validated output (`parsed`, an instance of the pydantic
    model passed as `output`) plus what it cost."""

    step: str
    parsed: T
    raw: str  # the model's text, verbatim
    model: str  # the model that answered (as the provider reports it), or "offline-demo"
    prompt_tokens: int
    completion_tokens: int
    tokens_estimated: bool  # True when the provider reported no usage and we estimated it
    latency_ms: int
    offline: bool  # True when the offline demo model answered
    # What the trace records beyond the reply: `response_format` (asked, used, refused) when a
    # provider refused a form, `context` when the prompt was shrunk or max_tokens capped.
    details: Mapping[str, Any] | None = None
    # Of `prompt_tokens`, those the provider served from its prompt cache
    # (`usage.prompt_tokens_details.cached_tokens`; 0 when it reports none).
    cached_tokens: int = 0


class LLMError(Exception):
    """A model call that produced no usable output.

    `kind` says what went wrong; `raw` holds the model's text when `kind == "invalid_output"`,
    and the token counts record what was spent anyway (an invalid answer is still billed).
    """

    def __init__(
        self,
        *,
        kind: LLMErrorKind,
        step: str,
        message: str,
        latency_ms: int = 0,
        raw: str = "",
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        tokens_estimated: bool = False,
        model: str = "",
        status_code: int | None = None,
        details: Mapping[str, Any] | None = None,
        cached_tokens: int = 0,
    ) -> None:
        super().__init__(f"LLM step {step!r} failed ({kind}): {message}")
        self.kind: LLMErrorKind = kind
        self.step = step
        self.message = message
        self.latency_ms = latency_ms
        self.raw = raw
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.tokens_estimated = tokens_estimated
        self.cached_tokens = cached_tokens  # of prompt_tokens, served from the provider's cache
        self.model = model  # the model asked (or that answered, for invalid output)
        self.status_code = status_code
        # What the trace records beyond the error (see `LLMResult.details`).
        self.details: dict[str, Any] = dict(details or {})

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        # Keyword-only __init__ defeats Exception's default pickling; errors may cross process
        # boundaries (Celery results, multiprocessing), so rebuild from the attributes.
        return (_restore_llm_error, (dict(self.__dict__),))


_LLM_ERROR_FIELDS = (
    "kind",
    "step",
    "message",
    "latency_ms",
    "raw",
    "prompt_tokens",
    "completion_tokens",
    "tokens_estimated",
    "model",
    "status_code",
    "details",
    "cached_tokens",
)


def _restore_llm_error(state: dict[str, Any]) -> LLMError:
    error = LLMError(**{name: state[name] for name in _LLM_ERROR_FIELDS if name in state})
    error.__dict__.update(state)  # anything else set later, e.g. `__notes__` from add_note()
    return error


# --------------------------------------------------------------------------------------------
# Token estimation (used when the provider reports no usage, and for the offline model)
# --------------------------------------------------------------------------------------------


def estimate_tokens(text: str) -> int:
    """Rough token count: one token per four characters, rounded up.

    tiktoken is not used on purpose: it downloads its encodings at run time and GuideDesk must
    run offline. Estimated counts are flagged (`tokens_estimated=True`) wherever they are used.
    """
    return math.ceil(len(text) / 4)


def _estimate_prompt_tokens(messages: list[dict[str, str]]) -> int:
    return sum(
        estimate_tokens(str(message.get("content") or "")) + TOKENS_PER_MESSAGE
        for message in messages
    )


# --------------------------------------------------------------------------------------------
# Reply parsing (apps/reasoning/replies.py)
# --------------------------------------------------------------------------------------------


def parse_reply[T](step: str, text: str, output: type[T]) -> T:
    """`replies.reply_parse`, its failures as `LLMError(kind="invalid_output")` (without tokens
    or latency — `llm_complete` adds those)."""
    try:
        return replies.reply_parse(step, text, output)
    except replies.InvalidReply as exc:
        raise LLMError(kind="invalid_output", step=step, message=str(exc), raw=text) from exc


# --------------------------------------------------------------------------------------------
# Request shaping
# --------------------------------------------------------------------------------------------


def _step_schema(
    step: str, output: type[Any], tool_names: Sequence[str] | None = None
) -> dict[str, Any]:
    """The JSON Schema requested for `step`: derived from its registered output model (or from
    `output`, when a caller validates a registered step's reply with another model). With
    `tool_names`, a `tool_call` field is narrowed to those names (or null), so a server that
    decodes under the schema cannot invent a tool; the registered schema is not changed."""
    registered = steps.get(step)
    if output is registered.output:
        schema = registered.schema
    else:
        schema = steps.response_schema(replies.pydantic_model(output))
    if tool_names is None or "tool_call" not in schema.get("properties", {}):
        return schema
    schema = copy.deepcopy(schema)
    field = schema["properties"]["tool_call"]
    names = list(dict.fromkeys(str(name) for name in tool_names))
    narrowed: dict[str, Any] = {"type": ["string", "null"] if names else "null"}
    narrowed["enum"] = [*names, None]
    if "description" in field:
        narrowed["description"] = field["description"]
    schema["properties"]["tool_call"] = narrowed
    return schema


def _type_name(spec: Mapping[str, Any]) -> str:
    if "enum" in spec:
        return "one of " + ", ".join(
            "null" if value is None else str(value) for value in spec["enum"]
        )
    if "anyOf" in spec:
        return " or ".join(_type_name(option) for option in spec["anyOf"])
    kind = spec.get("type", "any")
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    if kind == "array":
        items = spec.get("items")
        inner = _type_name(items) if isinstance(items, Mapping) else "any"
        plural = inner in ("string", "integer", "number", "boolean", "object")
        return f"array of {inner}s" if plural else f"array of {inner}"
    if kind in ("integer", "number") and "minimum" in spec and "maximum" in spec:
        return f"{kind} {spec['minimum']}–{spec['maximum']}"
    return str(kind)


def format_instruction(step: str, schema: Mapping[str, Any] | None = None) -> str:
    """The system line that asks for the step's JSON when json_schema mode is not available."""
    schema = schema if schema is not None else steps.get(step).schema
    properties: Mapping[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    fields: list[str] = []
    for name, spec in properties.items():
        described = f'"{name}" ({_type_name(spec)}'
        if name not in required:
            described += ", optional"
        described += ")"
        description = spec.get("description")
        if description:
            described += f" — {str(description).rstrip('.')}"
        fields.append(described)
    return (
        "Reply with a single JSON object and nothing else (no prose, no code fences), "
        f"with these keys: {'; '.join(fields)}."
    )


def _with_instruction(messages: list[dict[str, str]], line: str) -> list[dict[str, str]]:
    # Appended to the leading system message rather than sent as a new system message at the
    # end: several open-model chat templates (served by vLLM / Ollama) reject a system message
    # anywhere but first.
    sent = [dict(message) for message in messages]
    if sent and sent[0].get("role") == "system":
        content = sent[0].get("content") or ""
        sent[0]["content"] = f"{content}\n\n{line}" if content else line
    else:
        sent.insert(0, {"role": "system", "content": line})
    return sent


def _configured_form() -> ResponseForm:
    """The form to start from: LLM_RESPONSE_FORMAT, `auto` (the default) being json_schema."""
    mode = str(settings.LLM_RESPONSE_FORMAT or AUTO).strip().lower()
    if mode == AUTO:
        return RESPONSE_FORMS[0]
    if mode not in RESPONSE_FORMS:
        raise ValueError(
            f"LLM_RESPONSE_FORMAT must be {AUTO} or one of {', '.join(RESPONSE_FORMS)}, "
            f"not {mode!r}"
        )
    return cast(ResponseForm, mode)


def _build_request(
    step: str, messages: list[dict[str, str]], schema: dict[str, Any], form: ResponseForm
) -> tuple[list[dict[str, str]], dict[str, Any] | None]:
    """The messages to send and the `response_format` (None = omit it) for `form`."""
    if form == "json_schema":
        response_format = {
            "type": "json_schema",
            "json_schema": {"name": step, "schema": schema, "strict": False},
        }
        return [dict(message) for message in messages], response_format
    sent = _with_instruction(messages, format_instruction(step, schema))
    if form == "json_object+schema":
        # llama-cpp-python and llama.cpp's server decode under a schema given this way.
        return sent, {"type": "json_object", "schema": schema}
    if form == "json_object":
        return sent, {"type": "json_object"}
    return sent, None


def _instruction_tokens(step: str, schema: dict[str, Any], form: ResponseForm) -> int:
    """What `_build_request` adds to the prompt for `form` (estimated)."""
    if form == "json_schema":
        return 0
    return estimate_tokens(format_instruction(step, schema)) + 1


# --------------------------------------------------------------------------------------------
# What each provider accepts (detected; remembered per base URL and model)
# --------------------------------------------------------------------------------------------

type _ProviderKey = tuple[str, str]

_formats_lock = threading.Lock()
_formats: dict[_ProviderKey, ResponseForm] = {}
_refusals = 0  # refused calls in this process (each one a detection)
_FORMAT_CACHE_PREFIX = "llm:response-format:"
_FORMAT_CACHE_SECONDS = 7 * 24 * 3600
_REFUSAL_WORDS = ("response_format", "json_schema")


def _provider_key() -> _ProviderKey:
    return (str(settings.OPENAI_BASE_URL or "https://api.openai.com/v1"), llm_model())


def _format_cache_key(key: _ProviderKey) -> str:
    digest = hashlib.sha256("\n".join(key).encode()).hexdigest()[:32]
    return f"{_FORMAT_CACHE_PREFIX}{digest}"


def remembered_response_format(key: _ProviderKey | None = None) -> ResponseForm | None:
    """The form the provider (base URL, model; default: the configured one) accepted after
    refusing a more constrained one: this process's memory first, then Django's cache (what
    another process detected)."""
    key = key or _provider_key()
    with _formats_lock:
        known = _formats.get(key)
    if known is not None:
        return known
    try:
        cached = cache.get(_format_cache_key(key))
    except Exception:  # the cache is an aid: without it, detection simply runs again
        logger.warning("reading the remembered response format failed", exc_info=True)
        return None
    if cached not in RESPONSE_FORMS:
        return None
    form = cast(ResponseForm, cached)
    with _formats_lock:
        _formats[key] = form
    return form


def _remember(key: _ProviderKey, form: ResponseForm) -> None:
    with _formats_lock:
        _formats[key] = form
    try:
        cache.set(_format_cache_key(key), form, _FORMAT_CACHE_SECONDS)
    except Exception:
        logger.warning("storing the remembered response format failed", exc_info=True)


def forget_response_formats() -> None:
    """Forget what this process learnt about providers' response formats (Django's cache keeps
    its copy; tests clear both)."""
    global _refusals
    with _formats_lock:
        _formats.clear()
        _refusals = 0


def response_format_refusals() -> int:
    """How many calls a provider refused for their response_format in this process."""
    with _formats_lock:
        return _refusals


def _count_refusal() -> None:
    global _refusals
    with _formats_lock:
        _refusals += 1


def _refuses_format(exc: openai.OpenAIError) -> bool:
    """The provider refused the request's response_format: any 4xx or 5xx (but auth and rate
    limits) whose message or body names `response_format` or `json_schema`."""
    if not isinstance(exc, openai.APIStatusError):
        return False
    if exc.status_code < 400 or exc.status_code in (401, 403, 429):
        return False
    parts = [str(exc.message or "")]
    with contextlib.suppress(Exception):  # an unreadable body: the message alone decides
        parts.append(json.dumps(exc.body, default=str) if exc.body is not None else "")
        parts.append(exc.response.text)
    text = " ".join(parts).lower()
    return any(word in text for word in _REFUSAL_WORDS)


def _start_form() -> tuple[ResponseForm, _ProviderKey]:
    key = _provider_key()
    start = _configured_form()
    known = remembered_response_format(key)
    if known is not None and RESPONSE_FORMS.index(known) > RESPONSE_FORMS.index(start):
        start = known
    return start, key


# --------------------------------------------------------------------------------------------
# The model's context window
# --------------------------------------------------------------------------------------------


def context_window(model: str | None = None) -> int | None:
    """The context window (tokens) of `model` (default: LLM_MODEL): its model price's
    `context_tokens` when set, else LLM_CONTEXT_TOKENS; None when unknown (0)."""
    model = model or llm_model()
    try:
        per_model = model_context_tokens(model)
    except Exception:  # a price table that cannot be read must not fail the call
        logger.warning("reading the context window of %s failed", model, exc_info=True)
        per_model = None
    window = per_model or int(settings.LLM_CONTEXT_TOKENS or 0)
    return window if window > 0 else None


def _fit(
    step: str,
    messages: list[dict[str, str]],
    *,
    window: int | None,
    max_tokens: int,
    extra_tokens: int,
) -> tuple[list[dict[str, str]], int, dict[str, Any] | None]:
    """Fit `messages` (plus `extra_tokens` we add to them) and the reply inside `window`.

    Messages the prompt marks as shrinkable (`steps.Prompt.shrinkable`: the oldest history
    first, then the notes block) are left out until prompt + max_tokens fits; the system
    message and the current customer message never are. When the rest still leaves less than
    max_tokens, max_tokens is capped to what is left, down to MIN_COMPLETION_TOKENS; below that
    the step cannot run (`LLMError(kind="context_window")`, no HTTP call). All counts are the
    gateway's estimate (`estimate_tokens`). Returns (messages, max_tokens, details or None)."""
    if window is None:
        return list(messages), max_tokens, None
    kept = list(range(len(messages)))
    dropped: list[int] = []

    def prompt_tokens() -> int:
        return _estimate_prompt_tokens([messages[i] for i in kept]) + extra_tokens

    for index in getattr(messages, "shrinkable", ()):
        if prompt_tokens() + max_tokens <= window:
            break
        if index in kept:
            kept.remove(index)
            dropped.append(index)
    estimate = prompt_tokens()
    room = window - estimate
    floor = min(MIN_COMPLETION_TOKENS, max_tokens)
    details = {
        "window": window,
        "prompt_tokens_estimated": estimate,
        "max_tokens": min(max_tokens, max(room, 0)),
        "dropped_messages": len(dropped),
    }
    if room < floor:
        raise LLMError(
            kind="context_window",
            step=step,
            message=(
                f"the prompt needs about {estimate} tokens (estimated) and the reply at least "
                f"{floor}, but the model's context window is {window} tokens"
                + (f" (after leaving out {len(dropped)} history/notes messages)" if dropped else "")
            ),
            model=llm_model(),
            details={"context": details},
        )
    if not dropped and room >= max_tokens:
        return list(messages), max_tokens, None
    return [messages[i] for i in kept], min(max_tokens, room), details


# --------------------------------------------------------------------------------------------
# The SDK client (cached; rebuilt when the settings it is built from change)
# --------------------------------------------------------------------------------------------

type _ClientKey = tuple[str, str | None, float]

_client_lock = threading.Lock()
_cached_client: tuple[_ClientKey, openai.OpenAI] | None = None


def _client() -> openai.OpenAI:
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


# --------------------------------------------------------------------------------------------
# The gateway
# --------------------------------------------------------------------------------------------


def _elapsed_ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)


def _sdk_error(step: str, exc: openai.OpenAIError, latency_ms: int) -> LLMError:
    kind: LLMErrorKind
    status_code: int | None = None
    if isinstance(exc, openai.APITimeoutError):  # before APIConnectionError: it subclasses it
        kind, message = "timeout", f"no answer within {settings.LLM_TIMEOUT}s"
    elif isinstance(exc, openai.APIConnectionError):
        kind, message = "connection", f"could not reach the LLM endpoint: {exc}"
    elif isinstance(exc, openai.APIStatusError):
        status_code = exc.status_code
        message = f"HTTP {status_code}: {exc.message}"
        if isinstance(exc, openai.RateLimitError):
            kind = "rate_limit"
        elif status_code in (401, 403):
            kind = "auth"
        elif status_code >= 500:
            kind = "server"
        else:
            kind = "bad_request"
    else:  # e.g. APIResponseValidationError: the provider answered something unreadable
        kind, message = "server", f"{type(exc).__name__}: {exc}"
    return LLMError(
        kind=kind,
        step=step,
        message=message,
        latency_ms=latency_ms,
        model=llm_model(),
        status_code=status_code,
    )


def _fail(error: LLMError) -> LLMError:
    logger.warning(
        "LLM step %s failed (%s) after %d ms: %s",
        error.step,
        error.kind,
        error.latency_ms,
        error.message,
    )
    return error


def _cached_tokens(usage: Any, prompt_tokens: int) -> int:
    """The prompt tokens the provider served from its prompt cache
    (`usage.prompt_tokens_details.cached_tokens`, as OpenAI reports it), 0 when not reported."""
    details = getattr(usage, "prompt_tokens_details", None)
    if isinstance(details, Mapping):
        cached = details.get("cached_tokens")
    else:
        cached = getattr(details, "cached_tokens", None)
    if not isinstance(cached, int) or isinstance(cached, bool) or cached < 0:
        return 0
    return min(cached, prompt_tokens)


def _reported_usage(usage: Any) -> tuple[int, int] | None:
    """(prompt, completion) from the provider's `usage`, or None when it reported nothing."""
    if usage is None:
        return None
    prompt = getattr(usage, "prompt_tokens", None)
    completion = getattr(usage, "completion_tokens", None)
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    if prompt == 0 and completion == 0:
        return None  # some compatible servers send an all-zero usage object instead of none
    return prompt, completion


def _parse_spent[T](
    step: str,
    raw: str,
    output: type[T],
    started: float,
    prompt_tokens: int,
    completion_tokens: int,
    *,
    estimated: bool,
    model: str,
    details: Mapping[str, Any] | None = None,
) -> T:
    """`parse_reply`, but an invalid reply's error carries the latency and tokens it cost."""
    try:
        return parse_reply(step, raw, output)
    except LLMError as exc:
        raise _fail(
            LLMError(
                kind="invalid_output",
                step=step,
                message=exc.message,
                latency_ms=_elapsed_ms(started),
                raw=raw,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                tokens_estimated=estimated,
                model=model,
                details=details,
            )
        ) from exc


def correction_message(error: LLMError) -> str | None:
    """What the retry of a step whose reply broke its contract tells the model (an extra user
    message: our words, quoting our validator), or None for a failure the model did not cause."""
    if error.kind == "invalid_output":
        return (
            f"Your reply was not valid: {error.message}. Reply again with a single JSON object "
            "that follows the requested format, every required field filled in."
        )
    if error.kind == "truncated":
        return (
            f"Your reply was cut off: {error.message}. Reply again with a single, complete "
            "JSON object that follows the requested format, and keep it short."
        )
    return None


def _response_format_details(
    asked: ResponseForm, used: ResponseForm, refused: list[ResponseForm]
) -> dict[str, Any]:
    return {"response_format": {"asked": asked, "used": used, "refused": list(refused)}}


def llm_complete[T](
    *,
    step: str,
    messages: list[dict[str, str]],
    output: type[T],
    offline_hint: dict[str, Any] | None = None,
    tool_names: Sequence[str] | None = None,
    correction: str | None = None,
) -> LLMResult[T]:
    """Ask the model for `step`'s JSON and return it validated as `output`.

    Raises `LLMError` on any failure (transport, HTTP status, unusable or truncated output, a
    prompt that cannot fit the model's context window), and `UnknownStep` when no step of that
    name is registered (`apps/reasoning/steps/`). `offline_hint` is passed to the offline demo
    model only (it tells the demo what a real model would do). `tool_names` narrows the
    schema's `tool_call` to those names (the client's enabled tools). `correction` is sent as a
    last user message (a retry quoting why the previous reply was refused).

    A provider that refuses the response_format gets the next form (`RESPONSE_FORMS`) in the
    same call; what it accepted is remembered (docs/llm-protocol.md).
    """
    steps.get(step)  # an unknown step is a programming error: fail before anything is spent
    if correction:
        messages = _corrected(messages, correction)
    if llm_is_offline():
        return _offline_complete(step, messages, output, offline_hint or {})

    schema = _step_schema(step, output, tool_names)
    asked, key = _start_form()
    window = context_window()
    refused: list[ResponseForm] = []
    started = time.perf_counter()
    completion: Any = None
    details: dict[str, Any] = {}
    for form in RESPONSE_FORMS[RESPONSE_FORMS.index(asked) :]:
        details = _response_format_details(asked, form, refused) if refused else {}
        try:
            fitted, max_tokens, fit = _fit(
                step,
                messages,
                window=window,
                max_tokens=int(settings.LLM_MAX_COMPLETION_TOKENS),
                extra_tokens=_instruction_tokens(step, schema, form),
            )
        except LLMError as exc:
            exc.details.update(details)
            exc.latency_ms = _elapsed_ms(started)
            raise _fail(exc) from None
        if fit is not None:
            details["context"] = fit
        sent, response_format = _build_request(step, fitted, schema, form)
        kwargs: dict[str, Any] = {}
        if response_format is not None:
            kwargs["response_format"] = response_format

        # No call starts once the turn's deadline has passed (raises DeadlineExceeded); one
        # that starts gets LLM_TIMEOUT or what is left of the deadline, whichever is shorter.
        allowed = deadlines.time_for(float(settings.LLM_TIMEOUT))
        release_connection()  # no database connection is held while the model thinks
        sink = _STREAM_SINK.get() if key not in _no_stream else None
        try:
            if sink is None:
                completion = _client().chat.completions.create(
                    model=llm_model(),
                    **_messages_param(sent),
                    temperature=TEMPERATURE,
                    max_tokens=max_tokens,
                    extra_headers={STEP_HEADER: step},
                    timeout=allowed,
                    **kwargs,
                )
            else:
                completion = _streamed_completion(
                    sent, max_tokens=max_tokens, step=step, timeout=allowed, sink=sink, **kwargs
                )
        except openai.OpenAIError as exc:
            if sink is not None and _refuses_stream(exc):
                # Streaming is a nicety: a provider that refuses it answers without it.
                _no_stream.add(key)
                logger.warning("LLM provider %s (%s) refused stream=True", key[0], key[1])
                try:
                    completion = _client().chat.completions.create(
                        model=llm_model(),
                        **_messages_param(sent),
                        temperature=TEMPERATURE,
                        max_tokens=max_tokens,
                        extra_headers={STEP_HEADER: step},
                        timeout=deadlines.time_for(float(settings.LLM_TIMEOUT)),
                        **kwargs,
                    )
                except openai.OpenAIError as retry_exc:
                    exc = retry_exc
                else:
                    break
            if form != "text" and _refuses_format(exc):
                # A capability, not a failure: the next form, in this same call.
                refused.append(form)
                _count_refusal()
                # Remembered at once, not after a success: when the next form's call then times
                # out on a slow server, the next call still starts past the refused form.
                _remember(key, RESPONSE_FORMS[RESPONSE_FORMS.index(form) + 1])
                logger.warning(
                    "LLM provider %s (%s) refused response_format %s; trying the next form",
                    key[0],
                    key[1],
                    form,
                )
                continue
            error = _sdk_error(step, exc, _elapsed_ms(started))
            error.details.update(details)
            raise _fail(error) from exc
        if refused:
            logger.warning(
                "LLM provider %s (%s) takes response_format %s (refused: %s)",
                key[0],
                key[1],
                form,
                ", ".join(refused),
            )
        break

    choices = getattr(completion, "choices", None) or []
    choice = choices[0] if choices else None
    message = choice.message if choice is not None else None
    raw = (message.content if message is not None else None) or ""
    model = str(getattr(completion, "model", None) or llm_model())

    usage = _reported_usage(getattr(completion, "usage", None))
    if usage is None:
        prompt_tokens, completion_tokens = _estimate_prompt_tokens(sent), estimate_tokens(raw)
        cached_tokens = 0
    else:
        prompt_tokens, completion_tokens = usage
        cached_tokens = _cached_tokens(getattr(completion, "usage", None), prompt_tokens)
    estimated = usage is None

    refusal = getattr(message, "refusal", None) if message is not None else None
    if refusal and not raw.strip():
        raw = str(refusal)  # a refusal is the model's text; keep it for the trace
    if getattr(choice, "finish_reason", None) == "length":
        raise _fail(
            LLMError(
                kind="truncated",
                step=step,
                message=(
                    f"the reply reached the {max_tokens}-token limit "
                    f"({completion_tokens} completion tokens) before it was complete"
                ),
                latency_ms=_elapsed_ms(started),
                raw=raw,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                tokens_estimated=estimated,
                model=model,
                details=details,
                cached_tokens=cached_tokens,
            )
        )
    try:
        parsed = _parse_spent(
            step,
            raw,
            output,
            started,
            prompt_tokens,
            completion_tokens,
            estimated=estimated,
            model=model,
            details=details,
        )
    except LLMError as exc:
        exc.cached_tokens = cached_tokens
        raise

    return LLMResult(
        step=step,
        parsed=parsed,
        raw=raw,
        model=model,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        tokens_estimated=estimated,
        latency_ms=_elapsed_ms(started),
        offline=False,
        details=details or None,
        cached_tokens=cached_tokens,
    )


# Providers (base URL, model) that refused `stream=True` in this process: asked without it.
_no_stream: set[_ProviderKey] = set()


def _refuses_stream(exc: openai.OpenAIError) -> bool:
    """A 400/422 that names `stream`: the provider does not stream (a refused response_format
    is told apart first, by `_refuses_format`)."""
    if not isinstance(exc, openai.APIStatusError) or exc.status_code not in (400, 422):
        return False
    if _refuses_format(exc):
        return False
    return "stream" in str(exc.message or "").lower()


def _messages_param(sent: list[dict[str, str]]) -> dict[str, Any]:
    """The `messages` of a call, for `create(**…)`. The SDK's parameter transform walks every
    message against its TypedDicts (≈ 3 ms of CPU for a ten-message prompt, per call) and
    changes nothing in plain role/content strings, so they go in as `extra_body`, which the SDK
    sends as they are; the request body is the same JSON."""
    return {"messages": [], "extra_body": {"messages": sent}}


def _streamed_completion(
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
    response = _client().chat.completions.with_raw_response.create(
        model=llm_model(),
        **_messages_param(sent),
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
                listening = _tell(sink, "".join(parts))
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
    """A streamed `usage` dict read as `_reported_usage` and `_cached_tokens` read the SDK's
    usage object (its `prompt_tokens_details` stays a dict, which `_cached_tokens` reads)."""
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


def _tell(sink: StreamSink, text: str) -> bool:
    """The reply so far, parsed as far as it goes, to the sink (which must never break the
    call: a failing sink is logged and hears no more). False: the sink wants no more."""
    start = text.find("{")
    if start < 0:
        return True
    try:
        partial = jiter.from_json(text[start:].encode(), partial_mode="trailing-strings")
    except ValueError:
        return True  # not JSON (yet, or at all): nothing to tell
    if not isinstance(partial, dict):
        return True
    try:
        return sink(partial) is not False
    except Exception:
        logger.exception("LLM stream sink failed")
        return False


def _corrected(messages: list[dict[str, str]], correction: str) -> list[dict[str, str]]:
    """`messages` plus the correction as a last user message, keeping what may be shrunk."""
    return steps.Prompt(
        [*messages, {"role": "user", "content": correction}],
        shrinkable=getattr(messages, "shrinkable", ()),
    )


def _offline_complete[T](
    step: str, messages: list[dict[str, str]], output: type[T], hint: dict[str, Any]
) -> LLMResult[T]:
    started = time.perf_counter()
    prompt_tokens = _estimate_prompt_tokens(messages)
    try:
        raw = offline_complete(step, messages, hint)
    except Exception as exc:  # a bug in the demo model must not crash a turn
        logger.exception("offline demo model failed on step %s", step)
        raise LLMError(
            kind="server",
            step=step,
            message=f"offline demo model failed: {type(exc).__name__}: {exc}",
            latency_ms=_elapsed_ms(started),
            prompt_tokens=prompt_tokens,
            tokens_estimated=True,
            model=OFFLINE_MODEL,
        ) from exc

    sink = _STREAM_SINK.get()
    if sink is not None:
        raw = _offline_stream(raw, output, sink)
    completion_tokens = estimate_tokens(raw)
    parsed = _parse_spent(
        step,
        raw,
        output,
        started,
        prompt_tokens,
        completion_tokens,
        estimated=True,
        model=OFFLINE_MODEL,
    )

    return LLMResult(
        step=step,
        parsed=parsed,
        raw=raw,
        model=OFFLINE_MODEL,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        tokens_estimated=True,
        latency_ms=_elapsed_ms(started),
        offline=True,
    )


def _offline_stream(raw: str, output: type[Any], sink: StreamSink) -> str:
    """The offline demo model writes as a real one does when streamed: its JSON in the order the
    schema asks for (the reply text last), four characters at a time, one piece every
    `LLM_OFFLINE_STREAM_SECONDS` (0: all at once), each piece told to the sink."""
    last = getattr(output, "written_last", None)
    with contextlib.suppress(ValueError):
        value = json.loads(raw)
        if isinstance(value, dict) and last in value:
            value[last] = value.pop(last)
            raw = json.dumps(value, ensure_ascii=False)
    pause = float(settings.LLM_OFFLINE_STREAM_SECONDS or 0)
    text_from = raw.rfind(f'"{last}"') if last else 0  # the deciding fields come at once
    for end in range(4, len(raw) + 4, 4):
        if pause > 0 and end > text_from:
            time.sleep(pause)
        if not _tell(sink, raw[:end]):
            break  # not shown: the demo need not write it out
    return raw
