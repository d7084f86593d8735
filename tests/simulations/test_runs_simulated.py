"""The simulated customer and judged criteria: the `simulate_customer` step writes the customer's
messages (through the real SDK, metered as a simulation) until it is done or `max_turns`; the
judge's opinion is kept apart from the code checks."""

from __future__ import annotations

import pytest

from apps.billing.models import UsagePurpose, UsageRecord
from apps.simulations.models import CaseRun, RunStatus
from tests.simulations.conftest import UNSCOPED, live_rows, make_case, run_now
from tests.support.shop import assess, cancel_assess, critique

pytestmark = pytest.mark.django_db

CANCEL = cancel_assess(needs_confirmation=False, response="I can cancel it.")


def test_a_simulated_customer_confirms_and_the_tool_runs_once(shop, llm, webhook):
    make_case(
        shop,
        "sim-cancel",
        simulated={"persona": "A busy hiker", "goal": "Cancel order TH-12345", "max_turns": 5},
        tools={"cancel_order": {"ok": True, "result": {"cancelled": True}}},
        criteria=["confirms the cancellation"],
    )
    before = live_rows()
    llm.script(
        "simulate_customer",
        {"message": "Please cancel order TH-12345", "done": False},
        {"message": "Yes, cancel it", "done": False},
        {"message": "", "done": True},
    )
    llm.script("assess", CANCEL, CANCEL)
    llm.default("critique", critique("PROCEED"))
    llm.script("compose", {"response": "Order TH-12345 is cancelled."})
    llm.script(
        "judge",
        {
            "results": [
                {
                    "criterion": "confirms the cancellation",
                    "passed": True,
                    "score": 95,
                    "reasoning": "It says the order is cancelled.",
                }
            ]
        },
    )
    run = run_now(shop, compare=False)
    assert run.status == RunStatus.DONE, run.error
    case_run = CaseRun.objects.unscoped(UNSCOPED).get(run=run)
    first, second = case_run.transcript
    assert first["customer"] == "Please cancel order TH-12345" and first["tools_ran"] == []
    assert first["tools_proposed"][0]["name"] == "cancel_order"
    assert [t["name"] for t in second["tools_ran"]] == ["cancel_order"]
    assert second["reply"] == "Order TH-12345 is cancelled."
    # The simulated customer saw the assistant's replies as data.
    assert "Order TH-12345 is cancelled." in llm.calls("simulate_customer")[2].prompt_text
    assert case_run.judged_passed is True and case_run.judged[0]["score"] == 95
    assert webhook.requests == [] and live_rows() == before
    purposes = set(UsageRecord.objects.unscoped(UNSCOPED).values_list("purpose", flat=True))
    assert purposes == {UsagePurpose.SIMULATION}
    assert case_run.llm_calls == len(llm.calls())


def test_max_turns_ends_a_customer_who_never_stops(shop, llm, webhook):
    make_case(shop, "chatty", simulated={"persona": "p", "goal": "chat", "max_turns": 2})
    llm.default("simulate_customer", {"message": "And another thing...", "done": False})
    llm.default("assess", assess(response="Sure.", confidence=9))
    run = run_now(shop, compare=False)
    case_run = CaseRun.objects.unscoped(UNSCOPED).get(run=run)
    assert len(case_run.transcript) == 2
    assert len(llm.calls("simulate_customer")) == 2


def test_the_offline_demo_customer_plays_a_cancel(db, settings):
    from tests.support.shop import make_shop

    settings.OPENAI_API_KEY = ""
    shop = make_shop("adaptive", "http://127.0.0.1:9/hook", slug="offline-shop")
    make_case(
        shop,
        "offline-cancel",
        simulated={"persona": "p", "goal": "Please cancel order TH-12345", "max_turns": 4},
        tools={"cancel_order": {"ok": True, "result": {"cancelled": True}}},
    )
    run = run_now(shop, compare=False)
    case_run = CaseRun.objects.unscoped(UNSCOPED).get(run=run)
    assert run.status == RunStatus.DONE, run.error
    first, second = case_run.transcript
    assert first["customer"] == "Please cancel order TH-12345"
    assert first["tools_proposed"] == [{"name": "cancel_order", "params": {"order_id": "TH-12345"}}]
    assert first["tools_ran"] == []
    assert second["customer"] == "Yes, please."  # the demo customer confirms
    assert [t["name"] for t in second["tools_ran"]] == ["cancel_order"]
