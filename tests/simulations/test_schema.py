"""The case format: `case_validate` normalizes a valid case and refuses a wrong one with every
problem by field path; `CASE_JSON_SCHEMA` is a valid JSON Schema that accepts what
`case_validate` accepts."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
import pytest

from apps.core.exceptions import ApplicationError
from apps.escalations.models import EscalationReason
from apps.reasoning.evaluation import OUTCOMES
from apps.simulations import schema
from apps.simulations.schema import CASE_JSON_SCHEMA, case_validate, expect_normalize
from tests.simulations.factories_sim import cancel_turns

CANCEL: dict[str, Any] = {
    "name": "cancel-confirmed",
    "suite": "demo",
    "description": "The customer cancels and confirms.",
    "tags": ["cancel", "destructive", "cancel"],
    "history": [{"role": "user", "text": "Hi"}, {"role": "assistant", "text": "Hello!"}],
    "turns": cancel_turns(reply_contains="cancelled", reply_matches=r"TH-\d{5}", evaluation=""),
    "expect": {
        "tool_called": {"name": "cancel_order", "times": 1},
        "max_cost_usd": 0.0100,
        "escalated": False,
    },
    "criteria": ["  does not promise a refund "],
    "tools": {
        "order_status": {"ok": True, "result": {"status": "shipped"}},
        "cancel_order": [
            {"when": {"order_id": "TH-10042"}, "ok": True, "result": {"cancelled": True}},
            {"ok": False, "error": "order not found"},
        ],
    },
    "repeat": 3,
}


def fields(data: Any) -> dict[str, str]:
    with pytest.raises(ApplicationError) as caught:
        case_validate(data)
    assert caught.value.message == "Invalid simulation case."
    return caught.value.extra["fields"]


def with_expect(expect: dict[str, Any], *, turn: bool = True) -> dict[str, Any]:
    data: dict[str, Any] = {"name": "c", "turns": [{"customer": "hi"}]}
    if turn:
        data["turns"][0]["expect"] = expect
    else:
        data["expect"] = expect
    return data


def test_a_full_case_is_normalized() -> None:
    out = case_validate(copy.deepcopy(CANCEL))
    assert out["name"] == "cancel-confirmed"
    assert out["suite"] == "demo"
    assert out["tags"] == ["cancel", "destructive"]  # duplicates dropped, order kept
    assert out["turns"][0]["expect"] == {
        "tool_not_called": ["cancel_order"],
        "tool_proposed": [{"name": "cancel_order", "params": {"order_id": "TH-10042"}}],
    }
    assert out["turns"][1]["expect"] == {
        "tool_called": [{"name": "cancel_order", "params": {"order_id": "TH-10042"}}],
        "reply_contains": ["cancelled"],
        "reply_matches": [r"TH-\d{5}"],
        "evaluation": [""],
    }
    assert out["expect"] == {
        "tool_called": [{"name": "cancel_order", "times": 1}],
        "escalated": False,
        "max_cost_usd": "0.01",
    }
    assert out["criteria"] == ["does not promise a refund"]
    assert out["tools"] == {
        "order_status": [{"ok": True, "result": {"status": "shipped"}, "error": ""}],
        "cancel_order": [
            {
                "when": {"order_id": "TH-10042"},
                "ok": True,
                "result": {"cancelled": True},
                "error": "",
            },
            {"ok": False, "result": {}, "error": "order not found"},
        ],
    }
    assert out["simulated"] == {}
    assert out["repeat"] == 3
    assert out["enabled"] is True


def test_normalizing_is_idempotent_and_the_schema_accepts_the_result() -> None:
    once = case_validate(copy.deepcopy(CANCEL))
    assert case_validate(copy.deepcopy(once)) == once
    jsonschema.validate(once, CASE_JSON_SCHEMA)
    jsonschema.Draft202012Validator.check_schema(CASE_JSON_SCHEMA)


def test_defaults_are_filled() -> None:
    out = case_validate({"name": "hello", "turns": [{"customer": "Hi"}]})
    assert out == {
        "name": "hello",
        "suite": "default",
        "description": "",
        "tags": [],
        "history": [],
        "turns": [{"customer": "Hi", "expect": {}}],
        "simulated": {},
        "expect": {},
        "criteria": [],
        "tools": {},
        "repeat": 1,
        "enabled": True,
    }


def test_a_simulated_customer_gets_its_defaults() -> None:
    out = case_validate({"name": "sim", "simulated": {"goal": "Cancel order TH-10042"}})
    assert out["simulated"] == {"persona": "", "goal": "Cancel order TH-10042", "max_turns": 6}
    assert out["turns"] == []


def test_turns_xor_simulated() -> None:
    assert fields({"name": "c"}) == {
        "turns": "A case needs turns (customer messages) or a simulated customer."
    }
    both = {"name": "c", "turns": [{"customer": "hi"}], "simulated": {"goal": "g"}}
    assert fields(both) == {"simulated": "Give either turns or a simulated customer, not both."}
    assert "simulated.goal" in fields({"name": "c", "simulated": {"persona": "p"}})


def test_unknown_expectation_keys_are_refused_with_their_path() -> None:
    errors = fields(with_expect({"tool_caled": "x", "reply_contains": "ok"}))
    assert list(errors) == ["turns[0].expect.tool_caled"]
    assert errors["turns[0].expect.tool_caled"].startswith("Unknown expectation. Known: ")
    assert "tool_called" in errors["turns[0].expect.tool_caled"]
    assert list(fields(with_expect({"replys": "x"}, turn=False))) == ["expect.replys"]


def test_a_tool_spec_is_explained_in_its_own_terms() -> None:
    errors = fields(with_expect({"tool_called": {"name": "x", "parms": {}}}))
    assert errors == {
        "turns[0].expect.tool_called.parms": "Unknown field. Allowed here: name, params, times."
    }
    errors = fields(with_expect({"tool_called": [{"name": "x"}, {"name": "y", "times": -1}]}))
    assert errors == {"turns[0].expect.tool_called[1].times": "At least 0."}
    errors = fields(with_expect({"tool_called": 3}))
    assert errors == {"turns[0].expect.tool_called": "Must be a text or an object or a list."}
    errors = fields(with_expect({"tool_proposed": {"name": "x", "times": 1}}))
    assert errors == {
        "turns[0].expect.tool_proposed.times": "Unknown field. Allowed here: name, params."
    }
    errors = fields(with_expect({"tool_called": "not a name"}))
    assert errors == {"turns[0].expect.tool_called": "'not a name' is not a valid tool name."}


def test_tool_not_called_accepts_a_star() -> None:
    out = case_validate(with_expect({"tool_not_called": "*"}))
    assert out["turns"][0]["expect"] == {"tool_not_called": ["*"]}
    errors = fields(with_expect({"tool_not_called": ["*", 1]}))
    assert errors == {"turns[0].expect.tool_not_called[1]": "Must be a text."}


def test_regexes_are_compiled() -> None:
    errors = fields(with_expect({"reply_matches": ["ok", "(unclosed"]}))
    assert list(errors) == ["turns[0].expect.reply_matches[1]"]
    assert errors["turns[0].expect.reply_matches[1]"].startswith("Not a valid regular expression")
    errors = fields(with_expect({"reply_matches": "[a-"}, turn=False))
    assert list(errors) == ["expect.reply_matches"]


def test_enums_and_numbers() -> None:
    errors = fields(
        with_expect(
            {
                "escalated": {"reason": "bored"},
                "reply_language": "xx",
                "evaluation": "good",
                "max_tokens": "3",
                "max_llm_calls": -1,
                "clarifying_question": "yes",
                "max_cost_usd": "cheap",
            }
        )
    )
    assert set(errors) == {
        "turns[0].expect.escalated.reason",
        "turns[0].expect.reply_language",
        "turns[0].expect.evaluation",
        "turns[0].expect.max_tokens",
        "turns[0].expect.max_llm_calls",
        "turns[0].expect.clarifying_question",
        "turns[0].expect.max_cost_usd",
    }
    assert errors["turns[0].expect.max_tokens"] == "Must be a whole number."
    assert errors["turns[0].expect.max_llm_calls"] == "At least 0."
    assert errors["turns[0].expect.clarifying_question"] == "Must be true or false."
    assert errors["turns[0].expect.max_cost_usd"] == "Not in the expected form."
    out = case_validate(
        with_expect({"escalated": {"reason": "customer_request"}, "max_cost_usd": "0.00200"})
    )
    assert out["turns"][0]["expect"] == {
        "escalated": {"reason": "customer_request"},
        "max_cost_usd": "0.002",
    }


def test_limits() -> None:
    data = {"name": "c", "turns": [{"customer": "hi"}] * 51}
    assert fields(data) == {"turns": "At most 50 items."}
    assert fields({"name": "c", "turns": [{"customer": "x" * 4001}]}) == {
        "turns[0].customer": "At most 4000 characters."
    }
    data = {"name": "c", "turns": [{"customer": "hi"}], "criteria": ["c"] * 21}
    assert fields(data) == {"criteria": "At most 20 items."}
    assert fields({"name": "c", "simulated": {"goal": "g", "max_turns": 21}}) == {
        "simulated.max_turns": "At most 20."
    }
    assert fields({"name": "c", "turns": [{"customer": "hi"}], "repeat": 0}) == {
        "repeat": "At least 1."
    }


def test_blank_texts_and_bad_slugs() -> None:
    errors = fields({"name": "bad name", "suite": "", "turns": [{"customer": "   "}]})
    assert errors == {
        "name": "Letters, digits, hyphens and underscores only.",
        "suite": "Letters, digits, hyphens and underscores only.",
        "turns[0].customer": "Must not be empty.",
    }
    assert fields({"turns": [{"customer": "hi"}]}) == {"name": "This field is required."}
    assert fields({"name": "c", "turns": [{}]}) == {"turns[0].customer": "This field is required."}
    assert fields(["not", "a", "case"]) == {"case": "Must be an object."}
    assert fields({"name": "c", "turns": [{"customer": "hi"}], "extra": 1}) == {
        "extra": "Unknown field. Allowed here: criteria, description, enabled, expect, history, "
        "name, repeat, simulated, suite, tags, tools, turns."
    }


def test_tool_stubs() -> None:
    data = {"name": "c", "turns": [{"customer": "hi"}]}
    assert fields({**data, "tools": {"bad name": {}}}) == {
        "tools.bad name": "'bad name' is not a valid tool name."
    }
    assert fields({**data, "tools": {"x": 3}}) == {"tools.x": "Must be an object or a list."}
    assert fields({**data, "tools": {"x": {"ok": "yes"}}}) == {
        "tools.x.ok": "Must be true or false."
    }
    unreachable = {"x": [{"when": {"a": 1}}, {"ok": True}, {"when": {"b": 2}}]}
    assert fields({**data, "tools": unreachable}) == {
        "tools.x[2]": "Never used: the stub before it has no `when`, so it answers every call."
    }


def test_normalize_expect_directly() -> None:
    assert expect_normalize(None) == {}
    assert expect_normalize(
        {"reply_not_contains": "refund", "tool_proposed": ["cancel_order"], "escalated": True}
    ) == {
        "tool_proposed": [{"name": "cancel_order"}],
        "escalated": True,
        "reply_not_contains": ["refund"],
    }


def test_the_spelled_out_enums_match_the_apps() -> None:
    assert schema.OUTCOMES == OUTCOMES
    assert list(schema.ESCALATION_REASONS) == list(EscalationReason.values)
