"""The widget's Yes/No buttons: a structured answer (`confirm`: the question's id and digest)
settles exactly the question it was shown with — language-free, and unable to confirm anything
else. Through the real widget API, turn pipeline, openai SDK (fake server) and webhook."""

from __future__ import annotations

from typing import Any

import pytest

from apps.conversations.models import Conversation, Kind, Message
from apps.tools.models import PendingAction, PendingActionStatus
from apps.tools.pending import params_hash
from tests.support.fake_webhook import Reply
from tests.support.shop import assess, cancel_assess, critique, make_shop
from tests.widget.conftest import Widget

pytestmark = pytest.mark.django_db(transaction=True)

ORDER = {"order_id": "TH-12345"}


def _db(model: Any) -> Any:
    return model.objects.unscoped("test checks the database directly")


def _ask(widget: Widget, llm: Any, params: dict[str, Any] = ORDER) -> tuple[str, str, dict]:
    """A conversation whose last reply is the confirmation question about cancel_order(params);
    returns (conversation id, token, the question's JSON as the widget got it)."""
    conversation_id, token = widget.conversation()
    llm.script("assess", cancel_assess(params["order_id"], tool_params=params))
    llm.script("critique", critique("ASK_USER", "Cancel it?", "destructive"))
    response = widget.say(conversation_id, token, f"Cancel order {params['order_id']}")
    assert response.status_code == 201, response.content
    [question] = response.json()["replies"]
    assert question["kind"] == Kind.CONFIRMATION_REQUEST
    return conversation_id, token, question


def _question_data(widget: Widget, conversation_id: str) -> dict[str, Any]:
    """The stored question's data (the widget reads `pending_action` and `digest` from it)."""
    message = (
        _db(Message)
        .filter(conversation__public_id=conversation_id, kind=Kind.CONFIRMATION_REQUEST)
        .latest("seq")
    )
    return dict(message.data)


def _button(data: dict[str, Any], answer: str, **overrides: Any) -> dict[str, Any]:
    return {
        "action": data["pending_action"],
        "digest": data["digest"],
        "answer": answer,
    } | overrides


def _script_the_run(llm: Any, webhook: Any, params: dict[str, Any] = ORDER) -> None:
    llm.script(
        "assess",
        assess(response="Cancelling.", tool_call="cancel_order", tool_params=params),
    )
    llm.script("critique", critique("PROCEED"))
    webhook.script(Reply.ok({"status": "cancelled"}))
    llm.script("compose", {"response": f"Order {params['order_id']} is cancelled."})


def test_the_question_carries_its_id_and_digest(widget, llm):
    conversation_id, _, _ = _ask(widget, llm)
    data = _question_data(widget, conversation_id)
    pending = _db(PendingAction).get()
    assert data["pending_action"] == pending.pk
    assert data["digest"] == pending.params_hash[:16] == params_hash(ORDER)[:16]


@pytest.mark.parametrize("label", ["כן", "Sí", "Oui", "Ja", "نعم", "Yes"])
def test_yes_button_confirms_in_any_language(widget, llm, webhook, label):
    conversation_id, token, _ = _ask(widget, llm)
    data = _question_data(widget, conversation_id)
    _script_the_run(llm, webhook)
    response = widget.say(conversation_id, token, {"text": label, "confirm": _button(data, "yes")})
    assert response.status_code == 201, response.content
    [call] = webhook.requests
    assert call.params == ORDER
    pending = _db(PendingAction).get()
    assert pending.status == PendingActionStatus.EXECUTED
    assert [r["text"] for r in response.json()["replies"]] == ["Order TH-12345 is cancelled."]


def test_no_button_declines_whatever_the_text_says(widget, llm, webhook):
    conversation_id, token, _ = _ask(widget, llm)
    data = _question_data(widget, conversation_id)
    llm.script("assess", assess(response="All right, I won't cancel it."))
    response = widget.say(conversation_id, token, {"text": "yes", "confirm": _button(data, "no")})
    assert response.status_code == 201, response.content
    assert webhook.requests == []
    assert _db(PendingAction).get().status == PendingActionStatus.DECLINED


@pytest.mark.parametrize(
    "overrides",
    [
        {"digest": "0123456789abcdef"},  # params changed since the button was drawn
        {"action": 999_999},  # another (or an invented) question
    ],
)
def test_a_stale_button_is_never_a_yes_even_with_yes_text(widget, llm, webhook, overrides):
    conversation_id, token, _ = _ask(widget, llm)
    data = _question_data(widget, conversation_id)
    llm.script("assess", assess(response="What would you like me to do?"))
    response = widget.say(
        conversation_id, token, {"text": "Yes", "confirm": _button(data, "yes", **overrides)}
    )
    assert response.status_code == 201, response.content
    assert webhook.requests == []
    assert _db(PendingAction).get().status == PendingActionStatus.EXPIRED


def test_a_button_for_a_superseded_question_confirms_nothing(widget, llm, webhook):
    conversation_id, token, _ = _ask(widget, llm)
    old = _question_data(widget, conversation_id)
    # the customer names another order: the model proposes it, a new question replaces the first
    llm.script(
        "assess",
        cancel_assess("TH-22222", needs_confirmation=False, response="I can cancel TH-22222."),
    )
    llm.script("critique", critique("ASK_USER", "Cancel it?", "destructive"))
    assert widget.say(conversation_id, token, "actually TH-22222").status_code == 201
    llm.script("assess", assess(response="Which order do you mean?"))
    response = widget.say(conversation_id, token, {"text": "Yes", "confirm": _button(old, "yes")})
    assert response.status_code == 201
    assert webhook.requests == []
    statuses = dict(_db(PendingAction).values_list("params__order_id", "status"))
    # the first was settled by "actually TH-22222" (no yes); the button pressed under it now
    # is not a yes for the second either
    assert statuses == {
        "TH-12345": PendingActionStatus.EXPIRED,
        "TH-22222": PendingActionStatus.EXPIRED,
    }


def test_another_conversation_cannot_settle_this_question(widget, llm, webhook):
    conversation_id, _, _ = _ask(widget, llm)
    data = _question_data(widget, conversation_id)
    other_id, other_token = widget.conversation()
    llm.script("assess", assess(response="How can I help?"))
    response = widget.say(other_id, other_token, {"text": "yes", "confirm": _button(data, "yes")})
    assert response.status_code == 201
    assert webhook.requests == []
    assert _db(PendingAction).get().status == PendingActionStatus.PENDING  # untouched


def test_client_a_cannot_settle_client_b_question(widget, llm, webhook):
    conversation_id, _, _ = _ask(widget, llm)  # client B's (the shop's) open question
    data = _question_data(widget, conversation_id)
    other_shop = Widget(make_shop("adaptive", webhook.url(), slug="other-shop"))
    a_id, a_token = other_shop.conversation()
    llm.script("assess", assess(response="How can I help?"))
    response = other_shop.say(a_id, a_token, {"text": "yes", "confirm": _button(data, "yes")})
    assert response.status_code == 201
    assert webhook.requests == []
    assert _db(PendingAction).get().status == PendingActionStatus.PENDING
    # and client A's visitor cannot even post into client B's conversation
    sneaky = other_shop.say(
        conversation_id, a_token, {"text": "yes", "confirm": _button(data, "yes")}
    )
    assert sneaky.status_code in (401, 404)
    assert _db(PendingAction).get().status == PendingActionStatus.PENDING


@pytest.mark.parametrize(
    "confirm",
    [
        "yes",
        ["yes"],
        {"action": 1, "digest": "abc", "answer": "maybe"},
        {"action": "one", "digest": "abc", "answer": "yes"},
        {"action": 1, "digest": "not-hex!", "answer": "yes"},
        {"action": 1, "answer": "yes"},
    ],
)
def test_a_malformed_confirm_is_a_400_naming_confirm(widget, confirm):
    conversation_id, token = widget.conversation()
    response = widget.say(conversation_id, token, {"text": "yes", "confirm": confirm})
    assert response.status_code == 400
    assert "confirm" in response.json()["error"]["fields"]
    conversation = _db(Conversation).get(public_id=conversation_id)
    assert not conversation.messages.exists()  # nothing stored


def test_the_press_is_kept_on_the_customer_message_but_not_shown(widget, llm, webhook):
    conversation_id, token, _ = _ask(widget, llm)
    data = _question_data(widget, conversation_id)
    llm.script("assess", assess(response="Okay, I won't."))
    response = widget.say(conversation_id, token, {"text": "No", "confirm": _button(data, "no")})
    assert response.json()["message"]["data"] == {}
    message = _db(Message).filter(conversation__public_id=conversation_id, text="No").get()
    assert message.data["confirm"] == _button(data, "no")
