"""A customer's message reaches the open event streams from the publish itself: the note it
carries (apps/conversations/events.py) makes exactly the event a database read would, and only
a stream that has seen everything before it takes it; anything else reads."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from apps.conversations import events
from apps.conversations import services as conversation_services
from apps.conversations.models import Conversation, ConversationStatus, Role, Visibility
from apps.conversations.services import message_append, message_note
from apps.core.tenancy import tenant_scope
from apps.reasoning import admission
from apps.reasoning import services as reasoning_services
from apps.widget import streams as widget_streams
from apps.widget.streams import _StreamCursor
from tests.support.broker import NEEDS_REDIS
from tests.widget.conftest import stored
from tests.widget.test_push import elsewhere, next_events, open_stream


def _read_cursor(conversation: Conversation) -> _StreamCursor:
    """A stream's cursor that has read the conversation once, as an open stream has."""
    cursor = _StreamCursor(sent_seq=0)
    assert cursor.poll(client=conversation.client, conversation_id=conversation.pk)
    return cursor


def _published(message: Any, status: str) -> dict[str, Any]:
    """The note as a stream receives it: through JSON, as Redis carries it."""
    return json.loads(json.dumps(message_note(message, status), separators=(",", ":")))


def _notes_published(monkeypatch: pytest.MonkeyPatch, module: Any) -> list[Any]:
    """The note of each `conversation_changed` that `module` calls from now on (None: bare)."""
    notes: list[dict[str, Any] | None] = []
    monkeypatch.setattr(
        module,
        "conversation_changed",
        lambda conversation_id, client_id=None, note=None: notes.append(note),
    )
    return notes


@pytest.mark.django_db
def test_a_note_makes_exactly_the_event_a_read_makes(widget):
    conversation_id, _token = widget.conversation()
    conversation = stored(conversation_id)
    message_append(client=widget.client, conversation=conversation, role=Role.USER, text="Hi")
    by_note = _read_cursor(conversation)
    by_read = copy.copy(by_note)
    message = message_append(
        client=widget.client,
        conversation=conversation,
        role=Role.USER,
        text="Where is **order** 12345?",
        data={"confirm": {"action": "a", "digest": "d", "answer": "yes"}},
        language="en",
        note=True,
    )

    from_note = by_note.apply([_published(message, conversation.status)])
    from_read = by_read.poll(client=widget.client, conversation_id=conversation.pk)

    assert from_note == [c for c in from_read if c.startswith(f"id: {message.seq}\n")]
    assert from_note and f"id: {message.seq}\nevent: message\n" in from_note[0]
    assert (by_note.sent_seq, by_note.seen_last_seq) == (message.seq, message.seq)
    assert (by_read.sent_seq, by_read.seen_last_seq) == (message.seq, message.seq)


@pytest.mark.django_db
def test_a_note_that_does_not_follow_what_the_stream_saw_asks_for_a_read(widget):
    conversation_id, _token = widget.conversation()
    conversation = stored(conversation_id)
    cursor = _read_cursor(conversation)
    first, second = (
        message_append(client=widget.client, conversation=conversation, role=Role.USER, text=t)
        for t in ("1", "2")
    )
    before = (cursor.sent_seq, cursor.seen_last_seq)
    good = _published(first, ConversationStatus.OPEN)

    # The stream missed `first`: a note after it does not fit.
    assert cursor.apply([_published(second, ConversationStatus.OPEN)]) is None
    # A status the stream has not sent (a reopened conversation, a hand-off).
    assert cursor.apply([_published(first, ConversationStatus.ESCALATED)]) is None
    # A message the customer must not see, or a malformed note.
    hidden = {**good, "message": {**good["message"], "visibility": Visibility.INTERNAL}}
    assert cursor.apply([hidden]) is None
    assert cursor.apply([{**good, "message": {"text": "no fields"}}]) is None
    assert cursor.apply([{**good, "seq": "1"}]) is None
    # A good note followed by one that does not fit: nothing is taken, not even the first.
    assert cursor.apply([good, _published(second, ConversationStatus.CLOSED)]) is None
    assert (cursor.sent_seq, cursor.seen_last_seq) == before

    # In order they fit; a note a read already covered is passed over.
    chunks = cursor.apply([good, _published(second, ConversationStatus.OPEN)])
    assert chunks is not None and [c.split("\n")[0] for c in chunks] == [
        f"id: {first.seq}",
        f"id: {second.seq}",
    ]
    assert cursor.apply([good]) == []


@pytest.mark.django_db
def test_a_turns_start_note_makes_the_typing_event_a_read_makes(widget, monkeypatch):
    noted = _notes_published(monkeypatch, admission)
    conversation_id, _token = widget.conversation()
    conversation = stored(conversation_id)
    message = message_append(
        client=widget.client, conversation=conversation, role=Role.USER, text="Hi"
    )
    by_note = _read_cursor(conversation)
    by_read = copy.copy(by_note)
    message_append(client=widget.client, conversation=conversation, role=Role.USER, text="Later")
    conversation.last_seq = 0  # read before the second message: the lock brings it up to date
    with tenant_scope(widget.client.pk):
        assert admission.turn_lock_take(message)
        assert admission.turn_claim(message, traced=False) is not None
    assert conversation.last_seq == 2
    note = json.loads(json.dumps(noted[-1]))
    assert note == {"after": 2, "seq": 2, "status": "open", "typing": True}

    assert by_note.apply([note]) is None  # the stream has not seen "Later" yet
    late = by_read.poll(client=widget.client, conversation_id=conversation.pk)
    assert late is not None
    assert late[-1] == 'event: typing\ndata: {"typing":true}\n\n'
    assert by_note.poll(client=widget.client, conversation_id=conversation.pk) == late
    # Once it has: the note alone makes the same event, and an applied note changes nothing.
    by_note.typing = by_read.typing = False
    assert by_note.apply([note]) == [late[-1]]
    assert by_note.apply([note]) == []
    assert (by_note.typing, by_note.seen_last_seq) == (True, 2)


def test_a_wake_keeps_its_notes_in_order_and_a_bare_publish_stands_for_a_read():
    wake = events.Wake()
    wake.add({"seq": 1})
    wake.add({"seq": 2})
    assert wake.is_set()
    assert wake.take() == [{"seq": 1}, {"seq": 2}]
    assert not wake.is_set() and wake.take() == []
    wake.add(None)
    wake.add(None)
    wake.add({"seq": 3})
    assert wake.take() == [None, {"seq": 3}]
    for n in range(events.MAX_NOTES + 5):
        wake.add({"seq": n})
    assert wake.take()[0] is None  # too many unread notes: one read covers them


def test_a_publish_payload_gives_its_client_and_its_note():
    note = {"after": 1, "seq": 2}
    assert events._parse(b"c7\n" + json.dumps(note).encode()) == (7, note)
    assert events._parse(b"c7") == (7, None)
    assert events._parse(b"1") == (None, None)
    assert events._parse(b"c7\n{not json") == (7, None)
    assert events._parse(b"c7\n[1, 2]") == (7, None)


@pytest.mark.django_db
def test_only_a_plain_customer_message_is_published_with_its_note(widget, monkeypatch):
    published = _notes_published(monkeypatch, conversation_services)
    monkeypatch.setattr(reasoning_services, "turn_queue_on_commit", lambda **kwargs: None)
    conversation_id, _token = widget.conversation()
    conversation = stored(conversation_id)

    message = reasoning_services.handle_turn(
        client=widget.client, conversation=conversation, text="Where is order 12345?"
    )
    assert published[-1] == message_note(message, ConversationStatus.OPEN)

    Conversation.objects.for_client(widget.client).filter(pk=conversation.pk).update(
        status=ConversationStatus.ESCALATED
    )
    conversation.refresh_from_db()
    reasoning_services.handle_turn(client=widget.client, conversation=conversation, text="Hello?")
    assert published[-1] is None  # a person owns it: the turn is skipped, the stream reads
    message_append(client=widget.client, conversation=conversation, role=Role.STAFF, text="Hi")
    assert published[-1] is None  # other writers publish bare


@NEEDS_REDIS
@pytest.mark.django_db(transaction=True)
def test_an_open_stream_sends_a_noted_message_without_reading(widget, push_streams, monkeypatch):
    reads: list[int] = []
    live_state = widget_streams.conversation_live_state

    def counted(**kwargs: Any) -> Any:
        reads.append(kwargs["conversation_id"])
        return live_state(**kwargs)

    monkeypatch.setattr(widget_streams, "conversation_live_state", counted)
    conversation_id, token = widget.conversation()
    conversation = stored(conversation_id)

    def customer_says(text: str, *, note: bool) -> None:
        message_append(
            client=widget.client, conversation=conversation, role=Role.USER, text=text, note=note
        )

    async def scenario() -> tuple[list[list[dict[str, str]]], list[int]]:
        # The hub subscribed before the stream opens, so no reconnect wake reaches the stream:
        # after its first read, every read it makes is one a publish asked for.
        hub = events.hub()
        assert hub is not None
        hub.register_key("subscribed")
        await asyncio.wait_for(hub.connected.wait(), 10)
        response = await open_stream(widget, conversation_id, token)
        stream = aiter(response.streaming_content)
        await next_events(stream)  # retry
        await next_events(stream)  # the first read: status, typing
        counts = [len(reads)]
        await elsewhere(customer_says, "Where is order 12345?", note=True)
        seen = [await next_events(stream)]
        counts.append(len(reads))
        await elsewhere(customer_says, "Any news?", note=False)
        seen.append(await next_events(stream))
        counts.append(len(reads))
        await response.streaming_content.aclose()
        await events.close_hub()
        return seen, counts

    (noted, bare), counts = async_to_sync(scenario)()
    assert [(e["id"], json.loads(e["data"])["text"]) for e in noted] == [
        ("1", "Where is order 12345?")
    ]
    assert [(e["id"], json.loads(e["data"])["text"]) for e in bare] == [("2", "Any news?")]
    assert counts[1] == counts[0]  # the note: no read
    assert counts[2] == counts[1] + 1  # a bare publish: one read
