"""The widget's `delta` events: while a turn runs, the reply so far (kept by the turn in
apps.conversations.reply_drafts) reaches the conversation's event stream — the whole text each
time, once per change, never another tenant's and never after the turn is over."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async

from apps.conversations import events, reply_drafts
from apps.conversations.models import Conversation, Role
from apps.conversations.services import message_append
from apps.reasoning.models import ReasoningTrace
from apps.widget import streams as widget_streams
from tests.support.broker import NEEDS_REDIS, REDIS_URL
from tests.widget.conftest import Widget, sse, stored
from tests.widget.test_push import next_events, open_stream

# ---------------------------------------------------------------------------- the event stream


def _running_turn(widget: Widget) -> tuple[str, str, Conversation, ReasoningTrace]:
    conversation_id, token = widget.conversation()
    conversation = stored(conversation_id)
    user = message_append(
        client=widget.client, conversation=conversation, role=Role.USER, text="Hours?"
    )
    trace = ReasoningTrace.objects.create(
        client=widget.client, conversation=conversation, user_message=user, mode="adaptive"
    )
    return conversation_id, token, conversation, trace


def test_the_event_stream_sends_the_reply_so_far_as_delta_events(widget, short_streams):
    conversation_id, token, conversation, trace = _running_turn(widget)
    reply_drafts.reply_draft_write(
        conversation_id=conversation.pk, turn_id=trace.pk, text="We're open from"
    )

    events = sse(widget.events(conversation_id, f"?key={widget.key}&token={token}"))

    deltas = [json.loads(e["data"]) for e in events if e.get("event") == "delta"]
    assert deltas == [{"turn": trace.pk, "text": "We're open from"}]
    # A delta carries no id: the browser's Last-Event-ID stays the last message's seq.
    assert all("id" not in e for e in events if e.get("event") == "delta")


def test_a_cursor_sends_each_draft_once_and_none_once_the_turn_is_over(widget):
    _, _, conversation, trace = _running_turn(widget)
    cursor = widget_streams._StreamCursor(sent_seq=0)

    def read() -> list[str]:
        chunks = cursor.poll(client=widget.client, conversation_id=conversation.pk) or []
        return [chunk for chunk in chunks if "event: delta" in chunk]

    assert read() == []
    reply_drafts.reply_draft_write(conversation_id=conversation.pk, turn_id=trace.pk, text="We")
    assert read() == [f'event: delta\ndata: {{"turn":{trace.pk},"text":"We"}}\n\n']
    assert read() == []  # unchanged: nothing again
    reply_drafts.reply_draft_write(
        conversation_id=conversation.pk, turn_id=trace.pk, text="We open"
    )
    assert len(read()) == 1
    trace.status = "done"
    trace.save()
    assert read() == []  # no turn runs: a leftover draft is not shown


def test_another_tenants_widget_cannot_read_a_draft(client_a, client_b):
    a, b = Widget(client_a), Widget(client_b)
    conversation_id, token, conversation, trace = _running_turn(a)
    reply_drafts.reply_draft_write(
        conversation_id=conversation.pk, turn_id=trace.pk, text="secret draft"
    )
    _, token_b = b.conversation()
    for token_used in (token, token_b):
        response = b.events(conversation_id, f"?key={b.key}&token={token_used}")
        assert response.status_code == 404
        assert b"secret draft" not in response.content


def test_a_draft_is_bounded(widget):
    _, _, conversation, trace = _running_turn(widget)
    reply_drafts.reply_draft_write(
        conversation_id=conversation.pk, turn_id=trace.pk, text="x" * 100_000
    )
    draft = reply_drafts.reply_draft_read(conversation.pk)
    assert draft is not None and len(draft["text"]) == reply_drafts.MAX_CHARS


# ------------------------------------------------------------------------------ push (Redis)

DRAFTS = ("We", "We ship", "We ship within", "We ship within a", "We ship within a day")


@NEEDS_REDIS
@pytest.mark.django_db(transaction=True)  # the stream reads in other threads
def test_a_growing_draft_is_pushed_to_the_open_stream_without_a_state_read(
    widget, settings, monkeypatch
):
    """With Redis a draft's writer wakes the stream on the drafts' own channel; the stream then
    reads only the draft, not the conversation's state (no database)."""
    settings.REDIS_URL = REDIS_URL
    monkeypatch.setattr(widget_streams, "PUSH_STREAM_SECONDS", 30)
    monkeypatch.setattr(widget_streams, "POLL_SECONDS", 3600)
    conversation_id, token, conversation, trace = _running_turn(widget)
    state_reads = [0]
    live_state = widget_streams.conversation_live_state

    def counting(**kwargs: Any) -> Any:
        state_reads[0] += 1
        return live_state(**kwargs)

    monkeypatch.setattr(widget_streams, "conversation_live_state", counting)

    before: list[int] = []

    async def scenario() -> list[dict[str, Any]]:
        response = await open_stream(widget, conversation_id, token)
        stream = aiter(response.streaming_content)
        await next_events(stream)  # retry
        await next_events(stream)  # status, the message, typing
        for hub in (events.hub(), events.hub(prefix=reply_drafts.DRAFT_CHANNEL_PREFIX)):
            assert hub is not None
            await asyncio.wait_for(hub.connected.wait(), 10)
        await asyncio.sleep(0.5)  # a hub that connects wakes its streams for one full read
        before.append(state_reads[0])
        seen: list[dict[str, Any]] = []
        for text in DRAFTS:
            await sync_to_async(reply_drafts.reply_draft_write, thread_sensitive=False)(
                conversation_id=conversation.pk, turn_id=trace.pk, text=text
            )
            seen += [json.loads(e["data"]) for e in await next_events(stream)]
        await response.streaming_content.aclose()
        await events.close_hub()
        return seen

    try:
        seen = async_to_sync(scenario)()
    finally:
        reply_drafts.reply_draft_clear(conversation.pk)
    assert seen == [{"turn": trace.pk, "text": text} for text in DRAFTS]
    # Five drafts, no state read of their own (at most the one a hub's late connect causes).
    assert state_reads[0] - before[0] <= 1


def test_a_taken_back_draft_reaches_only_a_stream_that_showed_it(widget):
    _, _, conversation, trace = _running_turn(widget)
    showed = widget_streams._StreamCursor(sent_seq=0)
    late = widget_streams._StreamCursor(sent_seq=0)
    showed.poll(client=widget.client, conversation_id=conversation.pk)
    reply_drafts.reply_draft_write(conversation_id=conversation.pk, turn_id=trace.pk, text="We")
    showed.poll(client=widget.client, conversation_id=conversation.pk)
    reply_drafts.reply_draft_write(conversation_id=conversation.pk, turn_id=trace.pk, text="")

    taken_back = showed.poll(client=widget.client, conversation_id=conversation.pk) or []
    assert f'event: delta\ndata: {{"turn":{trace.pk},"text":""}}\n\n' in taken_back
    first_read = late.poll(client=widget.client, conversation_id=conversation.pk) or []
    assert not [chunk for chunk in first_read if "delta" in chunk]


@pytest.mark.django_db(transaction=True)  # without Redis the read runs in another thread
def test_a_woken_stream_reads_the_same_draft_from_its_event_loop(widget):
    """The event loop's read (`reply_draft_read_async`, what a stream woken on the drafts'
    channel runs) gives what the synchronous read gives: the draft, then nothing once cleared."""
    _, _, conversation, trace = _running_turn(widget)
    reply_drafts.reply_draft_write(conversation_id=conversation.pk, turn_id=trace.pk, text="We")
    read = async_to_sync(reply_drafts.reply_draft_read_async)
    assert read(conversation.pk) == {"turn": trace.pk, "text": "We"}
    assert read(conversation.pk) == reply_drafts.reply_draft_read(conversation.pk)
    reply_drafts.reply_draft_clear(conversation.pk)
    assert read(conversation.pk) is None


@NEEDS_REDIS
def test_with_redis_the_event_loop_reads_the_draft_the_worker_wrote(widget, settings):
    settings.REDIS_URL = REDIS_URL
    _, _, conversation, trace = _running_turn(widget)
    reply_drafts.reply_draft_write(conversation_id=conversation.pk, turn_id=trace.pk, text="We")

    async def scenario() -> list[dict[str, Any] | None]:
        seen = [await reply_drafts.reply_draft_read_async(conversation.pk)]
        await sync_to_async(reply_drafts.reply_draft_clear)(conversation.pk)
        seen.append(await reply_drafts.reply_draft_read_async(conversation.pk))
        await events.close_hub()  # closes the loop's reader too
        return seen

    try:
        assert async_to_sync(scenario)() == [{"turn": trace.pk, "text": "We"}, None]
    finally:
        reply_drafts.reply_draft_clear(conversation.pk)
