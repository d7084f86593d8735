"""A simulation's estimate is its expected cost, not a worst case: per mode, the client's own
average tokens a turn over its recent turns (live and simulation, the last 30 days), or the
typical figures when it has too little history — so the README's demo suite, plain and with a
deliberative candidate, fits the default simulation budget and is not refused up front."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.urls import reverse

from apps.accounts.models import Role
from apps.billing import periods
from apps.billing.models import UsagePurpose, UsageRecord
from apps.billing.services.usage import usage_record_create
from apps.reasoning.models import ReasoningTrace
from apps.simulations import services
from apps.simulations.models import SimulationRun
from tests.billing.conftest import Call, make_turn
from tests.conftest import key_for
from tests.simulations.conftest import DEMO_CASES, UNSCOPED, make_case, run_now
from tests.support.shop import assess

pytestmark = pytest.mark.django_db

ESTIMATE = reverse("api-simrun-list") + "estimate"
DEFAULT_SIMULATION_BUDGET = 2_000_000  # Plan.simulation_monthly_tokens' default


@pytest.mark.parametrize("overrides", [{}, {"mode": "deliberative"}], ids=["plain", "deliberative"])
def test_the_readmes_demo_suite_fits_the_default_budget(demo, overrides):
    """`manage.py simulate --suite demo [--mode deliberative]`: baseline and candidate, every
    case of the shipped suite, on a fresh demo tenant — estimated within the default budget
    and admitted."""
    suite = json.loads(DEMO_CASES.read_text(encoding="utf-8"))["tests"]
    estimate = services.simulation_run_estimate(
        client=demo, source="cli", selection={"suite": "demo"}, overrides=overrides
    )
    assert estimate.budget.monthly_tokens == DEFAULT_SIMULATION_BUDGET
    assert estimate.case_runs == 2 * sum(max(1, int(c.get("repeat") or 1)) for c in suite)
    assert estimate.tokens > 0
    assert estimate.fits, estimate.as_dict()
    # No history yet: the typical figures, said so.
    mode = overrides.get("mode") or services.mode_that_runs(demo.plan.ai_mode)
    assert estimate.per_turn[mode].recent == 0
    assert f"{mode}: " in estimate.basis and "typical figures" in estimate.basis
    # The simulated customers' and the judge's calls are part of it.
    assert {"customer", "judge"} <= set(estimate.per_turn)
    run = services.simulation_run_create(
        client=demo,
        source="cli",
        selection={"suite": "demo"},
        overrides=overrides,
        enqueue=False,
    )
    assert run.estimated_tokens == estimate.tokens
    assert run.estimate["basis"] == estimate.basis


def test_an_estimate_from_history_uses_the_history(shop, client_b, webhook):
    make_case(shop, "hours", turns=[{"customer": "When are you open?"}, {"customer": "Thanks"}])
    mode = services.mode_that_runs(shop.plan.ai_mode)
    today = periods.today()
    # 24 recent live turns: 12 of 700 tokens, 12 of 1,100 (two calls each) — 900 on average.
    for index in range(24):
        prompt = 500 if index % 2 else 900
        make_turn(
            shop,
            day=today - timedelta(days=index % 20),
            mode=mode,
            calls=[Call("assess", prompt, 100), Call("reply", 50, 50)],
        )
    # Not counted: a turn older than 30 days, another client's turns, a call outside a turn.
    make_turn(shop, day=today - timedelta(days=45), mode=mode, calls=[Call("assess", 90_000, 0)])
    for _ in range(30):
        make_turn(client_b, day=today, mode=mode, calls=[Call("assess", 50_000, 0)])
    usage_record_create(
        client=shop,
        purpose=UsagePurpose.INSIGHTS,
        mode=mode,
        step="insights",
        model="gpt-4o-mini",
        prompt_tokens=80_000,
        completion_tokens=0,
    )

    estimate = services.simulation_run_estimate(client=shop, selection={})
    assert estimate.per_turn[mode].as_dict() == {"tokens": 900, "basis": "recent", "recent": 24}
    assert estimate.turns == 4  # 2 turns × 2 sides
    assert estimate.tokens == 4 * 900
    assert f"{mode}: 900 tokens a turn, from 24 recent turns" in estimate.basis

    # The API shows the same, with its basis.
    body = key_for(shop, Role.AGENT).post(ESTIMATE, {"selection": {}}, format="json").json()
    assert body["tokens"] == 4 * 900
    assert body["per_turn"][mode] == {"tokens": 900, "basis": "recent", "recent": 24}
    assert "from 24 recent turns" in body["basis"]

    # Another client's estimate knows nothing of this one's history.
    make_case(client_b, "hours", turns=[{"customer": "When are you open?"}])
    other = services.simulation_run_estimate(client=client_b, selection={})
    other_mode = services.mode_that_runs(client_b.plan.ai_mode)
    assert other.per_turn[other_mode].tokens != 900


def test_too_little_history_uses_the_typical_figures(shop):
    make_case(shop, "hours", turns=[{"customer": "When are you open?"}])
    mode = services.mode_that_runs(shop.plan.ai_mode)
    for _ in range(services.MIN_HISTORY - 1):
        make_turn(shop, day=periods.today(), mode=mode, calls=[Call("assess", 40_000, 0)])
    estimate = services.simulation_run_estimate(client=shop, selection={})
    typical = services.TYPICAL_TURN_TOKENS[mode][1 if shop.plan.evaluation_enabled else 0]
    assert estimate.per_turn[mode].as_dict() == {"tokens": typical, "basis": "typical", "recent": 0}
    assert estimate.tokens == 2 * typical


def test_a_simulations_own_turns_count_but_not_its_customer_and_judge(
    shop, llm, webhook, monkeypatch
):
    """A run's sandboxed turns are history for the next estimate, counted per turn (trace);
    the simulated customer's calls are counted apart, per call."""
    llm.default("assess", assess(response="We're open Mon-Fri 9-17.", confidence=9))
    llm.default("simulate_customer", {"message": "When are you open?", "done": False})
    make_case(shop, "hours", turns=[{"customer": "When are you open?"}])
    make_case(shop, "sim", simulated={"persona": "a shopper", "goal": "hours", "max_turns": 1})
    run = run_now(shop)
    assert run.status == "done", run.error
    records = UsageRecord.objects.unscoped(UNSCOPED).filter(
        client=shop, purpose=UsagePurpose.SIMULATION
    )
    customer = [r for r in records if r.step == "simulate_customer"]
    turns = [r for r in records if r.step != "simulate_customer"]
    assert customer and turns
    # Each sandboxed turn has its trace (2 cases × 1 turn × 2 sides); the simulated case's
    # customer has one more, its case run's own.
    traces = ReasoningTrace.objects.unscoped(UNSCOPED).filter(client=shop, case_run__run=run)
    assert traces.count() == 4 + 2
    monkeypatch.setattr(services, "MIN_HISTORY", 1)

    estimate = services.simulation_run_estimate(client=shop, source="cli", selection={})
    mode = services.mode_that_runs(shop.plan.ai_mode)
    tokens = sum(r.prompt_tokens + r.completion_tokens for r in turns)
    assert estimate.per_turn[mode].as_dict() == {
        "tokens": round(tokens / 4),
        "basis": "recent",
        "recent": 4,
    }
    spoke = sum(r.prompt_tokens + r.completion_tokens for r in customer)
    assert estimate.per_turn["customer"].as_dict() == {
        "tokens": round(spoke / len(customer)),
        "basis": "recent",
        "recent": len(customer),
    }
    assert SimulationRun.objects.unscoped(UNSCOPED).count() == 1  # estimating starts nothing
