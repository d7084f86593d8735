"""What a client's staff may run outside live turns — a playground run, a simulation — as a
platform operator granted it: the plan's mode and the cheaper ones (the registry's
`cost_rank`), plus the modes granted on the client (`Client.playground_modes`); the plan's
refinement rounds unless the operator granted more (`Client.playground_max_iterations`).

One place for both surfaces (the playground and simulations are sibling apps and may not
import each other)."""

from __future__ import annotations

from apps.clients import modes
from apps.clients.deliberation import deliberation_settings
from apps.clients.models import Client
from apps.reasoning.modes import mode_that_runs

__all__ = ["allowed_modes", "allowed_refinement_rounds"]


def allowed_modes(*, client: Client) -> list[str]:
    """The plan's mode and the cheaper ones, plus what a platform operator granted the
    client; cheapest first."""
    plan_mode = mode_that_runs(client.plan.ai_mode)
    most = modes.get(plan_mode).cost_rank
    granted = set(client.playground_modes or [])
    return [m.name for m in modes.modes() if m.cost_rank <= most or m.name in granted]


def allowed_refinement_rounds(*, client: Client, ceiling: int) -> int:
    """The most refinement rounds a run may ask for: the plan's, unless granted more; never
    above `ceiling` (the surface's own hard limit)."""
    if client.playground_max_iterations is not None:
        return min(int(client.playground_max_iterations), ceiling)
    return min(deliberation_settings(client.plan).refinement_iterations, ceiling)
