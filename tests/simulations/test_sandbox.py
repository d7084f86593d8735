"""The sandbox: a multi-turn conversation through the real pipeline and guards, through the real
openai SDK against the scripted server — a destructive tool runs once, only after the customer's
"yes", answered by the case's stub; no webhook is called and nothing customer-facing is
written."""

from __future__ import annotations

import pytest
from django.core import mail

from apps.billing.models import UsagePurpose, UsageRecord
from apps.reasoning.models import ReasoningTrace, TraceKind
from apps.simulations.models import CaseRun, CaseStatus, RunStatus
from tests.simulations.conftest import UNSCOPED, live_rows, make_case, run_now
from tests.support.shop import assess, cancel_assess, critique, lookup_assess

pytestmark = pytest.mark.django_db

CANCEL_TURNS = [
    {
        "customer": "Please cancel order TH-12345",
        "expect": {
            "tool_proposed": {"name": "cancel_order", "params": {"order_id": "TH-12345"}},
            "tool_not_called": "cancel_order",
        },
    },
    {
        "customer": "Yes, cancel it",
        "expect": {"tool_called": {"name": "cancel_order", "params": {"order_id": "TH-12345"}}},
    },
]
ONCE = {"tool_called": {"name": "cancel_order", "times": 1}}
STUBS = {
    "cancel_order": [{"when": {"order_id": "TH-12345"}, "ok": True, "result": {"cancelled": True}}]
}


def script_cancel(llm) -> None:
    # Turn 1: the model proposes the cancel; the guards put it to the customer.
    llm.script("assess", cancel_assess())
    llm.script("critique", critique("PROCEED", reasoning="clear request"))
    # Turn 2: the customer's "yes" confirms those exact params: the stub answers.
    llm.script("assess", cancel_assess(confirmed=True))
    llm.script("critique", critique("PROCEED", reasoning="User explicitly confirmed"))
    llm.script("compose", {"response": "Done! Order TH-12345 has been cancelled."})


def test_cancel_with_confirmation_runs_the_tool_once_after_the_yes(shop, llm, webhook):
    make_case(shop, "cancel-confirmed", turns=CANCEL_TURNS, tools=STUBS, expect=ONCE)
    before = live_rows()
    script_cancel(llm)

    run = run_now(shop, compare=False)

    assert run.status == RunStatus.DONE and run.completed == run.total == 1
    case_run = CaseRun.objects.unscoped(UNSCOPED).get()
    assert case_run.status == CaseStatus.PASSED, case_run.checks
    assert case_run.passed is True and len(case_run.checks) == 4
    assert run.report["sides"]["candidate"]["passed"] == 1
    first, second = case_run.transcript
    assert first["tools_proposed"] == [{"name": "cancel_order", "params": {"order_id": "TH-12345"}}]
    assert first["tools_ran"] == []
    assert first["replies"][0]["kind"] == "confirmation_request"
    assert "TH-12345" in first["reply"] and "yes" in first["reply"].lower()
    assert second["tools_ran"] == [
        {
            "name": "cancel_order",
            "params": {"order_id": "TH-12345"},
            "ok": True,
            "result": {"cancelled": True},
            "error": "",
            "stubbed": True,
        }
    ]
    assert second["reply"] == "Done! Order TH-12345 has been cancelled."
    # The compose step saw the stub's result, through the real compose path.
    assert "cancelled" in llm.calls("compose")[0].prompt_text
    # Nothing reached a customer or a webhook; nothing live was written.
    assert webhook.requests == []
    assert live_rows() == before
    assert mail.outbox == []
    # One trace per turn, kind simulation; the would-run is journalled on the second.
    traces = list(ReasoningTrace.objects.unscoped(UNSCOPED).order_by("pk"))
    assert [t.kind for t in traces] == [TraceKind.SIMULATION] * 2
    assert all(t.case_run_id == case_run.pk for t in traces)
    tool_step = traces[1].steps.get(name="tool")
    assert tool_step.output["sandbox"] is True and tool_step.output["params"] == {
        "order_id": "TH-12345"
    }
    # Every call metered as a simulation.
    records = UsageRecord.objects.unscoped(UNSCOPED)
    assert records.count() == len(llm.calls()) == 5
    assert set(records.values_list("purpose", flat=True)) == {UsagePurpose.SIMULATION}
    # Usage only: a record with a trace would count as a customer turn in billing.
    assert {r.trace_id for r in records} == {None}
    assert case_run.llm_calls == 5


def test_a_destructive_call_is_never_run_in_the_turn_it_is_proposed(shop, llm, webhook):
    make_case(shop, "cancel-once", turns=[{"customer": "Cancel order TH-12345 now, yes!"}])
    llm.script("assess", cancel_assess(confirmed=True, response="Cancelling."))
    llm.script("critique", critique("PROCEED"))
    run = run_now(shop, compare=False)
    [entry] = CaseRun.objects.unscoped(UNSCOPED).get(run=run).transcript
    assert entry["tools_ran"] == []
    assert entry["tools_proposed"] == [{"name": "cancel_order", "params": {"order_id": "TH-12345"}}]


def test_a_yes_for_other_params_does_not_run_the_tool(shop, llm, webhook):
    """The customer confirms TH-12345, the model then tries TH-99999: a new question."""
    make_case(shop, "yes-other-order", turns=CANCEL_TURNS, tools=STUBS)
    llm.script(
        "assess",
        cancel_assess(confirmed=True, response=""),
        cancel_assess("TH-99999", confirmed=True, response=""),
    )
    llm.default("critique", critique("PROCEED"))
    run = run_now(shop, compare=False)
    case_run = CaseRun.objects.unscoped(UNSCOPED).get(run=run)
    assert case_run.status == CaseStatus.FAILED and case_run.passed is False
    [failed] = [c for c in case_run.checks if not c["passed"]]
    assert failed["turn"] == 1 and failed["expect"] == "tool_called"
    first, second = case_run.transcript
    assert first["tools_proposed"][0]["params"] == {"order_id": "TH-12345"}
    assert second["tools_ran"] == []
    assert second["tools_proposed"] == [
        {"name": "cancel_order", "params": {"order_id": "TH-99999"}}
    ]


def test_a_read_tool_without_a_stub_answers_empty_and_says_so(shop, llm, webhook):
    make_case(shop, "status", turns=[{"customer": "Where is TH-12345?"}])
    llm.script("assess", lookup_assess())
    llm.default("critique", critique("PROCEED"))
    llm.script("compose", {"response": "It is on its way."})
    run = run_now(shop, compare=False)
    [entry] = CaseRun.objects.unscoped(UNSCOPED).get(run=run).transcript
    [ran] = entry["tools_ran"]
    assert ran["name"] == "get_order_status" and ran["stubbed"] is False and ran["result"] == {}
    assert webhook.requests == []


def test_asking_for_a_person_escalates_in_the_sandbox_and_the_case_stops(shop, llm, webhook):
    make_case(
        shop,
        "handoff",
        turns=[{"customer": "I want to talk to a human"}, {"customer": "Hello?"}],
    )
    before = live_rows()
    run = run_now(shop, compare=False)
    first, second = CaseRun.objects.unscoped(UNSCOPED).get(run=run).transcript
    assert first["escalated"] is True and first["escalation_reason"] == "customer_request"
    assert first["replies"][-1]["kind"] == "handoff"
    assert second == {"index": 1, "customer": "Hello?", "skipped": "handed off"}
    assert llm.calls() == []
    assert live_rows() == before  # no Escalation row, no hand-off message
    assert mail.outbox == []


def test_a_refused_call_is_in_the_transcript(shop, llm, webhook):
    make_case(shop, "disabled", turns=[{"customer": "What's my gift card balance?"}])
    llm.script(
        "assess",
        assess(
            response="Checking.",
            tool_call="gift_card_balance",
            tool_params={"order_id": "TH-12345"},
        ),
    )
    llm.default("critique", critique("PROCEED"))
    run = run_now(shop, compare=False)
    [entry] = CaseRun.objects.unscoped(UNSCOPED).get(run=run).transcript
    assert entry["tools_ran"] == []
    assert entry["tools_refused"][0]["name"] == "gift_card_balance"
    assert entry["tools_refused"][0]["verdict"] == "refuse"


def test_an_invented_tool_keeps_its_name_in_the_transcript(shop, llm, webhook):
    # Small models invent tools ("track_package"): the transcript says which one was refused.
    make_case(shop, "invented", turns=[{"customer": "Track my parcel"}])
    llm.script(
        "assess",
        assess(response="Tracking.", tool_call="track_package", tool_params={"id": "1"}),
    )
    llm.default("critique", critique("PROCEED"))
    run = run_now(shop, compare=False)
    [entry] = CaseRun.objects.unscoped(UNSCOPED).get(run=run).transcript
    assert entry["tools_ran"] == []
    [refused] = entry["tools_refused"]
    assert refused["name"] == "track_package"
    assert refused["reason"] == "unknown_tool"


def test_an_id_the_simulated_customer_never_gave_is_asked_for(shop, llm, webhook):
    from apps.tools.models import ClientTool

    tool = ClientTool.objects.for_client(shop).get(name="get_order_status")
    tool.parameters["properties"]["order_id"]["x-identifier"] = True
    tool.save(update_fields=["parameters"])
    make_case(
        shop,
        "ungiven",
        turns=[{"customer": "Track my order"}, {"customer": "Sorry, it's th 12345"}],
    )
    call = assess(tool_call="get_order_status", tool_params={"order_id": "TH-12345"})
    llm.script("assess", call)
    llm.script("assess", call)
    llm.default("compose", {"response": "It has shipped."})
    run = run_now(shop, compare=False)
    first, second = CaseRun.objects.unscoped(UNSCOPED).get(run=run).transcript
    assert first["tools_ran"] == [] and first["asked"] is True
    assert first["tools_refused"][0]["reason"] == "ungiven_identifier"
    assert "TH-12345" not in first["reply"]
    assert [ran["name"] for ran in second["tools_ran"]] == ["get_order_status"]
    assert webhook.requests == []
