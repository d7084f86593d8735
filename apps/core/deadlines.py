"""A wall-clock deadline for a unit of work (a turn), shared by every network call inside it.

The deadline lives in a context variable, so code deep in a call (the LLM gateway, a tool
webhook, a retry loop) asks `remaining()` instead of having a budget threaded through every
signature. Scopes nest: an inner scope can only shorten the deadline, never extend it. Context
variables are per thread (and per asyncio task), so concurrent turns never see each other's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_deadline: ContextVar[float | None] = ContextVar("guidedesk_deadline", default=None)


class DeadlineExceeded(Exception):
    """The unit of work has no time left; no further network call may start."""


@contextmanager
def deadline_scope(seconds: float) -> Iterator[float]:
    """Run the block under a deadline `seconds` from now (or the enclosing one, if sooner).
    Yields the absolute deadline on the `time.monotonic()` clock."""
    at = time.monotonic() + seconds
    outer = _deadline.get()
    if outer is not None:
        at = min(at, outer)
    token = _deadline.set(at)
    try:
        yield at
    finally:
        _deadline.reset(token)


def deadline_at() -> float | None:
    """The absolute deadline (monotonic clock) of the current scope, or None outside any."""
    return _deadline.get()


def remaining() -> float | None:
    """Seconds left before the current deadline (never negative), or None outside any scope."""
    at = _deadline.get()
    return None if at is None else max(0.0, at - time.monotonic())


def time_for(limit: float | None) -> float | None:
    """How long the next call may take: its own `limit` cut to what is left of the deadline.
    Raises DeadlineExceeded when the deadline has passed, so no call starts with no time."""
    left = remaining()
    if left is None:
        return limit
    if left <= 0:
        raise DeadlineExceeded("the deadline has passed")
    return left if limit is None else min(limit, left)
