"""The LLM gateway: every model call in GuideDesk goes through `llm_complete`.

One job: send a step's messages to an OpenAI-compatible endpoint (via the official `openai`
SDK), get back JSON for that step, have `replies.py` parse it into the step's pydantic model and
report what it cost. Failures are expected events, not crashes: every one of them becomes an
`LLMError` with a `kind` the turn pipeline can act on (fallback reply, retry, escalation).

With no `OPENAI_API_KEY` the offline demo model (`apps.reasoning.llm.offline`) answers instead and
no HTTP call is made. The wire protocol is documented in docs/llm-protocol.md.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import openai
from django.conf import settings

from apps.core import deadlines
from apps.platform.db import release_connection
from apps.reasoning import steps
from apps.reasoning.llm.client import (
    STEP_HEADER,
    TEMPERATURE,
    llm_is_offline,
    llm_model,
    messages_param,
    sdk_client,
)
from apps.reasoning.llm.errors import (
    LLMError,
    LLMResult,
    elapsed_ms,
    logged_failure,
    parse_spent,
    sdk_error,
)
from apps.reasoning.llm.formats import (
    RESPONSE_FORMS,
    ProviderKey,
    ResponseForm,
    build_request,
    count_refusal,
    instruction_tokens,
    refuses_format,
    remember_form,
    response_format_details,
    start_form,
    step_schema,
)
from apps.reasoning.llm.offline import offline_result
from apps.reasoning.llm.stream import (
    STREAM_SINK,
    no_stream,
    refuses_stream,
    streamed_completion,
)
from apps.reasoning.llm.window import (
    context_window,
    estimate_prompt_tokens,
    estimate_tokens,
    fit_window,
)

logger = logging.getLogger("apps.reasoning.llm")


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


def _corrected(messages: list[dict[str, str]], correction: str) -> list[dict[str, str]]:
    """`messages` plus the correction as a last user message, keeping what may be shrunk."""
    return steps.Prompt(
        [*messages, {"role": "user", "content": correction}],
        shrinkable=getattr(messages, "shrinkable", ()),
    )


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
        return offline_result(step, messages, output, offline_hint or {})

    started = time.perf_counter()
    completion, request = _ask(step, messages, step_schema(step, output, tool_names), started)
    return _result(step, completion, request, output, started)


@dataclass
class _Request:
    """One form's request: the messages sent, the reply's token limit, the `create` keywords
    beyond them, and what the trace records of it (`LLMResult.details`)."""

    sent: list[dict[str, str]]
    max_tokens: int
    kwargs: dict[str, Any]
    details: dict[str, Any]


def _ask(
    step: str, messages: list[dict[str, str]], schema: dict[str, Any], started: float
) -> tuple[Any, _Request]:
    """The provider's completion, asked in the first form it accepts (a refused form is a
    capability, not a failure: the next form goes in this same call)."""
    asked, key = start_form()
    window = context_window()
    refused: list[ResponseForm] = []
    for form in RESPONSE_FORMS[RESPONSE_FORMS.index(asked) :]:
        details = response_format_details(asked, form, refused) if refused else {}
        request = _request(step, messages, schema, form, window, details, started)
        try:
            completion = _create(step, request, key)
        except openai.OpenAIError as exc:
            if form != RESPONSE_FORMS[-1] and refuses_format(exc):
                _refused(key, form, refused)
                continue
            error = sdk_error(step, exc, elapsed_ms(started))
            error.details.update(details)
            raise logged_failure(error) from exc
        if refused:
            logger.warning(
                "LLM provider %s (%s) takes response_format %s (refused: %s)",
                key[0],
                key[1],
                form,
                ", ".join(refused),
            )
        return completion, request
    raise AssertionError("the last form (text) is never refused")  # pragma: no cover


def _request(
    step: str,
    messages: list[dict[str, str]],
    schema: dict[str, Any],
    form: ResponseForm,
    window: int | None,
    details: dict[str, Any],
    started: float,
) -> _Request:
    """The request for `form`: the prompt fitted into the context window (or the step fails
    with `context_window`, no HTTP call), the format instruction and `response_format`."""
    try:
        fitted, max_tokens, fit = fit_window(
            step,
            messages,
            window=window,
            max_tokens=int(settings.LLM_MAX_COMPLETION_TOKENS),
            extra_tokens=instruction_tokens(step, schema, form),
        )
    except LLMError as exc:
        exc.details.update(details)
        exc.latency_ms = elapsed_ms(started)
        raise logged_failure(exc) from None
    if fit is not None:
        details["context"] = fit
    sent, response_format = build_request(step, fitted, schema, form)
    kwargs: dict[str, Any] = {}
    if response_format is not None:
        kwargs["response_format"] = response_format
    return _Request(sent=sent, max_tokens=max_tokens, kwargs=kwargs, details=details)


def _create(step: str, request: _Request, key: ProviderKey) -> Any:
    """One call to the provider, streamed to the current sink when there is one. Raises the
    SDK's errors."""
    # No call starts once the turn's deadline has passed (raises DeadlineExceeded); one
    # that starts gets LLM_TIMEOUT or what is left of the deadline, whichever is shorter.
    allowed = deadlines.time_for(float(settings.LLM_TIMEOUT))
    release_connection()  # no database connection is held while the model thinks
    sink = STREAM_SINK.get() if key not in no_stream else None
    if sink is None:
        return _plain_create(step, request, allowed)
    try:
        return streamed_completion(
            request.sent,
            max_tokens=request.max_tokens,
            step=step,
            timeout=allowed,
            sink=sink,
            **request.kwargs,
        )
    except openai.OpenAIError as exc:
        if not refuses_stream(exc):
            raise
    # Streaming is a nicety: a provider that refuses it answers without it.
    no_stream.add(key)
    logger.warning("LLM provider %s (%s) refused stream=True", key[0], key[1])
    return _plain_create(step, request, deadlines.time_for(float(settings.LLM_TIMEOUT)))


def _plain_create(step: str, request: _Request, timeout: float | None) -> Any:
    return sdk_client().chat.completions.create(
        model=llm_model(),
        **messages_param(request.sent),
        temperature=TEMPERATURE,
        max_tokens=request.max_tokens,
        extra_headers={STEP_HEADER: step},
        timeout=timeout,
        **request.kwargs,
    )


def _refused(key: ProviderKey, form: ResponseForm, refused: list[ResponseForm]) -> None:
    """Note that the provider refused `form`."""
    refused.append(form)
    count_refusal()
    # Remembered at once, not after a success: when the next form's call then times
    # out on a slow server, the next call still starts past the refused form.
    remember_form(key, RESPONSE_FORMS[RESPONSE_FORMS.index(form) + 1])
    logger.warning(
        "LLM provider %s (%s) refused response_format %s; trying the next form",
        key[0],
        key[1],
        form,
    )


def _result[T](
    step: str, completion: Any, request: _Request, output: type[T], started: float
) -> LLMResult[T]:
    """The completion's reply validated as `output`, with what it cost; a reply cut off at
    max_tokens raises `truncated`, one that breaks the step's contract `invalid_output`."""
    choices = getattr(completion, "choices", None) or []
    choice = choices[0] if choices else None
    message = choice.message if choice is not None else None
    raw = (message.content if message is not None else None) or ""
    model = str(getattr(completion, "model", None) or llm_model())
    spent = _spent(completion, request.sent, raw)
    details = request.details

    refusal = getattr(message, "refusal", None) if message is not None else None
    if refusal and not raw.strip():
        raw = str(refusal)  # a refusal is the model's text; keep it for the trace
    if getattr(choice, "finish_reason", None) == "length":
        raise logged_failure(
            LLMError(
                kind="truncated",
                step=step,
                message=(
                    f"the reply reached the {request.max_tokens}-token limit "
                    f"({spent.completion_tokens} completion tokens) before it was complete"
                ),
                latency_ms=elapsed_ms(started),
                raw=raw,
                prompt_tokens=spent.prompt_tokens,
                completion_tokens=spent.completion_tokens,
                tokens_estimated=spent.estimated,
                model=model,
                details=details,
                cached_tokens=spent.cached_tokens,
            )
        )
    try:
        parsed = parse_spent(
            step,
            raw,
            output,
            started,
            spent.prompt_tokens,
            spent.completion_tokens,
            estimated=spent.estimated,
            model=model,
            details=details,
        )
    except LLMError as exc:
        exc.cached_tokens = spent.cached_tokens
        raise

    return LLMResult(
        step=step,
        parsed=parsed,
        raw=raw,
        model=model,
        prompt_tokens=spent.prompt_tokens,
        completion_tokens=spent.completion_tokens,
        tokens_estimated=spent.estimated,
        latency_ms=elapsed_ms(started),
        offline=False,
        details=details or None,
        cached_tokens=spent.cached_tokens,
    )


@dataclass(frozen=True)
class _Spent:
    """The tokens a call cost: as the provider reported them, or estimated when it did not."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    estimated: bool


def _spent(completion: Any, sent: list[dict[str, str]], raw: str) -> _Spent:
    usage = _reported_usage(getattr(completion, "usage", None))
    if usage is None:
        return _Spent(estimate_prompt_tokens(sent), estimate_tokens(raw), 0, estimated=True)
    prompt_tokens, completion_tokens = usage
    cached_tokens = _cached_tokens(getattr(completion, "usage", None), prompt_tokens)
    return _Spent(prompt_tokens, completion_tokens, cached_tokens, estimated=False)
