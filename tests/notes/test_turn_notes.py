"""Automatic notes after a committed turn, and learning across conversations: a FAILURE in one
conversation reaches the next conversation's `assess` prompt (same client only)."""

from __future__ import annotations

import pytest
from django.db import transaction

from apps.conversations.services import conversation_create
from apps.notes.models import Note, NoteSource, NoteStatus, NoteType
from apps.reasoning.models import ReasoningTrace
from apps.reasoning.services import handle_turn, turn_process
from apps.reasoning.turn_notes import one_line, turn_notes_write
from tests.reasoning.conftest import Chat, assess, make_shop
from tests.support.fake_webhook import Reply

pytestmark = pytest.mark.django_db
ORDER = {"order_id": "TH-12345"}


def test_confident_tool_run_writes_a_success_note(chat, llm, webhook, shop):
    llm.script("assess", assess(tool_call="get_order_status", tool_params=ORDER, confidence=9))
    webhook.script(Reply.ok({"status": "shipped"}))
    llm.script("compose", {"response": "Order TH-12345 has shipped."})
    chat.say("Where is order TH-12345?")
    [note] = Note.objects.for_client(shop)
    assert (note.type, note.ref, note.source, note.status) == (
        NoteType.SUCCESS,
        "get_order_status",
        NoteSource.AI,
        NoteStatus.ACTIVE,
    )
    assert note.confidence == pytest.approx(0.9)
    assert "Where is order TH-12345?" in note.content
    assert note.trace == ReasoningTrace.objects.get()
    assert note.conversation == chat.conversation


def test_a_tool_run_below_confidence_8_writes_nothing(chat, llm, webhook, shop):
    llm.script("assess", assess(tool_call="get_order_status", tool_params=ORDER, confidence=7))
    webhook.script(Reply.ok({"status": "shipped"}))
    llm.script("compose", {"response": "Shipped."})
    chat.say("Where is order TH-12345?")
    assert not Note.objects.exists()


def test_a_refused_tool_call_writes_a_failure_note(chat, llm, webhook, shop):
    llm.script("assess", assess(tool_call="get_order_status", tool_params=ORDER, confidence=9))
    webhook.script(Reply.fail("Order TH-12345 not found"))
    llm.script("compose", {"response": "I couldn't find order TH-12345."})
    chat.say("status of TH-12345")
    [note] = Note.objects.for_client(shop)
    assert note.type == NoteType.FAILURE and note.ref == "get_order_status"
    assert "failed (refused: " in note.content and "not found" in note.content


def test_failure_in_one_conversation_shapes_the_next_ones_prompt_only_for_this_client(
    chat, llm, webhook, shop, django_capture_on_commit_callbacks
):
    other = make_shop("adaptive", webhook.url(), slug="other-shop")
    llm.script("assess", assess(tool_call="get_order_status", tool_params=ORDER, confidence=9))
    webhook.default(Reply(status=503, json={"error": "down"}))
    chat.say("status of my order TH-12345, mail me at jo@example.com")
    escalation_note = Note.objects.for_client(shop).get(content__startswith="Escalated")
    tool_note = Note.objects.for_client(shop).get(content__startswith="Tool get_order_status")
    assert "tool failed" in escalation_note.content and "tool: get_order_status" in (
        escalation_note.content
    )
    assert "jo@example.com" not in escalation_note.content and "[email]" in escalation_note.content

    # The next conversation of the same client: its assess prompt carries the failure.
    llm.reset()
    nxt = Chat(shop, conversation_create(client=shop)[0], django_capture_on_commit_callbacks)
    llm.script("assess", assess(response="Let me help."))
    nxt.say("Hi, where is my parcel?")
    prompt = llm.calls("assess")[0].prompt_text
    assert "❌ FAILURE" in prompt
    assert escalation_note.content in prompt and tool_note.content in prompt

    # Another client's conversation never sees it.
    llm.reset()
    theirs = Chat(other, conversation_create(client=other)[0], django_capture_on_commit_callbacks)
    llm.script("assess", assess(response="Hello."))
    theirs.say("Hi, where is my parcel?")
    prompt = llm.calls("assess")[0].prompt_text
    assert "CROSS-SESSION" not in prompt and "get_order_status failed" not in prompt


def test_customer_request_escalation_writes_a_failure_note(chat, llm, shop):
    chat.say("I want to talk to a human please")
    [note] = Note.objects.for_client(shop)
    assert note.type == NoteType.FAILURE and note.ref == "customer_request"
    assert "customer asked for a human" in note.content


def test_a_rolled_back_turn_writes_no_note(
    shop, conversation, llm, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        message = handle_turn(client=shop, conversation=conversation, text="a human please")

    def turn_then_rollback():
        with transaction.atomic():
            turn_process(message_id=message.pk)
            assert ReasoningTrace.objects.get().escalated
            raise RuntimeError("the turn's transaction is rolled back")

    with (
        django_capture_on_commit_callbacks(execute=True) as callbacks,
        pytest.raises(RuntimeError, match="rolled back"),
    ):
        turn_then_rollback()
    assert callbacks == []
    assert not ReasoningTrace.objects.exists()
    assert not Note.objects.exists()

    # The same turn, committed: the note is written after the commit.
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        turn_process(message_id=message.pk)
    assert len(callbacks) >= 1
    assert Note.objects.for_client(shop).count() == 1


def test_notes_are_written_after_the_commit_not_inside_the_turn(
    shop, conversation, llm, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        message = handle_turn(client=shop, conversation=conversation, text="a human please")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        turn_process(message_id=message.pk)
    assert ReasoningTrace.objects.get().escalated
    assert not Note.objects.exists()  # the turn is done; its note waits for the commit
    for callback in callbacks:
        callback()
    assert Note.objects.count() == 1


def test_running_the_notes_task_twice_writes_once(chat, llm, shop):
    chat.say("I want to talk to a human please")
    trace = ReasoningTrace.objects.get()
    assert turn_notes_write(trace_id=trace.pk) == []
    assert Note.objects.get().hits == 1


def test_plan_with_notes_off_writes_none(chat, llm, shop):
    shop.plan.notes_enabled = False
    shop.plan.save()
    chat.say("I want to talk to a human please")
    assert not Note.objects.exists()


def test_one_line_masks_personal_data():
    text = (
        "Call +1 555 010 0199 or mail a.b@shop.example\nabout card 4111111111111111 order TH-12345"
    )
    assert one_line(text, 200) == ("Call [phone] or mail [email] about card [phone] order TH-12345")
    assert len(one_line("x" * 500, 140)) == 140
