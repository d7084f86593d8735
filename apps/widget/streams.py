"""The widget's live events: a conversation's messages, typing and status as server-sent events
(`GET /api/v1/widget/conversations/<id>/events`, docs/widget.md). The same events under WSGI
(`event_stream`, polling) and under ASGI (`event_stream_async`, woken by `events.py`); what one
stream has told its browser is its `_StreamCursor`. While a turn writes a reply that nothing can
change any more, `delta` events carry the text so far (`apps.conversations.reply_drafts`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from apps.clients.models import Client
from apps.conversations import events
from apps.conversations.models import ConversationStatus, Visibility
from apps.conversations.reply_drafts import (
    DRAFT_CHANNEL_PREFIX,
    reply_draft_read,
    reply_draft_read_async,
)
from apps.platform import sse
from apps.platform.sse import sse_event
from apps.reasoning.selectors import conversation_live_state
from apps.widget.selectors import widget_message_events_after, widget_message_json

# One page of GET …/messages; `has_more` says when to ask again with a higher `after`.
MESSAGES_PAGE_LIMIT = 200

# Server-sent events. Under WSGI (runserver, the tests' client) and under ASGI without Redis a
# stream polls the database every POLL_SECONDS and ends after STREAM_SECONDS, so a worker thread
# is never held for long. Under ASGI with Redis (production, docs/deployment.md) it holds no
# thread, reads the database only when pushed (events.py) and lasts PUSH_STREAM_SECONDS. The
# browser reconnects after RETRY_MS with Last-Event-ID. Read at call time, so tests can shorten
# them.
STREAM_SECONDS = 25.0
PUSH_STREAM_SECONDS = 300.0
POLL_SECONDS = 0.5
HEARTBEAT_SECONDS = 15.0
RETRY_MS = 2000


# --------------------------------------------------------------------------------------------
# Event streams
# --------------------------------------------------------------------------------------------


def typing_progress(activity: dict[str, Any] | None) -> dict[str, Any] | None:
    """A deliberative turn's progress as the customer sees it — the step, never its content."""
    if not activity or not isinstance(activity.get("step"), int):
        return None
    step = activity["step"]
    return {
        "step": step,
        "max_steps": activity.get("max_steps"),
        "text": f"Thinking it through… step {step}",
    }


@dataclass
class _StreamCursor:
    """What one event stream has told its browser so far."""

    sent_seq: int
    seen_last_seq: int = -1
    status: str | None = None
    typing: bool | None = None
    progress: dict[str, Any] | None = None
    draft: dict[str, Any] | None = None  # the last `delta` sent: the reply so far

    def poll(self, *, client: Client, conversation_id: int) -> list[str] | None:
        """The events since the last poll; None when the conversation is gone."""
        state = conversation_live_state(client=client, conversation_id=conversation_id)
        if state is None:
            return None
        status, last_seq, turn_running, turn_progress = state
        chunks: list[str] = []
        if status != self.status:
            chunks.append(sse_event("status", {"status": status}))
            self.status = status
        if last_seq != self.seen_last_seq:
            batch = widget_message_events_after(
                client=client,
                conversation_id=conversation_id,
                after=self.sent_seq,
                limit=MESSAGES_PAGE_LIMIT,
            )
            for data in batch:
                chunks.append(sse_event("message", data, event_id=data["seq"]))
                self.sent_seq = data["seq"]
            if len(batch) < MESSAGES_PAGE_LIMIT:  # else: the rest on the next poll
                self.seen_last_seq = last_seq
        typing = status == ConversationStatus.OPEN and turn_running
        progress = typing_progress(turn_progress) if typing else None
        if typing != self.typing or progress != self.progress:
            payload: dict[str, Any] = {"typing": typing}
            if progress:
                payload["progress"] = progress
            chunks.append(sse_event("typing", payload))
            self.typing, self.progress = typing, progress
        chunks.extend(self.poll_draft(conversation_id=conversation_id))
        return chunks

    def apply(self, notes: list[dict[str, Any]]) -> list[str] | None:
        """The events of the publishes' notes (`apps.conversations.events`) without a read: a
        customer's message, or a turn's start (the typing line on), each at exactly the `seq`
        this stream has seen, in the status it has sent. None — nothing changed — when any note
        does not fit: the stream then reads the database as for a bare publish. A message a
        read already covered is passed over."""
        seen, typing, progress, chunks = self.seen_last_seq, self.typing, self.progress, []
        for note in notes:
            seq = note.get("seq")
            if not isinstance(seq, int) or note.get("status") != self.status:
                return None
            if "message" in note:
                if seq <= seen:
                    continue
                chunk = _message_chunk(note) if note.get("after") == seen else None
                if chunk is None:
                    return None
                chunks.append(chunk)
                seen = seq
            elif note.get("typing") is True and note.get("after") == seq == seen:
                on = self.status == ConversationStatus.OPEN  # (no progress yet)
                if (on, None) != (typing, progress):
                    chunks.append(sse_event("typing", {"typing": on}))
                typing, progress = on, None
            else:
                return None
        if seen != self.seen_last_seq:
            self.sent_seq = self.seen_last_seq = seen
        self.typing, self.progress = typing, progress
        return chunks

    def poll_draft(self, *, conversation_id: int) -> list[str]:
        """The reply being written, while a turn runs (apps.conversations.reply_drafts): the
        whole text so far each time, so a repeated or missed `delta` is harmless. No database:
        a stream woken only because the text grew runs just this."""
        draft = reply_draft_read(conversation_id) if self.typing else None
        return self._draft_events(draft)

    async def poll_draft_async(self, *, conversation_id: int) -> list[str]:
        """`poll_draft` on the event loop (a stream woken because the text grew)."""
        draft = await reply_draft_read_async(conversation_id) if self.typing else None
        return self._draft_events(draft)

    def _draft_events(self, draft: dict[str, Any] | None) -> list[str]:
        chunks = []
        # An empty text takes back what was shown (the call that wrote it failed); it is sent
        # only to a stream that showed something of that turn.
        shown = self.draft is not None and self.draft["turn"] == (draft or {}).get("turn")
        if draft is not None and draft != self.draft and (draft["text"] or shown):
            chunks.append(sse_event("delta", draft))
        self.draft = draft
        return chunks


def _message_chunk(note: dict[str, Any]) -> str | None:
    """A noted visible message as its `message` event, exactly as a read sends it; None for a
    note that is not one."""
    message = note.get("message")
    if not isinstance(message, dict) or message.get("visibility") != Visibility.VISIBLE:
        return None
    try:
        data = widget_message_json(
            public_id=str(message["public_id"]),
            seq=note["seq"],
            role=str(message["role"]),
            visibility=str(message["visibility"]),
            kind=str(message["kind"]),
            text=str(message["text"]),
            data=message["data"] if isinstance(message["data"], dict) else {},
            language=str(message["language"] or ""),
            created_at=datetime.fromisoformat(str(message["created_at"])),
        )
    except (KeyError, ValueError):
        return None
    return sse_event("message", data, event_id=note["seq"])


def event_stream(*, client: Client, conversation_id: int, after: int) -> Iterator[str]:
    """Poll the conversation and yield its events until the stream's time is up (WSGI). Messages
    are queried only when the conversation's `last_seq` moved, so an idle stream costs one small
    query per poll."""
    cursor = _StreamCursor(sent_seq=after)
    return sse.poll_stream(
        lambda: cursor.poll(client=client, conversation_id=conversation_id),
        name="widget event stream",
        retry_ms=RETRY_MS,
        poll_seconds=POLL_SECONDS,
        heartbeat_seconds=HEARTBEAT_SECONDS,
        stream_seconds=STREAM_SECONDS,
    )


async def event_stream_async(
    *, client: Client, conversation_id: int, after: int
) -> AsyncIterator[str]:
    """The same events as `event_stream`, served from the event loop (ASGI). With Redis the
    stream sleeps until a writer publishes a change to this conversation (events.py) and then
    reads it; without Redis it polls (`apps.platform.sse.push_stream`)."""
    hub = events.hub()  # (the running loop's: only known once the stream runs)
    cursor = _StreamCursor(sent_seq=after)
    stream = sse.push_stream(
        lambda: cursor.poll(client=client, conversation_id=conversation_id),
        name="widget event stream",
        hub=hub,
        wake_id=conversation_id,
        side_hub=events.hub(prefix=DRAFT_CHANNEL_PREFIX) if hub is not None else None,
        side_poll=lambda: cursor.poll_draft_async(conversation_id=conversation_id),
        apply=cursor.apply,
        retry_ms=RETRY_MS,
        poll_seconds=POLL_SECONDS,
        heartbeat_seconds=HEARTBEAT_SECONDS,
        stream_seconds=PUSH_STREAM_SECONDS if hub is not None else STREAM_SECONDS,
    )
    async with aclosing(stream):  # a client that goes away closes the loop's `finally` at once
        async for chunk in stream:
            yield chunk
