"""Token estimates and the model's context window: what a prompt costs, and how it is fitted
(shrinkable messages left out, max_tokens capped) before a call."""

from __future__ import annotations

import logging
import math
from typing import Any

from django.conf import settings

from apps.billing.selectors import model_context_tokens
from apps.reasoning.llm.client import llm_model
from apps.reasoning.llm.errors import LLMError

logger = logging.getLogger("apps.reasoning.llm")


TOKENS_PER_MESSAGE = 4  # chat-format overhead per message in the usage estimate


# A step whose prompt leaves less room than this for the reply fails (`context_window`) rather
# than asking for a reply too short to hold the step's JSON.
MIN_COMPLETION_TOKENS = 128


def estimate_tokens(text: str) -> int:
    """Rough token count: one token per four characters, rounded up.

    tiktoken is not used on purpose: it downloads its encodings at run time and GuideDesk must
    run offline. Estimated counts are flagged (`tokens_estimated=True`) wherever they are used.
    """
    return math.ceil(len(text) / 4)


def estimate_prompt_tokens(messages: list[dict[str, str]]) -> int:
    return sum(
        estimate_tokens(str(message.get("content") or "")) + TOKENS_PER_MESSAGE
        for message in messages
    )


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


def fit_window(
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
        return estimate_prompt_tokens([messages[i] for i in kept]) + extra_tokens

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
