"""What a model call yields: `LLMResult`, or an `LLMError` whose `kind` the turn pipeline acts on
(fallback reply, retry, escalation), and the reply parsing that turns text into one or the other."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import openai
from django.conf import settings

from apps.reasoning import replies
from apps.reasoning.llm.client import llm_model

logger = logging.getLogger("apps.reasoning.llm")


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


def parse_reply[T](step: str, text: str, output: type[T]) -> T:
    """`replies.reply_parse`, its failures as `LLMError(kind="invalid_output")` (without tokens
    or latency — `llm_complete` adds those)."""
    try:
        return replies.reply_parse(step, text, output)
    except replies.InvalidReply as exc:
        raise LLMError(kind="invalid_output", step=step, message=str(exc), raw=text) from exc


def elapsed_ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)


def sdk_error(step: str, exc: openai.OpenAIError, latency_ms: int) -> LLMError:
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


def logged_failure(error: LLMError) -> LLMError:
    logger.warning(
        "LLM step %s failed (%s) after %d ms: %s",
        error.step,
        error.kind,
        error.latency_ms,
        error.message,
    )
    return error


def parse_spent[T](
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
        raise logged_failure(
            LLMError(
                kind="invalid_output",
                step=step,
                message=exc.message,
                latency_ms=elapsed_ms(started),
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
