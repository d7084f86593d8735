"""A destructive tool's precondition: the object's state is read (a real signed webhook call to
the shop's read tool) before the customer is asked to confirm. Not possible → a plain reply in
the customer's language, no question, no destructive call; possible → the question as before;
nothing readable (the read tool down, no such field, switched off) → the question as before."""

from __future__ import annotations

from typing import Any

import pytest

from apps.conversations.models import Kind
from apps.reasoning.models import ReasoningStep
from apps.tools.models import ClientTool, PendingAction, PendingActionStatus, ToolExecution
from tests.support.fake_webhook import Reply
from tests.support.shop import Chat, assess, cancel_assess, critique

pytestmark = pytest.mark.django_db

ALL = "test checks the database directly"
ORDER = "TH-12345"
PRECONDITION = {
    "tool": "get_order_status",
    "params": {"order_id": "order_id"},
    "field": "status",
    "allowed": ["processing", "pending"],
}


def declare(client: Any, precondition: dict[str, Any] = PRECONDITION) -> None:
    ClientTool.objects.for_client(client).filter(name="cancel_order").update(
        precondition=precondition
    )


def propose_cancel(llm: Any, mode: str) -> None:
    """The model proposes cancelling ORDER (the critique wants it put to the customer)."""
    if mode == "standard":
        llm.script(
            "respond",
            {
                "response": f"I can cancel order {ORDER}.",
                "tool_call": "cancel_order",
                "tool_params": {"order_id": ORDER},
            },
        )
        return
    llm.script("assess", cancel_assess(ORDER))
    llm.script("critique", critique("ASK_USER", f"Cancel order {ORDER}?", "Needs confirmation"))


def tools_called(webhook: Any) -> list[str]:
    return [request.json["tool"] for request in webhook.requests]


def precondition_steps() -> list[dict[str, Any]]:
    return [
        step.output
        for step in ReasoningStep.objects.unscoped(ALL).filter(name="precondition").order_by("pk")
    ]


@pytest.fixture(params=["adaptive", "standard"])
def any_chat(request: pytest.FixtureRequest) -> tuple[str, Chat]:
    fixture = "chat" if request.param == "adaptive" else "std_chat"
    return request.param, request.getfixturevalue(fixture)


@pytest.mark.parametrize("state", ["delivered", "cancelled", "Shipped"])
def test_an_order_past_cancelling_is_refused_plainly_without_a_question(
    any_chat, llm, webhook, state
):
    mode, chat = any_chat
    declare(chat.client)
    propose_cancel(llm, mode)
    webhook.script(Reply.ok({"order_id": ORDER, "status": state, "total": "49.00"}))

    [reply] = chat.say(f"Please cancel order {ORDER}")

    assert reply.kind == Kind.TEXT  # not a confirmation request
    assert "isn't possible for order id TH-12345" in reply.text
    assert f"its status is {state.lower()}" in reply.text
    assert "yes" not in reply.text.lower()
    assert reply.data["not_possible"] == "cancel_order"
    assert not PendingAction.objects.unscoped(ALL).exists()
    # The read ran (signed, with the confirmation-free read tool's own params); nothing else.
    assert tools_called(webhook) == ["get_order_status"]
    assert webhook.requests[0].json["params"] == {"order_id": ORDER}
    [execution] = ToolExecution.objects.unscoped(ALL).all()
    assert execution.tool.name == "get_order_status" and execution.pending_action is None
    # On record: the read as tool_call/tool_result, the decision as a guard message and step.
    kinds = [m.kind for m in chat.all()]
    assert kinds[-4:] == ["tool_call", "tool_result", "guard", "text"]
    assert chat.all(kind=Kind.TOOL_CALL)[0].data["purpose"] == "precondition"
    assert "NOT POSSIBLE: cancel_order" in chat.all(kind=Kind.GUARD)[-1].text
    [step] = precondition_steps()
    assert step["outcome"] == "not_possible" and step["state"] == state
    assert step["read_tool"] == "get_order_status" and step["params"] == {"order_id": ORDER}

    # A "yes" afterwards confirms nothing: no question was open, the cancellation never runs.
    if mode == "standard":
        llm.script(
            "respond",
            {"response": "Anything else I can help with?", "tool_call": None, "tool_params": {}},
        )
    else:
        llm.script("assess", assess(response="Anything else I can help with?"))
    chat.say("Yes")
    assert tools_called(webhook) == ["get_order_status"]


def test_a_cancellable_order_gets_the_question_and_runs_only_after_the_yes(chat, llm, webhook):
    declare(chat.client)
    propose_cancel(llm, "adaptive")
    webhook.script(Reply.ok({"order_id": ORDER, "status": "processing"}))

    [reply] = chat.say(f"Please cancel order {ORDER}")

    assert reply.kind == Kind.CONFIRMATION_REQUEST
    assert ORDER in reply.text and "yes" in reply.text.lower()
    pending = PendingAction.objects.unscoped(ALL).get()
    assert pending.status == PendingActionStatus.PENDING
    assert tools_called(webhook) == ["get_order_status"]  # the read; no cancellation yet
    [step] = precondition_steps()
    assert step["outcome"] == "allowed" and step["state"] == "processing"

    llm.script("assess", cancel_assess(ORDER, confirmed=True))
    llm.script("critique", critique("PROCEED", reasoning="The customer confirmed."))
    webhook.script(Reply.ok({"order_id": ORDER, "status": "cancelled"}))
    llm.script("compose", {"response": f"Done! Order {ORDER} has been cancelled."})
    [done] = chat.say("Yes")

    assert done.text == f"Done! Order {ORDER} has been cancelled."
    assert tools_called(webhook) == ["get_order_status", "cancel_order"]
    assert webhook.requests[1].json["idempotency_key"] == pending.idempotency_key


@pytest.mark.parametrize(
    "read",
    [
        Reply.fail("upstream down", status=503),  # the read tool is down (retried, then fails)
        Reply.fail("We couldn't find that order."),  # refused by the shop
        Reply.ok({"order_id": ORDER}),  # no state in the result
        Reply.ok({"order_id": ORDER, "status": {"code": "x"}}),  # not a single value
    ],
    ids=["down", "refused", "no-field", "not-a-value"],
)
def test_when_nothing_can_be_read_the_question_is_asked_as_before(chat, llm, webhook, read):
    declare(chat.client)
    propose_cancel(llm, "adaptive")
    webhook.default(read)

    [reply] = chat.say(f"Please cancel order {ORDER}")

    assert reply.kind == Kind.CONFIRMATION_REQUEST
    assert PendingAction.objects.unscoped(ALL).filter(status=PendingActionStatus.PENDING).exists()
    assert set(tools_called(webhook)) == {"get_order_status"}
    [step] = precondition_steps()
    assert step["outcome"] == "unknown"
    assert step["reason"] in {"read_failed", "no_state"}


def test_a_switched_off_read_tool_is_not_called_and_the_question_is_asked(chat, llm, webhook):
    declare(chat.client)
    ClientTool.objects.for_client(chat.client).filter(name="get_order_status").update(enabled=False)
    propose_cancel(llm, "adaptive")

    [reply] = chat.say(f"Please cancel order {ORDER}")

    assert reply.kind == Kind.CONFIRMATION_REQUEST
    assert webhook.requests == []  # the guards refused the read: only enabled tools run
    [step] = precondition_steps()
    assert step == {
        "tool": "cancel_order",
        "read_tool": "get_order_status",
        "params": {"order_id": ORDER},
        "outcome": "unknown",
        "reason": "tool_disabled",
    }


def test_a_customer_scoped_read_never_runs_for_an_unverified_customer(chat, llm, webhook):
    declare(chat.client)
    ClientTool.objects.for_client(chat.client).filter(name="get_order_status").update(
        customer_scoped=True
    )
    propose_cancel(llm, "adaptive")

    [reply] = chat.say(f"Please cancel order {ORDER}")

    assert reply.kind == Kind.CONFIRMATION_REQUEST
    assert webhook.requests == []
    assert precondition_steps()[0]["reason"] == "customer_not_verified"


def test_without_a_precondition_nothing_is_read(chat, llm, webhook):
    propose_cancel(llm, "adaptive")

    [reply] = chat.say(f"Please cancel order {ORDER}")

    assert reply.kind == Kind.CONFIRMATION_REQUEST
    assert webhook.requests == [] and precondition_steps() == []


@pytest.mark.django_db(transaction=True)
def test_the_refusal_is_in_the_customers_language(chat, llm, webhook):
    chat.client.language, chat.client.languages = "en", ["en", "es"]
    chat.client.save(update_fields=["language", "languages"])
    declare(chat.client)
    propose_cancel(llm, "adaptive")
    webhook.script(Reply.ok({"order_id": ORDER, "status": "delivered"}))

    [reply] = chat.say(f"Por favor, cancele mi pedido {ORDER}, ya no lo necesito.")

    assert reply.language == "es"
    assert reply.text == (
        "Lo siento, «Cancel order» no es posible para order id TH-12345: su estado es "
        "entregado. No se ha cambiado nada."
    )
    assert not PendingAction.objects.unscoped(ALL).exists()
