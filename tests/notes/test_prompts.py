"""Notes in the turn's prompts (respond, assess), the `notes` trace step, the query cost."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.conversations.services import conversation_create
from apps.core.tenancy import tenant_scope
from apps.notes.models import NoteSource, NoteStatus, NoteType
from apps.notes.selectors import PROMPT_BEGIN, PROMPT_HEADER, notes_tokens
from apps.notes.services import note_add
from apps.reasoning.models import ReasoningStep
from apps.reasoning.modes.adaptive import ADAPTIVE_NOTES_TOKENS
from apps.reasoning.services import handle_turn, turn_process
from tests.support.shop import Chat, assess

pytestmark = pytest.mark.django_db


def _note(client, content, **kwargs):
    kwargs.setdefault("type", NoteType.FAILURE)
    kwargs.setdefault("source", NoteSource.STAFF)
    return note_add(client=client, content=content, **kwargs)


def test_assess_prompt_carries_the_notes_and_the_trace_records_them(chat, llm, shop):
    note = _note(
        shop, "The order lookup times out for TH- orders on Sundays", ref="get_order_status"
    )
    llm.script("assess", assess(response="Hello!"))
    chat.say("hi")
    [call] = llm.calls("assess")
    assert PROMPT_HEADER.splitlines()[0] in call.prompt_text
    assert (
        '- [failure | written by staff | just now | about "get_order_status"] '
        '"The order lookup times out for TH- orders on Sundays"'
    ) in call.prompt_text
    step = ReasoningStep.objects.unscoped("test checks the database directly").get(
        trace__conversation=chat.conversation, name="notes"
    )
    assert step.output["note_ids"] == [note.pk]
    assert 0 < step.output["tokens"] <= shop.plan.notes_prompt_budget_tokens
    # recorded before the first LLM call
    assert step.index < ReasoningStep.objects.get(trace=step.trace, name="assess").index


def test_respond_prompt_carries_the_notes(standard_shop, llm, django_capture_on_commit_callbacks):
    _note(standard_shop, "Returns of sale items need a photo", type=NoteType.TIP)
    chat = Chat.new(standard_shop, django_capture_on_commit_callbacks)
    llm.script("respond", {"response": "OK", "tool_call": None, "tool_params": {}})
    chat.say("Can I return a sale item?")
    [call] = llm.calls("respond")
    assert (
        '- [tip | written by staff | just now] "Returns of sale items need a photo"'
        in call.prompt_text
    )


def test_no_notes_no_block_no_step(chat, llm, shop):
    _note(shop, "pending pattern", type=NoteType.PATTERN, source=NoteSource.AI)  # not approved
    llm.script("assess", assess(response="Hello!"))
    chat.say("hi")
    [call] = llm.calls("assess")
    assert PROMPT_BEGIN not in call.prompt_text
    assert "pending pattern" not in call.prompt_text
    assert (
        not ReasoningStep.objects.unscoped("test checks the database directly")
        .filter(name="notes")
        .exists()
    )


def test_plan_switch_and_budget(chat, llm, shop):
    for i in range(30):
        _note(shop, f"Note number {i}: " + "details " * 10)
    plan = shop.plan
    plan.notes_prompt_budget_tokens = 150
    plan.save()
    llm.script("assess", assess(response="Hello!"))
    chat.say("hi")
    step = ReasoningStep.objects.unscoped("test checks the database directly").get(name="notes")
    assert step.output["tokens"] <= 150
    assert 0 < len(step.output["note_ids"]) < 20
    block = llm.calls("assess")[0].prompt_text
    assert "Note number 29" in block and "Note number 0:" not in block  # newest kept

    plan.notes_enabled = False
    plan.save()
    llm.script("assess", assess(response="Again"))
    chat.say("hello again")
    assert PROMPT_BEGIN not in llm.calls("assess")[1].prompt_text
    assert (
        ReasoningStep.objects.unscoped("test checks the database directly")
        .filter(name="notes")
        .count()
        == 1
    )


def _turn_queries(client, llm, capture, text):
    conversation = conversation_create(client=client)[0]
    llm.script("assess", assess(response="Sure."))
    with capture(execute=False):
        message = handle_turn(client=client, conversation=conversation, text=text)
    with CaptureQueriesContext(connection) as ctx, tenant_scope(message.client_id):
        turn_process(message_id=message.pk)
    return len(ctx.captured_queries)


def test_notes_add_at_most_two_queries_per_turn_with_a_warm_cache(
    shop, llm, django_capture_on_commit_callbacks
):
    plan = shop.plan
    plan.notes_enabled = False
    plan.save()
    _turn_queries(shop, llm, django_capture_on_commit_callbacks, "warm up")
    without = _turn_queries(shop, llm, django_capture_on_commit_callbacks, "hi")

    for i in range(200):
        _note(shop, f"stored note {i}", type=NoteType.TIP)
    plan.notes_enabled = True
    plan.save()
    _turn_queries(shop, llm, django_capture_on_commit_callbacks, "warm the notes cache")
    with_notes = _turn_queries(shop, llm, django_capture_on_commit_callbacks, "hi")
    assert (
        ReasoningStep.objects.unscoped("test checks the database directly")
        .filter(name="notes")
        .count()
        == 2
    )
    assert with_notes - without <= 2
    assert notes_tokens(llm.calls("assess")[-1].prompt_text) > 0


def _outcome_record(client, tool, content, type=NoteType.SUCCESS):
    """An automatic outcome record as `apps.reasoning.turn_notes` writes it."""
    return note_add(
        client=client,
        type=type,
        ref=tool,
        content=content,
        source=NoteSource.AI,
        status=NoteStatus.ACTIVE,
    )


def test_assess_gets_a_tools_success_records_once_the_tool_is_in_play(chat, llm, shop):
    failure = _outcome_record(
        shop, "get_order_status", "Tool get_order_status: it failed.", type=NoteType.FAILURE
    )
    success = _outcome_record(shop, "cancel_order", "Tool cancel_order: it succeeded.")
    tip = _note(
        shop, "Offer an exchange before a cancellation", type=NoteType.TIP, ref="cancel_order"
    )
    llm.script(
        "assess",
        assess(confidence=6, needs_more_context=["tool_schema:cancel_order"]),
        assess(response="Which order?", tool_call="cancel_order", missing_params=["order_id"]),
    )
    llm.script("critique", {"decision": "ASK_USER", "reasoning": "no id", "message": "Which?"})
    chat.say("cancel please")
    first, second = llm.calls("assess")
    # staff-written notes and failures always; the system's success record about cancel_order
    # once its schema is fetched
    assert "Offer an exchange before a cancellation" in first.prompt_text
    assert "Tool get_order_status: it failed." in first.prompt_text
    assert "Tool cancel_order: it succeeded." not in first.prompt_text
    assert "Tool cancel_order: it succeeded." in second.prompt_text
    assert "tool_schema:<name>" in first.messages[0]["content"]
    steps = ReasoningStep.objects.unscoped("test checks the database directly").filter(
        trace__conversation=chat.conversation, name="notes"
    )
    assert [s.output["note_ids"] for s in steps.order_by("index")] == [
        [tip.pk, failure.pk],
        [tip.pk, success.pk, failure.pk],  # newest first
    ]


def test_standard_gets_every_outcome_record(standard_shop, llm, django_capture_on_commit_callbacks):
    _outcome_record(standard_shop, "cancel_order", "Cancelling via cancel_order succeeded.")
    chat = Chat.new(standard_shop, django_capture_on_commit_callbacks)
    llm.script("respond", {"response": "Hello", "tool_call": None, "tool_params": {}})
    chat.say("hi")
    assert "Cancelling via cancel_order succeeded." in llm.calls("respond")[0].prompt_text


def test_assess_keeps_the_notes_block_small(chat, llm, shop):
    for i in range(30):
        _note(shop, f"Note number {i}: " + "details " * 10, type=NoteType.TIP)
    assert shop.plan.notes_prompt_budget_tokens > ADAPTIVE_NOTES_TOKENS
    llm.script("assess", assess(response="Hello!"))
    chat.say("hi")
    step = ReasoningStep.objects.unscoped("test checks the database directly").get(name="notes")
    assert 0 < step.output["tokens"] <= ADAPTIVE_NOTES_TOKENS
    assert "Note number 29" in llm.calls("assess")[0].prompt_text  # the newest first
