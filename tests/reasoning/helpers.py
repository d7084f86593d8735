"""Helpers shared by the tests of tests/reasoning."""

from __future__ import annotations

from typing import Any

from apps.billing.models import UsagePurpose
from apps.conversations.models import Conversation
from apps.reasoning.meter import Meter
from apps.reasoning.models import ReasoningTrace, TraceKind
from apps.reasoning.traces import TurnRecorder
from apps.simulations.models import CaseRun, SimulationRun
from apps.tools.pending import OpenQuestion
from devtools.fake_llm import FakeLLMServer
from tests.support.fake_webhook import FakeWebhookServer, Reply
from tests.support.shop import SilentOwner, critique


def simulation_recorder(client: Any, mode: str) -> TurnRecorder:
    """A simulated turn's recorder for `client`, as the simulation engine builds one: a new trace
    of kind `simulation` on a candidate case run, its calls metered with purpose `simulation`."""
    run = SimulationRun.objects.create(client=client)
    case_run = CaseRun.objects.create(client=client, run=run, case_name="c", side="candidate")
    trace = ReasoningTrace.objects.create(
        client=client, kind=TraceKind.SIMULATION, case_run=case_run, mode=mode
    )
    meter = Meter(client=client, mode=mode, purpose=UsagePurpose.SIMULATION, trace=trace)
    return TurnRecorder(
        trace=trace,
        client=client,
        conversation=Conversation(client=client),
        next_index=0,
        owner=SilentOwner(),  # the simulation engine has its own
        meter=meter,
    )


def script_tool_run(
    llm: FakeLLMServer, webhook: FakeWebhookServer, plan: dict[str, Any], result: Any, reply: str
) -> None:
    """A turn that runs a tool: the model's `plan` (an ``assess`` reply), a critique that says
    PROCEED, the shop's webhook answering `result`, and `reply` composed from it."""
    llm.script("assess", plan)
    llm.script("critique", critique("PROCEED"))
    webhook.script(Reply.ok(result))
    llm.script("compose", {"response": reply})


# The (state, iteration) of each step of a refinement of three iterations, in event order.
THREE_REFINEMENT_STATES = [
    ("draft", 0),
    ("critique", 1),
    ("final_spec", 1),
    ("critique", 2),
    ("final_spec", 2),
    ("critique", 3),
    ("final_spec", 3),
]


def open_question_on(params: dict[str, Any], **facts: Any) -> OpenQuestion:
    """The open confirmation question of an action on `params`, as the customer's first reply
    finds it: shown before, not expired, no other action confirmed; `facts` replace any of it."""
    base: dict[str, Any] = {
        "params": params,
        "shown_before": True,
        "expired": False,
        "first_reply": True,
        "another_confirmed": False,
    }
    return OpenQuestion(**(base | facts))
