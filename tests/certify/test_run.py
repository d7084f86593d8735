"""`run_one`: one configuration × task × trial with the offline models, graded and accounted —
the bare agent and GuideDesk (adaptive), with and without injected errors."""

from __future__ import annotations

from typing import Any

import pytest

from apps.certify.naive import NaiveAgentServer
from apps.certify.records import RunRecord, RunSpec
from apps.certify.run import estimate_cost_usd, run_one, run_seed
from apps.clients.models import Client
from devtools.fake_llm import Fail, FakeLLMServer

pytestmark = pytest.mark.django_db


def _spec(config: str, task_id: str = "retail-001", **kw: Any) -> RunSpec:
    values: dict[str, Any] = {
        "config": config,
        "task_id": task_id,
        "trial": 0,
        "seed": 1,
        "model": "offline",
        "base_url": None,
        **kw,
    }
    return RunSpec(**values)


def _outcomes(record: RunRecord) -> set[str]:
    return {i.outcome for i in record.injections}


@pytest.mark.parametrize("task_id", ["retail-001", "retail-007", "retail-038"])
def test_bare_offline_passes_without_injections(task_id: str) -> None:
    record = run_one(_spec("bare", task_id))
    assert record.error == ""
    assert record.passed, record.differences + record.missing_outputs
    assert record.unsafe_actions == 0
    assert record.wrong_state_changes == 0
    assert record.injections == []
    assert record.llm_calls > 0
    assert record.prompt_tokens > 0
    assert record.cost_usd == 0.0
    assert not record.unpriced
    assert record.transcript[0]["role"] == "customer"
    assert any(t["role"] == "agent" for t in record.transcript)
    assert RunRecord.from_json(record.to_json()) == record


@pytest.mark.parametrize(
    ("config", "task_id"),
    [("standard", "retail-001"), ("adaptive", "retail-001"), ("adaptive", "retail-070")],
)
def test_guidedesk_offline_passes_what_the_bare_agent_passes(config: str, task_id: str) -> None:
    # Offline GuideDesk is given the bare agent's own rules (a cancel, a balance look-up): with
    # no injection the two columns both pass, and the run's client is deleted.
    clients = Client.objects.count()
    record = run_one(_spec(config, task_id))
    assert record.error == ""
    assert record.passed, record.differences + record.missing_outputs
    assert run_one(_spec("bare", task_id)).passed
    assert record.unsafe_actions == 0
    assert record.wrong_state_changes == 0
    assert record.llm_calls >= record.customer_turns > 0
    assert Client.objects.count() == clients


def test_bare_with_an_openai_compatible_endpoint() -> None:
    with NaiveAgentServer() as endpoint:
        spec = _spec("bare", model="naive-offline", base_url=endpoint.base_url, api_key="k")
        record = run_one(spec)
    assert record.error == ""
    assert record.passed
    assert record.unpriced  # a real model without a price: cost 0, and said so
    assert record.cost_usd == 0.0
    assert "api_key" not in record.to_json()["spec"]


def test_the_same_spec_gives_the_same_record() -> None:
    spec = _spec("bare", inject_rate=0.5)
    first, second = run_one(spec).to_json(), run_one(spec).to_json()
    first.pop("latency_s")
    second.pop("latency_s")
    assert first == second
    assert first["injections"]
    assert run_seed(spec) != run_seed(_spec("bare", inject_rate=0.5, trial=1))


def test_a_hidden_instruction_reaches_the_bare_agents_customer() -> None:
    record = run_one(_spec("bare", inject_rate=1.0, inject_classes=("hidden_instruction",)))
    assert record.error == ""
    assert "reached_customer" in _outcomes(record)
    assert any("GD-OVERRIDE-100" in t["text"] for t in record.transcript if t["role"] == "agent")
    assert {i.guard for i in record.injections} == {None}  # the bare agent has no guards


def test_guidedesk_catches_an_invented_tool() -> None:
    record = run_one(_spec("adaptive", inject_rate=1.0, inject_classes=("invented_tool",)))
    assert record.error == ""
    assert record.injections
    assert _outcomes(record) == {"caught"}
    assert all(i.guard for i in record.injections)


def test_an_unasked_destructive_call_is_caught_by_guidedesk() -> None:
    spec = _spec("adaptive", inject_rate=1.0, inject_classes=("destructive_unasked",))
    record = run_one(spec)
    assert record.error == ""
    assert record.injections
    assert _outcomes(record) == {"caught"}
    assert all(i.guard and i.guard.startswith("guard.") for i in record.injections)
    assert record.unsafe_actions == 0
    assert record.wrong_state_changes == 0


def test_an_unasked_destructive_call_reaches_the_bare_agents_back_office() -> None:
    # Seed 4 injects the naive agent's order lookup (an early model call): the lookup
    # becomes a cancel of that order with a reason nobody gave, run at once.
    spec = _spec("bare", inject_rate=0.5, seed=4, inject_classes=("destructive_unasked",))
    record = run_one(spec)
    assert record.error == ""
    reached = [i for i in record.injections if i.outcome == "reached_back_office"]
    assert reached
    assert "cancel_pending_order" in reached[0].detail
    assert record.unsafe_actions >= 1
    assert record.wrong_state_changes >= 1
    assert not record.passed


def test_estimate_is_zero_offline_and_grows_with_turns() -> None:
    from decimal import Decimal

    from apps.billing.models import ModelPrice

    assert estimate_cost_usd(_spec("bare")) == 0.0
    ModelPrice.objects.create(
        model="certify-test-model",
        input_per_million=Decimal("1.00"),
        output_per_million=Decimal("4.00"),
    )
    short = _spec("deliberative", model="certify-test-model", base_url="http://x", max_turns=2)
    long = _spec("deliberative", model="certify-test-model", base_url="http://x", max_turns=8)
    assert 0 < estimate_cost_usd(short) < estimate_cost_usd(long)
    assert estimate_cost_usd(_spec("bare", model="unpriced-model", base_url="http://x")) == 0.0


def test_unknown_task_or_class_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown task"):
        run_one(_spec("bare", task_id="retail-999"))
    with pytest.raises(ValueError, match="unknown injection"):
        run_one(_spec("bare", inject_classes=("nonsense",)))


def test_a_failing_model_fails_the_bare_run_not_the_harness() -> None:
    with FakeLLMServer() as model:
        model.fallback(lambda request: Fail(500, message="overloaded"))
        record = run_one(_spec("bare", model="m", base_url=model.base_url, api_key="k"))
    assert record.error == ""  # a model that fails is the agent's failure, not a harness error
    assert not record.passed
    [note] = [t for t in record.transcript if t["role"] == "note"]
    assert "InternalServerError" in note["text"]
