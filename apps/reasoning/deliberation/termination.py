"""The dharma seed's termination policy: at least MIN steps, at most MAX, and after MIN stop as
soon as the mean self-score reaches TARGET. One addition, on by default
(`REASONING_DELIBERATION_STOP_STALLED`): after MIN, a loop whose mean cannot reach TARGET by MAX
at the pace it has kept since step 1 stops (`stalled`) — the remaining steps would cost their
tokens without reaching the target. The model's own `final` does not end the loop (the server
controls it); budget, errors and a staff takeover end it from outside (`Termination`).

The same setting also stops, after MIN, a loop that repeats itself: a step whose reasoning says
what the step before it said (character-trigram cosine ≥ `REPEAT_SIMILARITY`, any language) has
converged, and the steps after it would only re-score it (`stalled`, detail `repeated`)."""

from __future__ import annotations

import math
from enum import StrEnum

from apps.reasoning.deliberation.context import grams

REPEAT_SIMILARITY = 0.9


class Termination(StrEnum):
    TARGET_REACHED = "target_reached"
    MAX_STEPS = "max_steps"
    BUDGET = "budget"
    ERROR = "error"
    STAFF_TAKEOVER = "staff_takeover"
    STALLED = "stalled"


def projected(means: list[float], max_steps: int) -> float:
    """The mean at step MAX if the loop keeps the pace it has had since step 1 (a falling pace
    counts as none)."""
    if len(means) < 2:
        return means[-1] if means else 0.0
    pace = max(0.0, (means[-1] - means[0]) / (len(means) - 1))
    return means[-1] + pace * max(0, max_steps - len(means))


def similarity(a: str, b: str) -> float:
    """Cosine similarity (0–1) of two texts' character trigrams (digits alone do not count, so
    "Step 4: …" and "Step 5: …" with the same words are the same)."""
    one, two = grams(a), grams(b)
    dot = sum(n * two[g] for g, n in one.items())
    norms = math.sqrt(sum(n * n for n in one.values())) * math.sqrt(
        sum(n * n for n in two.values())
    )
    return dot / norms if norms else 0.0


def repeats(content: str, previous: str) -> bool:
    """This step's reasoning says what the previous step's said."""
    return similarity(content, previous) >= REPEAT_SIMILARITY


def termination_after(
    *,
    step: int,
    mean: float,
    min_steps: int,
    max_steps: int,
    target: float,
    means: list[float] | None = None,
    repeated: bool = False,
) -> Termination | None:
    """Why the loop ends after step `step` (1-based) with this mean, or None to continue.
    `means` (every step's mean so far, this one last) turns on the stall rule; `repeated` (this
    step repeats the one before it) stops the loop after MIN as well."""
    if step >= min_steps and mean >= target:
        return Termination.TARGET_REACHED
    if step >= max_steps:
        return Termination.MAX_STEPS
    if means and step >= min_steps and projected(means, max_steps) < target:
        return Termination.STALLED
    if repeated and step >= min_steps:
        return Termination.STALLED
    return None
