"""The dharma seed's termination policy, exactly: at least MIN steps, at most MAX, and after
MIN stop as soon as the mean self-score reaches TARGET. No convergence detection. The model's
own `final` does not end the loop (the server controls it); budget, errors and a staff
takeover end it from outside (`Termination`)."""

from __future__ import annotations

from enum import StrEnum


class Termination(StrEnum):
    TARGET_REACHED = "target_reached"
    MAX_STEPS = "max_steps"
    BUDGET = "budget"
    ERROR = "error"
    STAFF_TAKEOVER = "staff_takeover"


def termination_after(
    *, step: int, mean: float, min_steps: int, max_steps: int, target: float
) -> Termination | None:
    """Why the loop ends after step `step` (1-based) with this mean, or None to continue."""
    if step >= min_steps and mean >= target:
        return Termination.TARGET_REACHED
    if step >= max_steps:
        return Termination.MAX_STEPS
    return None
