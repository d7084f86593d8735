"""The offline demo model: a small deterministic responder that speaks the LLM protocol, so the
demo shows the whole flow — context fetches, critique, confirmation, tools — with no API key.

It is clearly labelled (model name "offline-demo"; replies carry `"offline": true`). Each step
declares its own offline answer (`apps/reasoning/steps/<step>.py`); this module dispatches
through the step registry, so a step with no offline answer cannot exist and an unknown step is
an error (`UnknownStep`), never a generic answer. The answers read the structured `hint` the
pipeline passes alongside the prompt rather than the prompt itself — except the language the
prompt asks the reply in (it answers the README's flows in English, Spanish and Hebrew).
The gateway answers with it when no `OPENAI_API_KEY` is set (`offline_result`: tokens
estimated, the reply streamed as a real model writes it when a sink listens). It is not used by
the tests of the real path, which run the openai SDK against a local server."""

from __future__ import annotations

import contextlib
import json
import logging
import time
from typing import Any

from django.conf import settings

from apps.reasoning import steps
from apps.reasoning.llm.client import OFFLINE_MODEL
from apps.reasoning.llm.errors import LLMError, LLMResult, elapsed_ms, parse_spent
from apps.reasoning.llm.stream import STREAM_SINK, StreamSink, tell_sink
from apps.reasoning.llm.window import estimate_prompt_tokens, estimate_tokens
from apps.reasoning.steps import language_asked

logger = logging.getLogger("apps.reasoning.llm")


def offline_complete(step: str, messages: list[dict[str, str]], hint: dict[str, Any]) -> str:
    # The one thing it reads from the prompt, as a model would: the language it is asked to
    # reply in (the system message's last line, "Reply in Spanish (es).").
    hint = {**hint, "language": language_asked(messages) or "en"}
    return json.dumps(steps.get(step).offline(hint), ensure_ascii=False)


def offline_result[T](
    step: str, messages: list[dict[str, str]], output: type[T], hint: dict[str, Any]
) -> LLMResult[T]:
    started = time.perf_counter()
    prompt_tokens = estimate_prompt_tokens(messages)
    try:
        raw = offline_complete(step, messages, hint)
    except Exception as exc:  # a bug in the demo model must not crash a turn
        logger.exception("offline demo model failed on step %s", step)
        raise LLMError(
            kind="server",
            step=step,
            message=f"offline demo model failed: {type(exc).__name__}: {exc}",
            latency_ms=elapsed_ms(started),
            prompt_tokens=prompt_tokens,
            tokens_estimated=True,
            model=OFFLINE_MODEL,
        ) from exc

    sink = STREAM_SINK.get()
    if sink is not None:
        raw = _offline_stream(raw, output, sink)
    completion_tokens = estimate_tokens(raw)
    parsed = parse_spent(
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
        latency_ms=elapsed_ms(started),
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
        if not tell_sink(sink, raw[:end]):
            break  # not shown: the demo need not write it out
    return raw
