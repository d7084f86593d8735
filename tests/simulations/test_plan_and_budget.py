"""A simulation stays within the plan and within its own budget: the modes, models and loop
settings the plan allows (or a platform operator granted), no model without a price, its own
monthly token budget (estimated and refused up front, stopped midway), never the live budget,
and a cap on runs in flight per client."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.accounts.models import Role
from apps.billing import periods
from apps.billing.models import UsageCounter, UsagePurpose, UsageRecord
from apps.simulations import services
from apps.simulations.models import RunStatus, SimulationRun
from tests.api.conftest import assert_error
from tests.conftest import key_for
from tests.factories import set_deliberation
from tests.simulations.conftest import UNSCOPED, make_case, run_now
from tests.support.shop import Chat, assess

pytestmark = pytest.mark.django_db

HOURS = assess(response="We're open Mon-Fri 9-17.", confidence=9)
RUNS = reverse("api-simrun-list")
ESTIMATE = RUNS + "estimate"  # POST /api/v1/simulations/runs/estimate


def runs() -> int:
    return SimulationRun.objects.unscoped(UNSCOPED).count()


# ------------------------------------------------------------------- what the plan allows


def test_an_agent_cannot_run_a_mode_the_plan_does_not_include(shop, webhook):
    make_case(shop, "hours", turns=[{"customer": "When are you open?"}])
    agent = key_for(shop, Role.AGENT)  # the shop's plan is adaptive
    body = {"selection": {}, "overrides": {"mode": "deliberative"}}
    error = assert_error(agent.post(RUNS, body, format="json"), 400, "not_in_plan")
    assert "deliberative" in error["message"]
    assert "overrides.mode" in error["fields"]
    assert_error(agent.post(ESTIMATE, body, format="json"), 400, "not_in_plan")
    assert runs() == 0


def test_a_mode_granted_by_a_platform_operator_runs(shop, webhook):
    make_case(shop, "hours", turns=[{"customer": "When are you open?"}])
    shop.playground_modes = ["deliberative"]  # the playground's grant, shared
    shop.save(update_fields=["playground_modes"])
    agent = key_for(shop, Role.AGENT)
    body = {"selection": {}, "overrides": {"mode": "deliberative"}}
    response = agent.post(RUNS, body, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["overrides"] == {"mode": "deliberative"}


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"deliberation_min_steps": 20}, "overrides.deliberation_min_steps"),
        ({"deliberation_max_steps": 20}, "overrides.deliberation_max_steps"),
        ({"refinement_iterations": 5}, "overrides.refinement_iterations"),
    ],
)
def test_loop_settings_are_capped_to_the_plans(shop, webhook, overrides, field):
    make_case(shop, "hours", turns=[{"customer": "When are you open?"}])
    set_deliberation(shop.plan, refinement_iterations=2)
    agent = key_for(shop, Role.AGENT)
    error = assert_error(
        agent.post(RUNS, {"selection": {}, "overrides": overrides}, format="json"),
        400,
        "not_in_plan",
    )
    assert field in error["fields"]
    assert "at most" in error["message"]
    assert runs() == 0


def test_more_refinement_rounds_need_the_operators_grant(shop, webhook):
    make_case(shop, "hours", turns=[{"customer": "When are you open?"}])
    shop.playground_max_iterations = 4
    shop.save(update_fields=["playground_max_iterations"])
    agent = key_for(shop, Role.AGENT)
    ok = {"selection": {}, "overrides": {"refinement_iterations": 4}}
    assert agent.post(RUNS, ok, format="json").status_code == 201
    beyond = {"selection": {}, "overrides": {"refinement_iterations": 5}}
    assert_error(agent.post(RUNS, beyond, format="json"), 400, "not_in_plan")


def test_a_model_without_a_price_is_refused_naming_it(shop, webhook):
    make_case(shop, "hours", turns=[{"customer": "When are you open?"}])
    agent = key_for(shop, Role.AGENT)
    body = {"selection": {}, "overrides": {"model": "gpt-rt-premium-unpriced"}}
    error = assert_error(agent.post(RUNS, body, format="json"), 400)
    assert "gpt-rt-premium-unpriced" in error["message"]
    assert "overrides.model" in error["fields"]
    assert runs() == 0


def test_the_refusal_is_translated(shop, webhook):
    make_case(shop, "hours", turns=[{"customer": "When are you open?"}])
    agent = key_for(shop, Role.AGENT)
    body = {"selection": {}, "overrides": {"mode": "deliberative"}}
    response = agent.post(RUNS, body, format="json", HTTP_ACCEPT_LANGUAGE="de")
    error = assert_error(response, 400, "not_in_plan")
    assert error["message"].startswith("Ihr Tarif erlaubt diese Simulation nicht")
    assert "deliberative" in error["message"]


# ------------------------------------------------------------------- the simulation budget


def test_the_estimate_shows_tokens_dollars_and_the_budget(shop, webhook, settings):
    make_case(shop, "a", turns=[{"customer": "When are you open?"}, {"customer": "Thanks"}])
    make_case(shop, "b", turns=[{"customer": "Do you ship abroad?"}], repeat=2)
    agent = key_for(shop, Role.AGENT)
    response = agent.post(ESTIMATE, {"selection": {}}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    # (2 turns + 2 attempts × 1 turn) × 2 sides, each an adaptive turn's typical tokens (no
    # history yet), never above a turn's reserve
    typical = services.TYPICAL_TURN_TOKENS["adaptive"][1 if shop.plan.evaluation_enabled else 0]
    per_turn = min(typical, settings.BILLING_TURN_TOKEN_RESERVE)
    assert body["case_runs"] == 6
    assert body["turns"] == 8
    assert body["tokens"] == 8 * per_turn
    assert body["per_turn"] == {"adaptive": {"tokens": per_turn, "basis": "typical", "recent": 0}}
    assert body["basis"] == f"adaptive: {per_turn:,} tokens a turn, typical figures"
    # gpt-4o-mini: $0.60 per million output tokens, the dearer price; adaptive bills × 1.5
    assert body["cost_usd"] == f"{8 * per_turn * 0.60 / 1_000_000:.8f}"
    assert float(body["billed_usd"]) >= float(body["cost_usd"]) > 0
    assert body["budget"]["monthly_tokens"] == shop.plan.simulation_monthly_tokens
    assert body["budget"]["used"] == 0
    assert body["fits"] is True
    assert runs() == 0  # nothing started
    started = agent.post(RUNS, {"selection": {}}, format="json").json()
    assert started["estimate"]["tokens"] == body["tokens"]


def test_a_run_beyond_the_simulation_budget_is_refused_up_front(shop, webhook, llm):
    make_case(shop, "hours", turns=[{"customer": "When are you open?"}])
    shop.plan.simulation_monthly_tokens = 1_000  # less than two adaptive turns' estimate
    shop.plan.save(update_fields=["simulation_monthly_tokens"])
    agent = key_for(shop, Role.AGENT)
    error = assert_error(agent.post(RUNS, {"selection": {}}, format="json"), 400)
    assert error["code"] == "simulation_budget"
    assert "1,000" in error["message"]
    assert runs() == 0
    assert llm.calls() == []
    # An operator's grant for this client lifts it.
    shop.simulation_monthly_tokens = 1_000_000
    shop.save(update_fields=["simulation_monthly_tokens"])
    assert agent.post(RUNS, {"selection": {}}, format="json").status_code == 201


def test_runs_in_flight_hold_their_estimate(shop, webhook):
    make_case(shop, "hours", turns=[{"customer": "When are you open?"}])
    each = services.simulation_run_estimate(client=shop, source="cli", selection={}).tokens
    shop.plan.simulation_monthly_tokens = 2 * each + each // 2
    shop.plan.save(update_fields=["simulation_monthly_tokens"])
    # Each run holds its estimate (2 sides × 1 turn); two fit, a third does not.
    for _ in range(2):
        services.simulation_run_create(client=shop, source="cli", selection={}, enqueue=False)
    with pytest.raises(services.ApplicationError) as caught:
        services.simulation_run_create(client=shop, source="cli", selection={}, enqueue=False)
    assert caught.value.code == "simulation_budget"


def test_a_simulation_never_spends_the_live_budget_and_live_turns_still_answer(
    shop, llm, webhook, django_capture_on_commit_callbacks
):
    shop.plan.monthly_token_budget = 50  # the live budget: less than one call's tokens
    shop.plan.save(update_fields=["monthly_token_budget"])
    make_case(shop, "a", turns=[{"customer": "When are you open?"}])
    make_case(shop, "b", turns=[{"customer": "Do you ship abroad?"}])
    llm.default("assess", HOURS)
    run = run_now(shop)
    assert run.status == RunStatus.DONE, run.error
    spent = UsageRecord.objects.unscoped(UNSCOPED).filter(purpose=UsagePurpose.SIMULATION)
    tokens = sum(r.prompt_tokens + r.completion_tokens for r in spent)
    assert tokens > 50  # the simulation spent more than the whole live budget ...
    month = periods.month_start(periods.today())
    live = UsageCounter.objects.unscoped(UNSCOPED).filter(client=shop, month=month).first()
    assert live is None or (live.tokens_used, live.tokens_reserved) == (0, 0)  # ... not from it

    # A customer's turn is still admitted and answered by the assistant.
    chat = Chat.new(shop, django_capture_on_commit_callbacks)
    replies = chat.say("When are you open?")
    assert "We're open Mon-Fri 9-17." in [m.text for m in replies]
    live = UsageCounter.objects.unscoped(UNSCOPED).get(client=shop, month=month)
    assert live.turns_used == 1
    assert live.tokens_used < tokens  # the live turn's own tokens only

    # The simulation's tokens are on its own counter.
    from apps.billing.models import SimulationUsageCounter
    from apps.billing.selectors import simulation_budget_status

    own = SimulationUsageCounter.objects.unscoped(UNSCOPED).get(client=shop, month=month)
    assert own.tokens_used == tokens
    assert simulation_budget_status(client=shop).used == tokens


def test_runs_in_flight_are_capped_per_client(shop, webhook, settings):
    settings.SIMULATION_RUNS_IN_FLIGHT_PER_CLIENT = 2
    make_case(shop, "hours", turns=[{"customer": "When are you open?"}])
    agent = key_for(shop, Role.AGENT)
    for _ in range(2):  # queued on the workers (not run in the test)
        assert agent.post(RUNS, {"selection": {}}, format="json").status_code == 201
    error = assert_error(agent.post(RUNS, {"selection": {}}, format="json"), 429)
    assert error["code"] == "simulations_busy"
    assert "2" in error["message"]
    assert runs() == 2
    # Stopping one frees its place.
    first = SimulationRun.objects.unscoped(UNSCOPED).order_by("pk").first()
    assert first is not None
    services.simulation_run_stop(client=shop, run=first)
    assert agent.post(RUNS, {"selection": {}}, format="json").status_code == 201


def test_another_clients_cases_cannot_be_estimated(shop, client_b, webhook):
    theirs = make_case(client_b, "theirs", turns=[{"customer": "Hi"}])
    agent = key_for(shop, Role.AGENT)
    body = {"selection": {"cases": [str(theirs.public_id)]}}
    assert_error(agent.post(ESTIMATE, body, format="json"), 404)
    owner_b = key_for(client_b, Role.OWNER)
    # B's own estimate knows nothing of A's usage or budget.
    make_case(shop, "mine", turns=[{"customer": "Hi"}])
    services.simulation_run_create(client=shop, source="cli", selection={}, enqueue=False)
    estimate = owner_b.post(ESTIMATE, {"selection": {}}, format="json").json()
    assert estimate["budget"]["held_by_runs_in_flight"] == 0
    assert runs() == 1
