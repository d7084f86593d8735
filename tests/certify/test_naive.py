"""The naive agent's rules in GuideDesk's step protocol: one decision, the step's fields."""

from __future__ import annotations

import json
from typing import Any

from apps.certify.naive import NaiveAgent, step_answer
from apps.reasoning import steps

USER = {
    "user_id": "ann_1",
    "payment_methods": [{"payment_method_id": "credit_card_1", "source": "credit_card"}],
}
ORDER = {
    "order_id": "#W1000001",
    "status": "pending",
    "total": "120.50",
    "items": [],
    "payment_history": [{"payment_method_id": "credit_card_1"}],
}
ASK = "Please cancel order #W1000001, ordered by mistake. My e-mail is ann@example.com."
PROPOSAL = (
    "I'll cancel order #W1000001 (ordered by mistake); 120.50 will be refunded. "
    "Shall I go ahead? Please confirm (yes/no)."
)
CANCEL = {"order_id": "#W1000001", "reason": "ordered by mistake"}


def _tool(n: int, name: str, args: dict[str, Any], result: dict[str, Any]) -> list[dict[str, Any]]:
    call = {
        "id": f"c{n}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {
            "role": "tool",
            "tool_call_id": f"c{n}",
            "content": json.dumps({"ok": True, "result": result}),
        },
    ]


def _looked_up() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": ASK},
        *_tool(1, "get_user_details", {"email": "ann@example.com"}, USER),
        *_tool(2, "get_order_details", {"order_id": "#W1000001"}, ORDER),
    ]


def _schema(step: str) -> dict[str, Any]:
    return steps.get(step).output.model_json_schema()


def _valid(step: str, answer: dict[str, Any] | None) -> Any:
    assert answer is not None
    return steps.get(step).output.model_validate(answer)


def test_assess_carries_the_tool_calling_decision() -> None:
    agent = NaiveAgent()
    first = _valid(
        "assess",
        step_answer(agent, "assess", [{"role": "user", "content": ASK}], {}, _schema("assess")),
    )
    assert (first.tool_call, first.tool_params) == (
        "get_user_details",
        {"email": "ann@example.com"},
    )
    assert not first.is_destructive
    confirmed = [
        *_looked_up(),
        {"role": "assistant", "content": PROPOSAL},
        {"role": "user", "content": "Yes, please go ahead."},
    ]
    act = _valid("assess", step_answer(agent, "assess", confirmed, {}, _schema("assess")))
    assert (act.tool_call, act.tool_params, act.is_destructive) == (
        "cancel_pending_order",
        CANCEL,
        True,
    )
    assert act.confidence == 9
    # The same conversation in the tool-calling shape: the same call.
    call = agent.decide(confirmed)["tool_calls"][0]["function"]
    assert (call["name"], json.loads(call["arguments"])) == ("cancel_pending_order", CANCEL)


def test_critique_proceeds_only_after_the_customers_yes() -> None:
    agent = NaiveAgent()
    hint = {"assessment": {"tool_call": "cancel_pending_order", "tool_params": CANCEL}}
    confirmed = [
        *_looked_up(),
        {"role": "assistant", "content": PROPOSAL},
        {"role": "user", "content": "Yes, please go ahead."},
    ]
    assert _valid("critique", step_answer(agent, "critique", confirmed, hint)).decision == "PROCEED"
    unasked = _valid("critique", step_answer(agent, "critique", _looked_up(), hint))
    assert unasked.decision == "ASK_USER"
    assert "#W1000001" in unasked.message and "confirm" in unasked.message
    other = {
        "assessment": {
            "tool_call": "cancel_pending_order",
            "tool_params": {"order_id": "#W2", "reason": "no longer needed"},
        }
    }
    asked = _valid("critique", step_answer(agent, "critique", confirmed, other))
    assert asked.decision == "ASK_USER" and "#W2" in asked.message


def test_compose_reports_the_tool_result_like_the_tool_calling_agent() -> None:
    agent = NaiveAgent()
    done = [
        *_looked_up(),
        {"role": "assistant", "content": PROPOSAL},
        {"role": "user", "content": "Yes, please go ahead."},
        *_tool(
            3,
            "cancel_pending_order",
            CANCEL,
            {"order_id": "#W1000001", "status": "cancelled", "refunded": "120.50"},
        ),
    ]
    reply = _valid("compose", step_answer(agent, "compose", done, {}, _schema("compose"))).response
    assert reply == agent.decide(done)["content"]
    assert "cancelled" in reply and "120.50" in reply


def test_steps_the_rules_do_not_decide_are_left_to_the_caller() -> None:
    assert step_answer(NaiveAgent(), "reason_step", [{"role": "user", "content": ASK}], {}) is None
