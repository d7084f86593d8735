"""A confirmation that names something else never confirms.

The rule is pure (`guards.confirmation_answer` / `guards.confirmation_decision`, no database):
every identifier in a "yes" must be one of the pending action's parameter values. The end-to-end
tests drive real turns (adaptive and standard) through the real openai SDK and the fake LLM
server: the question about #W1001 answered with "yes cancel order #W2002" never cancels #W1001.
"""

from __future__ import annotations

from typing import Any

import pytest

from apps.conversations.models import Message
from apps.reasoning.guards import (
    confirmation_answer,
    confirmation_decision,
    confirmation_reading,
)
from apps.tools.models import ClientTool, PendingAction, PendingActionStatus
from apps.tools.pending import OpenQuestion
from tests.reasoning.helpers import open_question_on
from tests.support.fake_webhook import Reply
from tests.support.shop import Chat, assess, critique

W1001 = {"order_id": "#W1001"}
REFUND = {"order_id": "#W1001", "amount": 50}

# --- the pure rule: a table of tau-bench-style answers -----------------------------------------


@pytest.mark.parametrize(
    ("text", "params", "answer"),
    [
        # the positive cases still confirm
        ("yes", W1001, "yes"),
        ("Yes please", W1001, "yes"),
        ("yes, cancel #W1001", W1001, "yes"),
        ("yes W1001", W1001, "yes"),
        ("Yes, cancel order #W1001 please", W1001, "yes"),
        ("yes w-1001", W1001, "yes"),
        ("yes, order 1001", W1001, "yes"),
        ("yes 'W1001'", W1001, "yes"),
        ('yes "#W1001"', W1001, "yes"),
        ("ok go ahead", W1001, "yes"),
        ("yes, refund 50", REFUND, "yes"),
        ("yes refund $50.00 for #W1001", REFUND, "yes"),
        ("yes cancel TH-12345", {"order_id": "TH-12345"}, "yes"),
        # other identifiers, in every format: the customer wants something else
        ("yes cancel order #W2002", W1001, "other"),
        ("yes, cancel order W2002 please", W1001, "other"),
        ("yes W2002", W1001, "other"),
        ("yes #W2002", W1001, "other"),
        ("yes w-2002", W1001, "other"),
        ("yes cancel order 2002", W1001, "other"),
        ('yes "W2002"', W1001, "other"),
        ("yes 'W2002'", W1001, "other"),
        ("yes W1001 and W2002", W1001, "other"),
        ("yes W1001 W2002", W1001, "other"),
        ("yes cancel W10011", W1001, "other"),
        ("yes cancel W1001 W2002", W1001, "other"),
        # other amounts
        ("yes refund 30", REFUND, "other"),
        ("yes, refund $49.99", REFUND, "other"),
        ("yes refund 500", REFUND, "other"),
        # conditions, choices and extra clauses
        ("yes but cancel W2002 too", W1001, "other"),
        ("yes but only if it hasn't shipped", W1001, "other"),
        ("yes to the first one", W1001, "other"),
        ("yes, the second one", W1001, "other"),
        ("yes the other order", W1001, "other"),
        ("yes, I mean W2002", W1001, "other"),
        # an identifier without any params to compare with never confirms
        ("yes W1001", None, "other"),
        ("yes", None, "yes"),
        # another order: a new request (the question expires, the turn handles it)
        ("no, cancel W2002 instead", W1001, "other"),
        # no stays no
        ("don't cancel W1001", W1001, "no"),
    ],
)
def test_confirmation_answer_table(text: str, params: dict[str, Any] | None, answer: str) -> None:
    assert confirmation_answer(text, params) == answer


# --- what a red team found: each of these read as a yes before ------------------------------------

RED_TEAM = [
    "ok thanks, I'm good",
    "Okay, cancel the cancellation",
    "OK, delete the cancel request",
    "Yes, I want to change the address",
    "Yeah, right.",
    "Great. Just great.",
    "Sí, cancela la cancelación",
    "Oui, annulez l'annulation",
    "Ja, stornieren Sie die Stornierung",
    "Ja, annuleer de annulering",
    "Sì, annulla l'annullamento",
    "Sim, cancela o cancelamento",
    "כן, בטל את הביטול",
    "نعم، ألغِ الإلغاء",
]


@pytest.mark.parametrize("text", RED_TEAM)
@pytest.mark.parametrize("tool", ["cancel_order", None])
def test_what_the_red_team_found_is_no_yes(text: str, tool: str | None) -> None:
    reading = confirmation_reading(text, {"order_id": "TH-12345"}, tool)
    assert reading.answer != "yes"
    assert reading.reask  # it looked like an answer: asked again, with the buttons


@pytest.mark.parametrize(
    ("text", "tool", "answer"),
    [
        ("yes, cancel it", "cancel_order", "yes"),
        ("yes, refund it", "cancel_order", "other"),  # another action than the question's
        ("yes, refund it", "request_refund", "yes"),
        ("yes, cancel it", "request_refund", "other"),
        ("yes, go ahead", "close_account", "yes"),  # no listed action: only a plain go-ahead
        ("yes, cancel it and refund it", None, "other"),  # two actions
    ],
)
def test_a_yes_may_echo_only_the_questions_own_action(text: str, tool: str, answer: str) -> None:
    assert confirmation_answer(text, W1001, tool) == answer


def test_the_reading_names_its_assent_and_echoes() -> None:
    reading = confirmation_reading("Sí, cancélalo por favor", W1001, "cancel_order")
    assert (reading.answer, reading.assent, reading.echoes) == (
        "yes",
        "si",
        ("cancelalo", "por favor"),
    )
    assert reading.reason == "assent 'si' with cancelalo, por favor"
    assert reading.as_data()["languages"] == ["es", "fr", "it"]


def open_question(**facts: Any) -> OpenQuestion:
    return open_question_on(W1001, **facts)


@pytest.mark.parametrize(
    ("facts", "text", "status"),
    [
        ({}, "yes", PendingActionStatus.CONFIRMED),
        ({}, "yes W1001", PendingActionStatus.CONFIRMED),
        ({}, "yes cancel order #W2002", PendingActionStatus.EXPIRED),
        ({}, "no", PendingActionStatus.DECLINED),
        ({}, "what's the refund policy?", PendingActionStatus.EXPIRED),
        ({"shown_before": False}, "yes", PendingActionStatus.PENDING),
        ({"expired": True}, "yes", PendingActionStatus.EXPIRED),
        ({"first_reply": False}, "yes", PendingActionStatus.EXPIRED),
        ({"another_confirmed": True}, "yes", PendingActionStatus.EXPIRED),
    ],
)
def test_confirmation_decision(facts: dict[str, Any], text: str, status: str) -> None:
    assert confirmation_decision(open_question(**facts), text) == status


# --- end to end: adaptive and standard turns ---------------------------------------------------

W_SCHEMA = {
    "type": "object",
    "properties": {"order_id": {"type": "string", "pattern": "^#W\\d{4}$"}},
    "required": ["order_id"],
    "additionalProperties": False,
}


def _w_orders(client: Any) -> None:
    ClientTool.objects.for_client(client).filter(name="cancel_order").update(parameters=W_SCHEMA)


@pytest.fixture
def adaptive_chat(shop, django_capture_on_commit_callbacks) -> Chat:
    _w_orders(shop)
    return Chat.new(shop, django_capture_on_commit_callbacks)


@pytest.fixture
def standard_chat(standard_shop, django_capture_on_commit_callbacks) -> Chat:
    _w_orders(standard_shop)
    return Chat.new(standard_shop, django_capture_on_commit_callbacks)


def _propose(llm: Any, mode: str, params: dict[str, Any] | None, response: str = "") -> None:
    """Script the model proposing `cancel_order(params)` (or no tool call when None)."""
    tool = "cancel_order" if params is not None else None
    if mode == "adaptive":
        llm.script("assess", assess(response=response, tool_call=tool, tool_params=params or {}))
        if tool:
            llm.script("critique", critique("PROCEED"))
    else:
        llm.script(
            "respond", {"response": response, "tool_call": tool, "tool_params": params or {}}
        )


def _asked_to_cancel_w1001(request: Any, mode: str, llm: Any) -> tuple[Chat, Message]:
    """The chat of the `mode` shop once the customer asked to cancel #W1001 and the model
    proposed it; the reply (the confirmation question)."""
    chat: Chat = request.getfixturevalue(f"{mode}_chat")
    _propose(llm, mode, {"order_id": "#W1001"})
    [question] = chat.say("Please cancel order #W1001")
    return chat, question


def _pending() -> PendingAction:
    return PendingAction.objects.unscoped("test checks the database directly").get(
        status=PendingActionStatus.PENDING
    )


def _first_prompt(llm: Any, mode: str) -> str:
    return str(llm.calls("assess" if mode == "adaptive" else "respond")[-1].prompt_text)


@pytest.mark.parametrize("mode", ["adaptive", "standard"])
@pytest.mark.parametrize(
    "answer", ["yes cancel order #W2002", "yes, cancel order W2002 please", "Yes W2002"]
)
@pytest.mark.django_db
def test_yes_naming_another_order_does_not_cancel_the_asked_one(
    request, mode, answer, llm, webhook
):
    chat, question = _asked_to_cancel_w1001(request, mode, llm)
    assert question.kind == "confirmation_request" and "#W1001" in question.text
    first = _pending()

    # The model, which only sees the conversation, proposes nothing itself: before the fix the
    # code-made "confirmed" state ran #W1001 anyway.
    _propose(llm, mode, None, response="Let me look at #W2002.")
    replies = chat.say(answer)
    assert webhook.requests == []  # nothing was cancelled
    first.refresh_from_db()
    assert first.status == PendingActionStatus.EXPIRED
    assert "confirmed: cancel_order" not in _first_prompt(llm, mode)
    assert [r.text for r in replies] == ["Let me look at #W2002."]


@pytest.mark.parametrize("mode", ["adaptive", "standard"])
@pytest.mark.django_db
def test_the_other_order_is_a_new_request_that_asks_again(request, mode, llm, webhook):
    chat, _ = _asked_to_cancel_w1001(request, mode, llm)
    first = _pending()

    _propose(llm, mode, {"order_id": "#W2002"})
    [question] = chat.say("yes cancel order #W2002")
    assert question.kind == "confirmation_request" and "#W2002" in question.text
    assert webhook.requests == []
    first.refresh_from_db()
    assert first.status == PendingActionStatus.EXPIRED
    assert _pending().params == {"order_id": "#W2002"}

    # a model that insists on #W1001 is asked again too: it was never confirmed
    _propose(llm, mode, {"order_id": "#W1001"})
    [again] = chat.say("yes cancel order #W1001")  # answers the #W2002 question: not a yes
    assert again.kind == "confirmation_request" and "#W1001" in again.text
    assert webhook.requests == []

    # and a plain yes to the question now on screen runs exactly that
    _propose(llm, mode, {"order_id": "#W1001"})
    webhook.script(Reply.ok({"status": "cancelled"}))
    llm.script("compose", {"response": "Order #W1001 is cancelled."})
    chat.say("yes, cancel #W1001")
    [call] = webhook.requests
    assert call.params == {"order_id": "#W1001"}


@pytest.mark.parametrize("mode", ["adaptive", "standard"])
@pytest.mark.django_db
def test_a_yes_naming_the_asked_order_confirms(request, mode, llm, webhook):
    chat, _ = _asked_to_cancel_w1001(request, mode, llm)
    _propose(llm, mode, None, response="Cancelling.")
    if mode == "adaptive":
        llm.script("critique", critique("PROCEED"))  # the confirmed call is still checked
    webhook.script(Reply.ok({"status": "cancelled"}))
    llm.script("compose", {"response": "Order #W1001 is cancelled."})
    [reply] = chat.say("yes W1001")
    assert reply.text == "Order #W1001 is cancelled."
    [call] = webhook.requests
    assert call.params == {"order_id": "#W1001"}
    assert "confirmed: cancel_order" in _first_prompt(llm, mode)


def test_the_guards_are_pure_rules() -> None:
    """Every PendingAction write lives in apps/tools/pending.py; the guards only
    decide (no ORM, no transaction)."""
    import inspect

    from apps.reasoning import guards

    source = inspect.getsource(guards)
    assert ".objects" not in source and "transaction" not in source and ".save(" not in source
