"""The loop behind every server-sent event stream (the widget's conversation stream, the
playground's run stream): read what changed, send it, keep the connection alive, end after a
while so the browser reconnects with `Last-Event-ID`. The streams differ only in what one read
returns (`poll`: the SSE chunks since the last read, or None when the thing streamed is gone)
and in their timings, so the loop is written once; so is the encoding of one event
(`sse_event`)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.db import DatabaseError

from apps.platform.db import release_connection

logger = logging.getLogger(__name__)

Poll = Callable[[], list[str] | None]
Apply = Callable[[list[dict[str, Any]]], list[str] | None]


def sse_event(event: str, data: Any, event_id: int | None = None) -> str:
    """One server-sent event: `id` (what the browser sends back as `Last-Event-ID`), its name
    and its data as compact JSON."""
    lines = [f"id: {event_id}"] if event_id is not None else []
    lines += [f"event: {event}", f"data: {json.dumps(data, separators=(',', ':'), default=str)}"]
    return "\n".join(lines) + "\n\n"


def _never() -> bool:
    return False


def poll_stream(
    poll: Poll,
    *,
    name: str,
    retry_ms: int,
    poll_seconds: float,
    heartbeat_seconds: float,
    stream_seconds: float,
    finished: Callable[[], bool] = _never,
) -> Iterator[str]:
    """For a WSGI server (and the test server): read every `poll_seconds` until the stream's
    time is up or `finished()`. A database error ends the stream (the browser reconnects after
    `retry`) instead of breaking it mid-response."""
    started = last_sent = time.monotonic()
    yield f"retry: {retry_ms}\n\n"
    while True:
        try:
            chunks = poll()
        except DatabaseError:
            logger.warning("%s: database error, ending it", name, exc_info=True)
            return
        if chunks is None:  # the thing streamed was deleted meanwhile
            return
        now = time.monotonic()
        if chunks:
            last_sent = now
            yield "".join(chunks)
        elif now - last_sent >= heartbeat_seconds:
            last_sent = now
            yield ": keep-alive\n\n"  # a comment line: keeps proxies from closing an idle stream
        if finished() or now - started >= stream_seconds:
            return
        time.sleep(poll_seconds)


def _poll_released(poll: Poll) -> list[str] | None:
    """One read; the connection goes back to the pool right after, so an open stream holds no
    database connection while it waits."""
    try:
        return poll()
    finally:
        release_connection(without_pool=True)


async def push_stream(
    poll: Poll,
    *,
    name: str,
    hub: Any,
    wake_id: int,
    retry_ms: int,
    poll_seconds: float,
    heartbeat_seconds: float,
    stream_seconds: float,
    finished: Callable[[], bool] = _never,
    recheck_seconds: float | None = None,
    side_hub: Any = None,
    side_poll: Callable[[], Awaitable[list[str]]] | None = None,
    apply: Apply | None = None,
) -> AsyncGenerator[str, None]:
    """From the event loop (ASGI): with a hub (`apps.conversations.events.Hub`, Redis) sleep
    until a writer publishes a change of `wake_id`, then read; without one, poll. Each read
    borrows a thread of the loop's pool and gives its connection back at once; in between the
    stream holds neither. With `recheck_seconds` the stream also re-reads that often, so a
    publish lost with a Redis hiccup costs a short delay, never a stuck page.

    `side_hub` / `side_poll`: a second channel for frequent, small changes (a reply being
    written): a publish there runs only `side_poll` (no database; a coroutine, run on the loop
    without borrowing a thread), a full read covers it too.

    `apply`: given the notes the publishes since the last wake carried (`events.Wake`), the
    chunks they make without a read, or None when they do not fit what the stream has sent —
    then it reads. Without it (or after a bare publish) every wake reads."""
    started = last_sent = time.monotonic()
    read = sync_to_async(_poll_released, thread_sensitive=False)
    await sync_to_async(release_connection, thread_sensitive=True)(without_pool=True)  # the view's
    yield f"retry: {retry_ms}\n\n"
    woken, side = _register(wake_id, hub, side_hub, side_poll)
    try:
        changed = True
        while True:
            chunks: list[str] | None = []
            if changed:
                chunks = _from_notes(woken, apply)
                if chunks is None:
                    chunks = await _read_all(read, poll, name=name, woken=woken, side=side)
                if chunks is None:  # a database error, or the thing streamed is gone
                    return
            elif side is not None and side_poll is not None and side.is_set():
                side.clear()
                chunks = await side_poll()
            if chunks:
                last_sent = time.monotonic()
                yield "".join(chunks)
            if changed and finished():
                return
            now = time.monotonic()
            if now - last_sent >= heartbeat_seconds:
                last_sent = now
                yield ": keep-alive\n\n"
            remaining = stream_seconds - (now - started)
            if remaining <= 0:
                return
            wait = min(remaining, max(0.0, heartbeat_seconds - (now - last_sent)))
            if recheck_seconds is not None:
                wait = min(wait, recheck_seconds)
            changed = await _next_change(
                woken, side, wait, poll_seconds=poll_seconds, recheck=recheck_seconds is not None
            )
    finally:
        if hub is not None and woken is not None:
            hub.unregister(wake_id, woken)
        if side is not None:
            side_hub.unregister(wake_id, side)


def _register(
    wake_id: int,
    hub: Any,
    side_hub: Any,
    side_poll: Callable[[], Awaitable[list[str]]] | None,
) -> tuple[asyncio.Event | None, asyncio.Event | None]:
    """The events a publish of `wake_id` sets: the hub's (None: no hub, the stream polls) and
    the side channel's (only with a hub, a side hub and a `side_poll`)."""
    woken = hub.register(wake_id) if hub is not None else None
    side = (
        side_hub.register(wake_id)
        if woken is not None and side_hub is not None and side_poll is not None
        else None
    )
    return woken, side


def _from_notes(woken: asyncio.Event | None, apply: Apply | None) -> list[str] | None:
    """The chunks the notes of this wake make (`apply`), or None when the stream must read:
    no notes, a bare publish among them, or notes that do not fit."""
    take = getattr(woken, "take", None)  # an `events.Wake`
    if take is None:
        return None
    notes = take()
    if apply is None or not notes or any(note is None for note in notes):
        return None
    return apply([note for note in notes if note is not None])


async def _read_all(
    read: Callable[[Poll], Awaitable[list[str] | None]],
    poll: Poll,
    *,
    name: str,
    woken: asyncio.Event | None,
    side: asyncio.Event | None,
) -> list[str] | None:
    """A full read: the chunks since the last one, or None when the stream ends (a database
    error, or the thing streamed was deleted meanwhile)."""
    if woken is not None:
        woken.clear()  # before reading: a change during the read wakes us again
    if side is not None:
        side.clear()  # the full read covers the side channel's changes
    try:
        return await read(poll)
    except DatabaseError:
        logger.warning("%s: database error, ending it", name, exc_info=True)
        return None


async def _next_change(
    woken: asyncio.Event | None,
    side: asyncio.Event | None,
    wait: float,
    *,
    poll_seconds: float,
    recheck: bool,
) -> bool:
    """Wait for the next change (at most `wait` seconds); True when a full read is due, False
    when only the side channel changed or the wait ran out (without `recheck`)."""
    if woken is None:
        await asyncio.sleep(min(wait, poll_seconds))
        return True
    if side is None:
        try:
            await asyncio.wait_for(woken.wait(), timeout=wait)
        except TimeoutError:
            return recheck
        return True
    return await _either(woken, side, wait, recheck=recheck)


async def _either(
    main: asyncio.Event, side: asyncio.Event, timeout: float, *, recheck: bool
) -> bool:
    """Wait until `main` or `side` is set (or `timeout`); True when a full read is due: `main`
    was set, or the time ran out with `recheck`. `side` stays set for the caller to see."""
    if main.is_set():
        return True
    if side.is_set():
        return False
    waits = [asyncio.ensure_future(main.wait()), asyncio.ensure_future(side.wait())]
    try:
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in waits:
            waiting.cancel()
    if main.is_set():
        return True
    return recheck and not side.is_set()
