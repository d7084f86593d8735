"""The code-checked expectations over hand-built transcripts: every expectation, per turn and
case-wide, with the details people read — and the tricky parts: params as a subset, `times`,
a proposal that also ran, "*", the escalation reason, turns skipped after a hand-off, regular
expressions and the reply's language."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.simulations.expectations import case_check, expect_check, params_match, replay_check
from apps.simulations.schema import case_validate
from tests.simulations.factories_sim import cancel_turns
from tests.simulations.factories_sim import transcript_turn as turn


def ran(name: str, **params: Any) -> dict[str, Any]:
    return {"name": name, "params": params, "ok": True, "result": {}, "error": "", "stubbed": True}


def proposed(name: str, **params: Any) -> dict[str, Any]:
    return {"name": name, "params": params}


def check(expect: dict[str, Any], *turns: dict[str, Any]) -> list[tuple[bool, str]]:
    """(passed, detail) of each check of one turn's `expect` over that one turn."""
    return [
        (c["passed"], c["detail"]) for c in expect_check(expect=expect, turns=list(turns), turn=0)
    ]


def case_wide(expect: dict[str, Any], *turns: dict[str, Any]) -> list[tuple[bool, str]]:
    return [
        (c["passed"], c["detail"])
        for c in expect_check(expect=expect, turns=list(turns), turn=None)
    ]


CANCEL = case_validate(
    {
        "name": "cancel-confirmed",
        "turns": cancel_turns(reply_contains="cancelled"),
        "expect": {"tool_called": {"name": "cancel_order", "times": 1}, "escalated": False},
    }
)


def test_the_cancel_flow_passes() -> None:
    transcript = [
        turn(
            0,
            reply="Shall I cancel TH-10042?",
            tools_proposed=[proposed("cancel_order", order_id="TH-10042")],
        ),
        turn(
            1,
            reply="Order TH-10042 is cancelled.",
            tools_ran=[ran("cancel_order", order_id="TH-10042")],
        ),
    ]
    passed, checks = case_check(case=CANCEL, transcript=transcript)
    assert passed is True
    assert [(c["turn"], c["expect"], c["detail"]) for c in checks] == [
        (0, "tool_not_called", "cancel_order did not run"),
        (
            0,
            "tool_proposed",
            'cancel_order with {"order_id": "TH-10042"} was put to the customer for '
            "confirmation, not run",
        ),
        (1, "tool_called", 'cancel_order with {"order_id": "TH-10042"} ran once'),
        (1, "reply_contains", 'the reply contains "cancelled"'),
        (None, "tool_called", "cancel_order ran once, expected exactly 1"),
        (None, "escalated", "not handed off"),
    ]
    assert checks[2]["spec"] == {"name": "cancel_order", "params": {"order_id": "TH-10042"}}


def test_a_cancel_that_ran_twice_fails_with_the_count() -> None:
    transcript = [
        turn(0, tools_proposed=[proposed("cancel_order", order_id="TH-10042")]),
        turn(1, reply="Cancelled", tools_ran=[ran("cancel_order", order_id="TH-10042")] * 2),
    ]
    passed, checks = case_check(case=CANCEL, transcript=transcript)
    assert passed is False
    failed = [c for c in checks if not c["passed"]]
    assert [(c["turn"], c["detail"]) for c in failed] == [
        (None, "cancel_order ran 2 times, expected exactly 1")
    ]


def test_params_are_a_subset() -> None:
    full = ran("update_shipping_address", order_id="TH-1", address="12 Pine Road", note="x")
    spec = {"name": "update_shipping_address", "params": {"order_id": "TH-1"}}
    assert check({"tool_called": spec}, turn(0, tools_ran=[full])) == [
        (True, 'update_shipping_address with {"order_id": "TH-1"} ran once')
    ]
    wrong = {"name": "update_shipping_address", "params": {"order_id": "TH-2"}}
    assert check({"tool_called": wrong}, turn(0, tools_ran=[full])) == [
        (
            False,
            'update_shipping_address ran, but not with {"order_id": "TH-2"} (ran with '
            '{"address": "12 Pine Road", "note": "x", "order_id": "TH-1"})',
        )
    ]
    assert check({"tool_called": "get_order_status"}, turn(0, tools_ran=[full])) == [
        (False, "get_order_status did not run (tools that ran: update_shipping_address)")
    ]
    assert check({"tool_called": "get_order_status"}, turn(0)) == [
        (False, "get_order_status did not run (tools that ran: none)")
    ]


def test_params_match_rules() -> None:
    assert params_match({}, {"a": 1})
    assert params_match({"a": {"b": 1}}, {"a": {"b": 1, "c": 2}})  # nested objects: a subset too
    assert not params_match({"a": {"b": 1, "d": 1}}, {"a": {"b": 1}})
    assert not params_match({"a": True}, {"a": 1})  # true is not 1
    assert not params_match({"a": 1}, {"a": True})
    assert params_match({"a": 1}, {"a": 1.0})
    assert params_match({"a": [1, {"b": 2}]}, {"a": [1, {"b": 2, "c": 3}]})
    assert not params_match({"a": [1]}, {"a": [1, 2]})  # lists are compared item by item
    assert not params_match({"a": "TH-1"}, {"a": "th-1"})  # values are exact
    assert not params_match({"a": 1}, None)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)


# No deadline or speed check: the box is shared, and a slow example is not a wrong one.
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.text(max_size=4), json_values, max_size=5), st.data())
def test_any_subset_of_the_params_matches(actual: dict[str, Any], data: Any) -> None:
    keys = data.draw(
        st.lists(st.sampled_from(sorted(actual)), unique=True) if actual else st.just([])
    )
    assert params_match({k: actual[k] for k in keys}, actual)
    missing = data.draw(st.text(min_size=1, max_size=4).filter(lambda k: k not in actual))
    assert not params_match({**{k: actual[k] for k in keys}, missing: 1}, actual)


def test_times() -> None:
    two = turn(
        0,
        tools_ran=[
            ran("get_order_status", order_id="TH-1"),
            ran("get_order_status", order_id="TH-2"),
        ],
    )
    assert check({"tool_called": {"name": "get_order_status", "times": 2}}, two) == [
        (True, "get_order_status ran 2 times, expected exactly 2")
    ]
    spec = {"name": "get_order_status", "params": {"order_id": "TH-1"}, "times": 1}
    assert check({"tool_called": spec}, two)[0][0] is True
    assert check({"tool_called": {"name": "get_order_status", "times": 0}}, turn(0)) == [
        (True, "get_order_status ran no times, expected exactly 0")
    ]
    spec = {"name": "get_order_status", "params": {"order_id": "TH-9"}, "times": 1}
    assert check({"tool_called": spec}, two) == [
        (
            False,
            'get_order_status with {"order_id": "TH-9"} ran no times, expected exactly 1 '
            '(it ran with {"order_id": "TH-1"})',
        )
    ]
    # Without times: at least once.
    assert check({"tool_called": "get_order_status"}, two) == [
        (True, "get_order_status ran 2 times")
    ]


def test_a_failed_run_still_ran() -> None:
    failed = {**ran("cancel_order", order_id="TH-1"), "ok": False, "error": "order not found"}
    assert check({"tool_called": "cancel_order"}, turn(0, tools_ran=[failed]))[0][0] is True


def test_tool_not_called_and_star() -> None:
    status = turn(0, tools_ran=[ran("get_order_status", order_id="TH-1")])
    assert check({"tool_not_called": ["cancel_order", "get_order_status"]}, status) == [
        (True, "cancel_order did not run"),
        (False, 'get_order_status ran once (with {"order_id": "TH-1"})'),
    ]
    assert check({"tool_not_called": "*"}, status) == [
        (False, "expected no tool to run; ran: get_order_status")
    ]
    assert check({"tool_not_called": "*"}, turn(0)) == [(True, "no tool ran")]


def test_a_proposal_that_also_ran_in_the_same_turn_fails() -> None:
    both = turn(
        0,
        tools_proposed=[proposed("cancel_order", order_id="TH-1")],
        tools_ran=[ran("cancel_order", order_id="TH-1")],
    )
    assert check({"tool_proposed": "cancel_order"}, both) == [
        (False, "cancel_order was proposed but also ran in the same turn")
    ]
    other = turn(0, tools_proposed=[proposed("cancel_order", order_id="TH-2")])
    assert check(
        {"tool_proposed": {"name": "cancel_order", "params": {"order_id": "TH-1"}}}, other
    ) == [(False, 'cancel_order was proposed, but with {"order_id": "TH-2"}')]
    assert check({"tool_proposed": "cancel_order"}, turn(0)) == [
        (False, "cancel_order was not proposed (proposed: none)")
    ]


def test_case_wide_proposal_needs_one_turn_where_it_was_proposed_and_not_run() -> None:
    first = turn(0, tools_proposed=[proposed("cancel_order", order_id="TH-1")])
    second = turn(1, tools_ran=[ran("cancel_order", order_id="TH-1")])
    assert case_wide({"tool_proposed": "cancel_order"}, first, second)[0][0] is True
    both = turn(0, tools_proposed=[proposed("cancel_order")], tools_ran=[ran("cancel_order")])
    assert case_wide({"tool_proposed": "cancel_order"}, both, second)[0][0] is False


def test_escalation_and_its_reason() -> None:
    handed = turn(0, escalated=True, escalation_reason="customer_request")
    assert check({"escalated": True}, handed) == [(True, "handed off (customer_request)")]
    assert check({"escalated": False}, handed) == [
        (False, "handed off (customer_request), expected no hand-off")
    ]
    assert check({"escalated": {"reason": "customer_request"}}, handed) == [
        (True, "handed off (customer_request), expected customer_request")
    ]
    assert check({"escalated": {"reason": "low_confidence"}}, handed) == [
        (False, "handed off (customer_request), expected low_confidence")
    ]
    assert check({"escalated": {"reason": "low_confidence"}}, turn(0)) == [
        (False, "not handed off, expected a hand-off (low_confidence)")
    ]
    assert check({"escalated": True}, turn(0)) == [(False, "not handed off, expected a hand-off")]


def test_clarifying_question() -> None:
    assert check({"clarifying_question": True}, turn(0, asked=True)) == [
        (True, "asked the customer a question")
    ]
    assert check({"clarifying_question": True}, turn(0)) == [
        (False, "asked no clarifying question, expected a question")
    ]
    assert check({"clarifying_question": False}, turn(0, asked=True)) == [
        (False, "asked the customer a question, expected none")
    ]


def test_reply_texts_are_case_insensitive() -> None:
    reply = turn(0, reply="Your order TH-10042 is CANCELLED.\nAnything else?")
    assert check({"reply_contains": ["cancelled", "anything ELSE"]}, reply) == [
        (True, 'the reply contains "cancelled"'),
        (True, 'the reply contains "anything ELSE"'),
    ]
    assert check({"reply_contains": "refund"}, reply) == [
        (
            False,
            'the reply does not contain "refund": "Your order TH-10042 is CANCELLED. Anything '
            'else?"',
        )
    ]
    assert check({"reply_not_contains": "Refund"}, reply) == [
        (True, 'the reply does not contain "Refund"')
    ]
    assert check({"reply_not_contains": "th-10042"}, reply)[0][0] is False


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(min_size=1, max_size=20), st.text(max_size=20), st.text(max_size=20))
def test_a_text_in_the_reply_is_found_in_any_case(text: str, before: str, after: str) -> None:
    reply = turn(0, reply=before + text.swapcase() + after)
    if text.swapcase().casefold() == text.casefold():  # casefold round-trips (not ß and the like)
        assert check({"reply_contains": text}, reply)[0][0] is True
        assert check({"reply_not_contains": text}, reply)[0][0] is False


def test_regular_expressions() -> None:
    reply = turn(0, reply="Your order th-10042 ships on Monday.")
    assert check({"reply_matches": r"TH-\d{5}"}, reply) == [
        (True, 'the reply matches "TH-\\\\d{5}" ("th-10042")')
    ]
    assert check({"reply_matches": r"^ships"}, reply)[0][0] is False
    assert check({"reply_matches": "(unclosed"}, reply)[0] == (
        False,
        '"(unclosed" is not a valid regular expression: missing ), unterminated subpattern at '
        "position 0",
    )


def test_the_reply_language() -> None:
    spanish = turn(0, reply="Tu pedido ha sido cancelado. ¿Puedo ayudarte con algo más?")
    assert check({"reply_language": "es"}, spanish) == [(True, "the reply is in es")]
    assert check({"reply_language": "en"}, spanish) == [(False, "the reply is in es, expected en")]
    assert check({"reply_language": "es"}, turn(0, reply="OK!")) == [
        (False, "the reply's language cannot be told (too short or ambiguous), expected es")
    ]
    assert check({"reply_language": "es"}, turn(0)) == [
        (False, "no reply to tell the language of, expected es")
    ]


def test_limits_per_turn() -> None:
    busy = turn(0, llm_calls=4, prompt_tokens=900, completion_tokens=150, cost_usd="0.0021")
    assert check({"max_llm_calls": 4, "max_tokens": 1000, "max_cost_usd": "0.002"}, busy) == [
        (True, "4 LLM calls, at most 4"),
        (False, "1050 tokens, at most 1000 expected"),
        (False, "0.0021 USD, at most 0.002 expected"),
    ]
    assert check({"max_cost_usd": 0.01}, busy) == [(True, "0.0021 USD, at most 0.01")]


def test_limits_case_wide_hold_for_every_turn() -> None:
    turns = [turn(0, llm_calls=2), turn(1, llm_calls=5), turn(2, llm_calls=1)]
    assert case_wide({"max_llm_calls": 5}, *turns) == [
        (True, "every turn within 5 LLM calls (most: 5, turns[1])")
    ]
    assert case_wide({"max_llm_calls": 3}, *turns) == [
        (False, "turns[1] used 5 LLM calls, at most 3 expected")
    ]


def test_evaluation() -> None:
    assert check({"evaluation": "validated"}, turn(0, evaluation="validated")) == [
        (True, 'evaluation "validated"')
    ]
    assert check({"evaluation": ["validated", "improved"]}, turn(0, evaluation="questioned")) == [
        (False, 'turns[0]: evaluation "questioned", expected "validated" or "improved"')
    ]
    assert check({"evaluation": ""}, turn(0))[0][0] is True  # not evaluated
    turns = [turn(0, evaluation="validated"), turn(1, evaluation="")]
    assert case_wide({"evaluation": "validated"}, *turns) == [
        (False, 'turns[1]: evaluation "", expected "validated"')
    ]


HANDOFF = case_validate(
    {
        "name": "handoff",
        "turns": [
            {"customer": "I want a human", "expect": {"escalated": {"reason": "customer_request"}}},
            {"customer": "Hello?", "expect": {"reply_contains": "team", "tool_not_called": "*"}},
            {"customer": "Anyone?"},
        ],
        "expect": {"escalated": True, "reply_contains": "person", "max_llm_calls": 2},
    }
)


def test_expectations_on_turns_skipped_after_a_hand_off_fail_clearly() -> None:
    transcript = [
        turn(
            0,
            reply="I'm passing you to a person.",
            escalated=True,
            escalation_reason="customer_request",
            llm_calls=0,
        ),
        {"index": 1, "customer": "Hello?", "skipped": "handed off"},
        {"index": 2, "customer": "Anyone?", "skipped": "handed off"},
    ]
    passed, checks = case_check(case=HANDOFF, transcript=transcript)
    assert passed is False
    assert [(c["turn"], c["expect"], c["passed"], c["detail"]) for c in checks] == [
        (
            0,
            "escalated",
            True,
            "handed off (customer_request), expected customer_request",
        ),
        (1, "tool_not_called", False, "turns[1] did not run: handed off in an earlier turn"),
        (1, "reply_contains", False, "turns[1] did not run: handed off in an earlier turn"),
        (None, "escalated", True, "handed off (customer_request)"),
        (None, "reply_contains", True, 'the reply contains "person"'),
        (None, "max_llm_calls", True, "every turn within 2 LLM calls (most: 0, turns[0])"),
    ]


def test_a_turn_the_run_never_reached_or_that_failed() -> None:
    case = case_validate(
        {
            "name": "c",
            "turns": [
                {"customer": "a", "expect": {"reply_contains": "x"}},
                {"customer": "b", "expect": {"reply_contains": "y"}},
            ],
        }
    )
    passed, checks = case_check(case=case, transcript=[turn(0, reply="x", error="budget reached")])
    assert passed is False
    assert [c["detail"] for c in checks] == [
        "turns[0] failed: budget reached",
        "turns[1] did not run (the run ended before it)",
    ]


def test_nothing_to_check_is_none() -> None:
    case = case_validate({"name": "c", "turns": [{"customer": "hi"}]})
    assert case_check(case=case, transcript=[turn(0)]) == (None, [])


def test_a_simulated_customer_case_checks_case_wide() -> None:
    case = case_validate(
        {
            "name": "sim",
            "simulated": {"goal": "Cancel TH-10042"},
            "expect": {"tool_called": {"name": "cancel_order", "times": 1}},
        }
    )
    transcript = [
        turn(0, tools_proposed=[proposed("cancel_order", order_id="TH-10042")]),
        turn(1, tools_ran=[ran("cancel_order", order_id="TH-10042")]),
    ]
    assert case_check(case=case, transcript=transcript)[0] is True


def test_raw_shorthands_are_read_too() -> None:
    """A case that skipped case_validate (e.g. a SimCase edited by hand) is read the same."""
    raw = {"turns": [{"customer": "hi", "expect": {"tool_called": "x", "reply_contains": "ok"}}]}
    passed, checks = case_check(case=raw, transcript=[turn(0, reply="OK", tools_ran=[ran("x")])])
    assert passed is True and len(checks) == 2


def test_replay_check() -> None:
    handled = [turn(0, reply="Hi"), turn(1, reply="Shipped")]
    assert replay_check(transcript=handled)[0] is True
    escalated = [
        turn(0, escalated=True, escalation_reason="low_confidence"),
        {"index": 1, "skipped": "handed off"},
    ]
    passed, checks = replay_check(transcript=escalated)
    assert passed is False
    assert [c["detail"] for c in checks] == [
        "handed off (low_confidence)",
        "turns[1] did not run: handed off in an earlier turn",
    ]
