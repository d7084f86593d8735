"""Simulations' own monthly token budget (docs/simulations.md "Budget").

A simulation's LLM calls are metered with purpose `simulation` (`apps.reasoning.meter`) and
counted on the client's `SimulationUsageCounter`, never on the live `UsageCounter`: however
much a simulation spends, customers' turns keep their budget. The budget is the client's
`simulation_monthly_tokens` when a platform operator set one, else its plan's (0 = no limit).

Before each call the meter checks the counter (`simulation_budget_check`) and after it adds
the call's tokens (`simulation_budget_add`); a run is refused up front when its estimate does
not fit (`apps.simulations.services.simulation_run_estimate`)."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from apps.billing import periods
from apps.billing.models import SimulationUsageCounter
from apps.billing.selectors import simulation_month_tokens, simulation_token_budget
from apps.billing.services.budgets import UsageLimitReached
from apps.clients.models import Client

__all__ = [
    "SIMULATION_TOKENS",
    "SimulationBudgetReached",
    "simulation_budget_add",
    "simulation_budget_check",
]

SIMULATION_TOKENS = "simulation_tokens"


class SimulationBudgetReached(UsageLimitReached):
    """The client's simulation budget for the month is used up: the call is not made (the
    live budget is not involved)."""


def _locked_counter(*, client: Client, month: Any) -> SimulationUsageCounter:
    """This month's simulation counter, locked until the caller's transaction ends; created on
    first use from the month's simulation usage records so far."""
    counter = (
        SimulationUsageCounter.objects.select_for_update()
        .filter(client=client, month=month)
        .first()
    )
    if counter is not None:
        return counter
    try:
        with transaction.atomic():
            SimulationUsageCounter.objects.create(
                client=client,
                month=month,
                tokens_used=simulation_month_tokens(client=client, month=month),
            )
    except IntegrityError:
        pass  # another worker created it first; lock theirs
    return SimulationUsageCounter.objects.select_for_update().get(client=client, month=month)


def simulation_budget_check(*, client: Client) -> None:
    """Admit one simulation call, or raise `SimulationBudgetReached` when the month's
    simulation tokens are used up."""
    budget = simulation_token_budget(client=client)
    if not budget:
        return
    month = periods.month_start(periods.today())
    with transaction.atomic():
        counter = _locked_counter(client=client, month=month)
        used = counter.tokens_used
    if used >= budget:
        raise SimulationBudgetReached(
            SIMULATION_TOKENS,
            f"the simulation budget of {budget:,} tokens this month is used up ({used:,} used)",
        )


def simulation_budget_add(*, client: Client, tokens: int) -> None:
    """Count one simulation call's tokens on the month's simulation counter."""
    if tokens <= 0:
        return
    month = periods.month_start(periods.today())
    with transaction.atomic():
        counter = _locked_counter(client=client, month=month)
        counter.tokens_used += tokens
        counter.save(update_fields=["tokens_used", "updated_at"])
