"""The reply being written: what the widget's `delta` event shows (docs/widget.md, "Live
events").

While the model writes a reply that nothing after it can change (`apps.reasoning.turn`
decides), the turn's worker keeps the text written so far under one key per conversation and
wakes the conversation's event streams on a channel of their own (`DRAFT_CHANNEL_PREFIX`): a
stream woken there reads only the text, not the conversation's state (`apps.widget.streams`).
Like every other push, the wake-up carries no data: a lost one costs a late update, never a
wrong one.

Where the text is kept: in Redis when the streams are pushed (`REDIS_URL`: the worker and the
web processes are different processes), else in Django's cache (the demo: the turn runs in the
web process, and the local-memory cache is shared with its streams).

What a visitor can make us hold is bounded: one entry per conversation (the turn in progress),
at most `MAX_CHARS` characters, gone after `KEEP_SECONDS` or when the turn ends, and at most
one write and wake-up per `MIN_INTERVAL_SECONDS` per turn.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from asgiref.sync import sync_to_async
from django.core.cache import cache

from apps.conversations import events

logger = logging.getLogger(__name__)

KEY_PREFIX = "guidedesk:reply-draft:"
# Where a writer wakes the streams (`events.Hub` with this prefix): a stream woken here reads
# only the draft, not the conversation's state (no database).
DRAFT_CHANNEL_PREFIX = "guidedesk:reply-draft-changed:"
KEEP_SECONDS = 120
MAX_CHARS = 8000
MIN_INTERVAL_SECONDS = 0.05  # ≤ 20 updates a second per turn


def _key(conversation_id: int) -> str:
    return f"{KEY_PREFIX}{conversation_id}"


def reply_draft_write(*, conversation_id: int, turn_id: int, text: str) -> None:
    """Keep `text` as turn `turn_id`'s reply so far and wake the conversation's streams. Never
    raises: a reply that cannot be shown early is still shown when it is posted."""
    value = json.dumps({"turn": turn_id, "text": text[:MAX_CHARS]})
    try:
        if events.push_enabled():
            # One round trip: the text, then the wake-up (in this order, on one connection).
            pipe = events._redis_publisher().pipeline(transaction=False)
            pipe.set(_key(conversation_id), value, ex=KEEP_SECONDS)
            pipe.publish(f"{DRAFT_CHANNEL_PREFIX}{conversation_id}", b"1")
            pipe.execute()
        else:
            cache.set(_key(conversation_id), value, KEEP_SECONDS)
    except Exception:
        logger.warning("reply draft: could not store it", exc_info=True)


def reply_draft_read(conversation_id: int) -> dict[str, Any] | None:
    """`{"turn": <trace id>, "text": <the reply so far>}`, or None."""
    try:
        if events.push_enabled():
            raw = events._redis_publisher().get(_key(conversation_id))
        else:
            raw = cache.get(_key(conversation_id))
    except Exception:
        logger.warning("reply draft: could not read it", exc_info=True)
        return None
    return _decoded(raw)


async def reply_draft_read_async(conversation_id: int) -> dict[str, Any] | None:
    """`reply_draft_read` from an event loop: with Redis read on the loop itself (a stream
    woken because the text grew sends it without waiting for a thread); without, in a thread
    (Django's cache is synchronous)."""
    if not events.push_enabled():
        return await sync_to_async(reply_draft_read, thread_sensitive=False)(conversation_id)
    try:
        raw = await events.async_reader().get(_key(conversation_id))
    except Exception:
        logger.warning("reply draft: could not read it", exc_info=True)
        return None
    return _decoded(raw)


def _decoded(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return None
    if (
        not isinstance(value, dict)
        or not isinstance(value.get("turn"), int)
        or not isinstance(value.get("text"), str)
    ):
        return None
    return value


def reply_draft_clear(conversation_id: int) -> None:
    """The turn is over (its reply is posted, or it ended without one)."""
    try:
        if events.push_enabled():
            events._redis_publisher().delete(_key(conversation_id))
        else:
            cache.delete(_key(conversation_id))
    except Exception:
        logger.warning("reply draft: could not clear it", exc_info=True)


class ReplyDraftWriter:
    """A throttled writer for one turn: `update(text)` as the text grows, `flush()` at the end
    of the call (the last text written, even if the throttle held it back), `retract()` when
    the call failed after its text was shown."""

    def __init__(self, *, conversation_id: int, turn_id: int) -> None:
        self.conversation_id = conversation_id
        self.turn_id = turn_id
        self.written = ""
        self.held: str | None = None
        self.last_write = 0.0
        self.writes = 0

    def update(self, text: str) -> None:
        text = text[:MAX_CHARS]
        if text == self.written:
            return
        now = time.monotonic()
        if now - self.last_write < MIN_INTERVAL_SECONDS:
            self.held = text
            return
        self._write(text, now)

    def flush(self) -> None:
        if self.held is not None and self.held != self.written:
            self._write(self.held, time.monotonic())
        self.held = None

    def retract(self) -> None:
        """What was shown is not the reply after all (the call failed): an empty text, which
        the widget takes as "remove it" (docs/widget.md, `delta`)."""
        self.held = None
        if self.written:
            self._write("", time.monotonic())

    def _write(self, text: str, now: float) -> None:
        reply_draft_write(conversation_id=self.conversation_id, turn_id=self.turn_id, text=text)
        self.written, self.held, self.last_write = text, None, now
        self.writes += 1
