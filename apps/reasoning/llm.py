"""The LLM gateway: every model call in GuideDesk goes through `llm_complete`.

One job: send a step's messages to an OpenAI-compatible endpoint (via the official `openai`
SDK), get back JSON for that step, have `replies.py` parse it into the step's pydantic model and
report what it cost. Failures are expected events, not crashes: every one of them becomes an
`LLMError` with a `kind` the turn pipeline can act on (fallback reply, retry, escalation).

With no `OPENAI_API_KEY` the offline demo model (`apps.reasoning.offline`) answers instead and
no HTTP call is made. The wire protocol is documented in docs/llm-protocol.md.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal, cast

import openai
from django.conf import settings

from apps.core import deadlines
from apps.core.db import release_connection
from apps.core.http import wall_clock_client
from apps.reasoning import replies, steps
from apps.reasoning.offline import offline_complete

__all__ = [
    "OFFLINE_MODEL",
    "STEP_HEADER",
    "LLMError",
    "LLMErrorKind",
    "LLMResult",
    "estimate_tokens",
    "format_instruction",
    "llm_complete",
    "llm_is_offline",
    "llm_model",
    "model_override",
    "parse_reply",
]

logger = logging.getLogger(__name__)

LLMErrorKind = Literal[
    "timeout", "rate_limit", "server", "connection", "auth", "bad_request", "invalid_output"
]

STEP_HEADER = "X-GuideDesk-Step"
OFFLINE_MODEL = "offline-demo"
TEMPERATURE = 0.2
TOKENS_PER_MESSAGE = 4  # chat-format overhead per message in the usage estimate

ResponseFormatMode = Literal["json_schema", "json_object", "text"]
_RESPONSE_FORMAT_MODES: tuple[ResponseFormatMode, ...] = ("json_schema", "json_object", "text")


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
        self.model = model  # the model asked (or that answered, for invalid output)
        self.status_code = status_code

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


def _step_schema(step: str, output: type[Any]) -> dict[str, Any]:
    """The JSON Schema requested for `step`: derived from its registered output model (or from
    `output`, when a caller validates a registered step's reply with another model)."""
    registered = steps.get(step)
    if output is registered.output:
        return registered.schema
    return steps.response_schema(replies.pydantic_model(output))


def _type_name(spec: Mapping[str, Any]) -> str:
    if "enum" in spec:
        return "one of " + ", ".join(str(value) for value in spec["enum"])
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


def _response_format_mode() -> ResponseFormatMode:
    mode = str(getattr(settings, "LLM_RESPONSE_FORMAT", "json_schema") or "json_schema").lower()
    if mode not in _RESPONSE_FORMAT_MODES:
        raise ValueError(
            f"LLM_RESPONSE_FORMAT must be one of {', '.join(_RESPONSE_FORMAT_MODES)}, not {mode!r}"
        )
    return cast(ResponseFormatMode, mode)


def _build_request(
    step: str, messages: list[dict[str, str]], output: type[Any]
) -> tuple[list[dict[str, str]], dict[str, Any] | None]:
    """The messages to send and the `response_format` (None = omit it) for the current mode."""
    schema = _step_schema(step, output)
    mode = _response_format_mode()
    if mode == "json_schema":
        response_format = {
            "type": "json_schema",
            "json_schema": {"name": step, "schema": schema, "strict": False},
        }
        return [dict(message) for message in messages], response_format
    sent = _with_instruction(messages, format_instruction(step, schema))
    if mode == "json_object":
        return sent, {"type": "json_object"}
    return sent, None


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
        model=str(settings.LLM_MODEL),
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
            )
        ) from exc


def llm_complete[T](
    *,
    step: str,
    messages: list[dict[str, str]],
    output: type[T],
    offline_hint: dict[str, Any] | None = None,
) -> LLMResult[T]:
    """Ask the model for `step`'s JSON and return it validated as `output`.

    Raises `LLMError` on any failure (transport, HTTP status, unusable output), and
    `UnknownStep` when no step of that name is registered (`apps/reasoning/steps/`).
    `offline_hint` is passed to the offline demo model only (it tells the demo what a real model
    would do).
    """
    steps.get(step)  # an unknown step is a programming error: fail before anything is spent
    if llm_is_offline():
        return _offline_complete(step, messages, output, offline_hint or {})

    sent, response_format = _build_request(step, messages, output)
    kwargs: dict[str, Any] = {}
    if response_format is not None:
        kwargs["response_format"] = response_format

    # No call starts once the turn's deadline has passed (raises DeadlineExceeded); one that
    # starts gets LLM_TIMEOUT or what is left of the deadline, whichever is shorter.
    allowed = deadlines.time_for(float(settings.LLM_TIMEOUT))
    release_connection()  # no database connection is held while the model thinks
    started = time.perf_counter()
    try:
        completion = _client().chat.completions.create(
            model=llm_model(),
            messages=cast(Any, sent),
            temperature=TEMPERATURE,
            max_tokens=settings.LLM_MAX_COMPLETION_TOKENS,
            extra_headers={STEP_HEADER: step},
            timeout=allowed,
            **kwargs,
        )
    except openai.OpenAIError as exc:
        raise _fail(_sdk_error(step, exc, _elapsed_ms(started))) from exc

    choices = getattr(completion, "choices", None) or []
    message = choices[0].message if choices else None
    raw = (message.content if message is not None else None) or ""
    model = str(getattr(completion, "model", None) or llm_model())

    usage = _reported_usage(getattr(completion, "usage", None))
    if usage is None:
        prompt_tokens, completion_tokens = _estimate_prompt_tokens(sent), estimate_tokens(raw)
    else:
        prompt_tokens, completion_tokens = usage
    estimated = usage is None

    refusal = getattr(message, "refusal", None) if message is not None else None
    if refusal and not raw.strip():
        raw = str(refusal)  # a refusal is the model's text; keep it for the trace
    parsed = _parse_spent(
        step,
        raw,
        output,
        started,
        prompt_tokens,
        completion_tokens,
        estimated=estimated,
        model=model,
    )

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
