"""One turn driver (`apps.reasoning.run.run_turn`): a failure inside a mode run is recorded the
same way by a live turn, a playground run and a simulated turn — one exception ladder, not three.

The failing mode is a mode of the test's own, registered in the mode registry (the extension
point every mode uses); the LLM failure is also driven through the scripted OpenAI-compatible
server."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import pytest

from apps.billing.services.budgets import UsageLimitReached
from apps.clients import modes
from apps.core.deadlines import DeadlineExceeded
from apps.core.tenancy import tenant_scope
from apps.escalations.models import EscalationReason
from apps.playground.models import RunSource, RunStatus
from apps.playground.services import playground_run_create, playground_run_execute
from apps.reasoning.llm import LLMError
from apps.reasoning.meter import TokenCapExceeded
from apps.reasoning.models import ReasoningTrace, TraceKind
from apps.reasoning.modes import standard
from apps.reasoning.traces import TurnAborted
from apps.reasoning.turn import Escalate
from apps.simulations.models import SimCase, SimulationRun
from apps.simulations.services import simulation_run_create, simulation_run_execute
from devtools.fake_llm import Fail

pytestmark = pytest.mark.django_db
UNSCOPED = "test checks the database directly"
QUESTION = "Where is my parcel?"

FAILURES: dict[str, Callable[[], Exception]] = {
    "escalate": lambda: Escalate(EscalationReason.POLICY, "the mode asked for a person"),
    "token_cap": lambda: TokenCapExceeded("assess", "the call needs 900 tokens, 100 are left"),
    "usage_limit": lambda: UsageLimitReached("tokens", "1,000 of 1,000 tokens used"),
    "deadline": DeadlineExceeded,
    "llm": lambda: LLMError(kind="server_error", step="assess", message="HTTP 500"),
    "internal": lambda: RuntimeError("a bug in the mode"),
}


@pytest.fixture
def failing_mode(shop: Any) -> Iterator[list[Callable[[], Exception]]]:
    """The shop's plan runs `failing`, a mode that raises what the test puts in the list."""
    raises: list[Callable[[], Exception]] = []

    def run(turn: Any) -> Any:
        raise raises[0]()

    modes.register(
        dataclasses.replace(  # standard's declarations (no streaming matters here: it raises)
            standard.MODE,
            name="failing",
            label="Failing — a mode defined in a test",
            summary="Raises the failure the test chose.",
            steps=("respond",),
            default_multiplier=Decimal("1"),
            cost_rank=0,
            message_kinds=(),
            run=run,
        )
    )
    shop.plan.ai_mode = "failing"
    shop.plan.save()
    yield raises
    modes.unregister("failing")


def recorded(trace: ReasoningTrace) -> dict[str, Any]:
    """What a trace records of how its turn ended."""
    escalate = trace.steps.filter(name="escalate").values_list("output", flat=True).first()
    return {
        "status": trace.status,
        "error": trace.error,
        "escalated": trace.escalated,
        "escalate": (escalate["reason"], escalate["detail"]) if escalate else None,
        "steps": sorted(
            trace.steps.exclude(name="escalate")
            .exclude(name__startswith="assess")
            .values_list("name", flat=True)
        ),
    }


def live_turn(chat: Any) -> dict[str, Any]:
    chat.say(QUESTION)
    return recorded(ReasoningTrace.objects.unscoped(UNSCOPED).get(kind=TraceKind.TURN))


def playground_run(shop: Any, mode: str) -> tuple[dict[str, Any], str]:
    run = playground_run_create(
        client=shop, question=QUESTION, mode=mode, source=RunSource.CLI, enqueue=False
    )
    with tenant_scope(shop.pk):
        playground_run_execute(run_id=run.pk)
    run.refresh_from_db()
    return recorded(run.trace), run.status


def simulated_turn(shop: Any) -> dict[str, Any]:
    SimCase.objects.create(client=shop, name="one-turn", turns=[{"customer": QUESTION}])
    run = simulation_run_create(
        client=shop, source="cli", selection={}, compare=False, enqueue=False
    )
    with tenant_scope(shop.pk):
        simulation_run_execute(run_id=run.pk)
    assert SimulationRun.objects.unscoped(UNSCOPED).filter(pk=run.pk).exists()
    return recorded(ReasoningTrace.objects.unscoped(UNSCOPED).get(kind=TraceKind.SIMULATION))


@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_each_failure_kind_is_recorded_alike_by_every_driver(
    failure: str, shop: Any, chat: Any, llm: Any, failing_mode: list[Any]
) -> None:
    failing_mode.append(FAILURES[failure])

    live = live_turn(chat)
    playground, run_status = playground_run(shop, "failing")
    simulated = simulated_turn(shop)

    assert live == playground == simulated
    assert live["status"] == "done" and live["escalated"] and live["escalate"] is not None
    # A failure (not a step asking for a person) says what failed, for staff; the run fails.
    assert bool(live["error"]) == (failure != "escalate")
    assert run_status == (RunStatus.DONE if failure == "escalate" else RunStatus.FAILED)


def test_an_llm_failure_from_the_scripted_server_is_recorded_alike(
    standard_shop: Any, llm: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from apps.conversations.services import conversation_create
    from tests.support.shop import Chat

    for _ in range(3):  # the live turn, the playground run, the simulated turn: twice each
        llm.script("respond", Fail(500), Fail(500))
    conversation = conversation_create(client=standard_shop)[0]
    live = live_turn(Chat(standard_shop, conversation, django_capture_on_commit_callbacks))
    playground, run_status = playground_run(standard_shop, "standard")
    simulated = simulated_turn(standard_shop)

    assert live == playground == simulated
    assert live["escalate"][0] == EscalationReason.LLM_FAILURE
    assert live["error"].startswith("respond failed (")
    assert run_status == RunStatus.FAILED


def test_a_stopped_turn_is_skipped_live_and_stopped_elsewhere(
    shop: Any, chat: Any, llm: Any, failing_mode: list[Any]
) -> None:
    """The owner's stop: for a live turn a takeover (its conversation is a person's now), for
    a playground run and a simulation the stop button."""
    failing_mode.append(TurnAborted)

    live = live_turn(chat)
    playground, run_status = playground_run(shop, "failing")
    simulated = simulated_turn(shop)

    assert live["status"] == "skipped" and not live["escalated"] and live["error"] == ""
    assert playground == simulated == {**live, "status": "stopped"}
    assert run_status == RunStatus.STOPPED
