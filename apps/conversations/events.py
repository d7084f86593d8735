"""Push for the live event streams (docs/widget.md "Live events").

Writers call `conversation_changed(conversation_id)` in the transaction that appends a message,
changes a conversation's status or starts/ends a turn; after commit it publishes the id on Redis
(`guidedesk:conversation:<id>`, the message `c<client id>`). Each web
process keeps ONE Redis connection subscribed to the pattern `guidedesk:conversation:*` (a `Hub`
per event loop) and wakes the streams of that conversation — and the staff console's queue
streams of that client — which then read what changed from the database (so the events'
content, order and ids come from one place, `apps.widget.streams._StreamCursor`). A publish
carries no event data, so a lost or duplicated one costs at most a late or an extra read —
never a wrong event.

Two exceptions, for the commonest changes: a customer's message stored by a transaction that
changed nothing else the streams show (`handle_turn`'s plain case), and a turn's start (the
typing line on, `reasoning.admission.turn_claim`), publish a *note* — the message's fields or the
typing line, the `seq` it follows and the conversation's status — after the client id
(`c<client id>\n<JSON>`). A stream that has seen exactly what the note follows sends its event
without reading the database; any other stream, any bare publish among the notes and a
reconnect still read (`apps.widget.streams._StreamCursor.apply`).

No Redis (REDIS_URL unset, the demo): nothing is published and the streams poll instead."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import weakref
from typing import Any

from django.conf import settings
from django.db import transaction

logger = logging.getLogger(__name__)

CHANNEL_PREFIX = "guidedesk:conversation:"
RECONNECT_SECONDS = 1.0

_publisher_lock = threading.Lock()
_publisher: tuple[str, Any] | None = None


def push_enabled() -> bool:
    return str(settings.REDIS_URL or "").startswith(("redis://", "rediss://", "unix://"))


def _redis_publisher() -> Any:
    global _publisher
    url = str(settings.REDIS_URL)
    with _publisher_lock:
        if _publisher is None or _publisher[0] != url:
            import redis

            _publisher = (url, redis.Redis.from_url(url, socket_timeout=2))
        return _publisher[1]


# A stream keeps at most this many unread notes; past it, one full read covers them all.
MAX_NOTES = 16


def conversation_changed(
    conversation_id: int, client_id: int | None = None, note: dict[str, Any] | None = None
) -> None:
    """Wake this conversation's event streams (and, given its client, that client's console
    queue streams) once the current transaction has committed. `note`: what the transaction
    changed, when a stream can take it as it is (the module's docstring; JSON-ready)."""
    if push_enabled():
        transaction.on_commit(lambda: publish(conversation_id, client_id, note=note))


def publish(
    conversation_id: int,
    client_id: int | None = None,
    prefix: str = CHANNEL_PREFIX,
    note: dict[str, Any] | None = None,
) -> None:
    try:
        payload = f"c{client_id}".encode() if client_id else b"1"
        if note is not None:
            payload += b"\n" + json.dumps(note, separators=(",", ":")).encode()
        _redis_publisher().publish(f"{prefix}{conversation_id}", payload)
    except Exception:  # the streams' reconnect (Last-Event-ID) catches up; never fail a write
        logger.warning("event push: could not publish", exc_info=True)


def conversation_key(conversation_id: int) -> str:
    return f"conversation:{conversation_id}"


def client_key(client_id: int) -> str:
    """What a console queue stream waits on: any change to any conversation of the client."""
    return f"client:{client_id}"


class Wake(asyncio.Event):
    """What a stream waits on: set by every publish of its key; `notes` holds, in order, what
    each publish since the stream last took them carried (None: a bare publish, or anything
    may have changed)."""

    def __init__(self) -> None:
        super().__init__()
        self.notes: list[dict[str, Any] | None] = []

    def add(self, note: dict[str, Any] | None) -> None:
        if len(self.notes) >= MAX_NOTES:
            self.notes = [None]
        elif not self.notes or self.notes[-1] is not None or note is not None:
            self.notes.append(note)  # (one None stands for many)
        self.set()

    def take(self) -> list[dict[str, Any] | None]:
        """The notes so far, cleared with the event: a later publish wakes the stream again."""
        notes, self.notes = self.notes, []
        self.clear()
        return notes


def _parse(data: Any) -> tuple[int | None, dict[str, Any] | None]:
    """A publish's payload: (the client id or None, its note or None). A malformed note is
    dropped (the streams read instead)."""
    if isinstance(data, bytes):
        data = data.decode(errors="replace")
    if not isinstance(data, str):
        return None, None
    head, _, body = data.partition("\n")
    client_id = int(head[1:]) if head[:1] == "c" and head[1:].isdigit() else None
    note = None
    if body:
        with contextlib.suppress(ValueError):
            parsed = json.loads(body)
            note = parsed if isinstance(parsed, dict) else None
    return client_id, note


class Hub:
    """One pattern subscription per process (per event loop) fanned out to the open streams."""

    def __init__(self, url: str, prefix: str = CHANNEL_PREFIX) -> None:
        self.url = url
        self.prefix = prefix  # the channels `<prefix><id>` this hub listens to
        self.waiters: dict[str, set[asyncio.Event]] = {}
        self.task: asyncio.Task[None] | None = None
        self.connected = asyncio.Event()

    def register(self, conversation_id: int) -> asyncio.Event:
        """An event set whenever the conversation changes."""
        return self.register_key(conversation_key(conversation_id))

    def unregister(self, conversation_id: int, event: asyncio.Event) -> None:
        self.unregister_key(conversation_key(conversation_id), event)

    def register_key(self, key: str) -> asyncio.Event:
        """`conversation_key(id)` or `client_key(id)`."""
        event = Wake()
        self.waiters.setdefault(key, set()).add(event)
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._listen())
        return event

    def unregister_key(self, key: str, event: asyncio.Event) -> None:
        waiting = self.waiters.get(key)
        if waiting is not None:
            waiting.discard(event)
            if not waiting:
                del self.waiters[key]

    def _wake(self, *keys: str, note: dict[str, Any] | None = None) -> None:
        """Wake the streams of `keys` (none: every stream, after a (re)connect: anything may
        have been missed); the first key's streams get `note`, the others a bare wake."""
        targets: list[tuple[asyncio.Event, dict[str, Any] | None]]
        if not keys:
            targets = [(e, None) for waiting in self.waiters.values() for e in waiting]
        else:
            targets = [
                (e, note if n == 0 else None)
                for n, key in enumerate(keys)
                for e in self.waiters.get(key, ())
            ]
        for event, given in targets:
            if isinstance(event, Wake):
                event.add(given)
            else:
                event.set()

    async def _listen(self) -> None:
        import redis.asyncio as aioredis

        while True:
            connection = aioredis.Redis.from_url(self.url, health_check_interval=30)
            pubsub = connection.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.psubscribe(self.prefix + "*")
                self.connected.set()
                self._wake()
                async for message in pubsub.listen():
                    if message.get("type") != "pmessage":
                        continue
                    channel = message["channel"]
                    if isinstance(channel, bytes):
                        channel = channel.decode()
                    suffix = channel.removeprefix(self.prefix)
                    if not suffix.isdigit():
                        continue
                    client_id, note = _parse(message.get("data"))
                    keys = [conversation_key(int(suffix))]
                    if client_id is not None:
                        keys.append(client_key(client_id))
                    self._wake(*keys, note=note)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.warning("event push: Redis subscription lost; reconnecting", exc_info=True)
            finally:
                self.connected.clear()
                with contextlib.suppress(Exception):
                    await pubsub.aclose()
                with contextlib.suppress(Exception):
                    await connection.aclose()
            await asyncio.sleep(RECONNECT_SECONDS)

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task
            self.task = None


_hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Hub]] = (
    weakref.WeakKeyDictionary()
)


def hub(prefix: str = CHANNEL_PREFIX) -> Hub | None:
    """This event loop's hub for the channels `<prefix><id>` (conversations by default; the
    playground's runs use their own prefix); None when there is no Redis (the streams poll)."""
    if not push_enabled():
        return None
    hubs = _hubs.setdefault(asyncio.get_running_loop(), {})
    found = hubs.get(prefix)
    if found is None or found.url != settings.REDIS_URL:
        found = hubs[prefix] = Hub(str(settings.REDIS_URL), prefix)
    return found


_readers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[str, Any]] = (
    weakref.WeakKeyDictionary()
)


def async_reader() -> Any:
    """This event loop's Redis client (`redis.asyncio`) for the small reads a stream makes
    when woken (a reply draft): read on the loop itself, without borrowing a thread (the
    loop's few threads may all be busy with database reads)."""
    loop = asyncio.get_running_loop()
    url = str(settings.REDIS_URL)
    found = _readers.get(loop)
    if found is None or found[0] != url:
        import redis.asyncio as aioredis

        found = _readers[loop] = (url, aioredis.Redis.from_url(url, socket_timeout=2))
    return found[1]


async def close_hub() -> None:
    """Stop this event loop's subscriptions and close its reader (tests: before their loop
    closes)."""
    loop = asyncio.get_running_loop()
    for found in _hubs.pop(loop, {}).values():
        await found.close()
    reader = _readers.pop(loop, None)
    if reader is not None:
        with contextlib.suppress(Exception):
            await reader[1].aclose()
