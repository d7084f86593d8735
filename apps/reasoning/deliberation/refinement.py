"""Iterative refinement (seed: iterative-refinement), in plain Python.

The states — `Draft`, `Critique`, `FinalSpec` — are immutable values; a refinement is an
append-only tuple of them (`Events`), and each state is also journalled, in order, as a
`refinement` step of the turn's trace. Every critique and every improvement works on
`most_recent_reasoning_state()` — the latest Draft or FinalSpec — so iteration 2 builds on
iteration 1's improvement, never on the original draft.

Failures are values (`Ok` / `Failure`), not exceptions: critiquing with nothing to critique
returns `Failure("no draft to critique")`, a failed or refused LLM call returns a `Failure`
naming it, and `refine` stops there and keeps the best version it has.

Beyond the seed (Self-Refine's findings): each critique scores the version it reads (0–100);
refinement stops early when a score reaches the plan's threshold, and the answer is the
best-scoring version, not blindly the last. The last improvement cannot have a score without an
extra call (calls stay at most 1 + 2N, as the seed counts): it is kept when it improves the
best-scoring version, and when the last critique showed the improvements going downhill (its
version scored below an earlier one) it is not asked for at all — it would be dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from apps.billing.services.budgets import UsageLimitReached
from apps.core.deadlines import DeadlineExceeded
from apps.reasoning.llm import LLMError
from apps.reasoning.meter import TokenCapExceeded

# -- states -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Draft:
    text: str
    iteration: int = 0
    kind: str = field(default="draft", init=False)


@dataclass(frozen=True)
class Critique:
    text: str  # the critique
    score: int
    issues: tuple[dict[str, Any], ...]
    iteration: int
    of_iteration: int  # the version it read (0 = the draft)
    kind: str = field(default="critique", init=False)


@dataclass(frozen=True)
class FinalSpec:
    text: str
    iteration: int
    kind: str = field(default="final_spec", init=False)


type ReasoningState = Draft | Critique | FinalSpec
type Events = tuple[ReasoningState, ...]


def most_recent_reasoning_state(events: Events) -> Draft | FinalSpec | None:
    """The latest Draft or FinalSpec (a Critique is not something to critique); None when
    there is none."""
    for state in reversed(events):
        if isinstance(state, Draft | FinalSpec):
            return state
    return None


def latest_critique(events: Events) -> Critique | None:
    for state in reversed(events):
        if isinstance(state, Critique):
            return state
    return None


# -- results ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ok:
    events: Events


@dataclass(frozen=True)
class Failure:
    message: str
    budget: bool = False  # a cap, the monthly budget or the deadline refused the call
    stage: str = "critique"  # the state that could not be made: "critique" or "final_spec"


type Result = Ok | Failure


@dataclass(frozen=True)
class Verdict:
    """What a critic returns for one version."""

    score: int
    issues: list[dict[str, Any]]
    critique: str


type Critic = Callable[[Draft | FinalSpec, int], Verdict]
type Improver = Callable[[Draft | FinalSpec, Critique, int], str]

_BUDGET = (TokenCapExceeded, UsageLimitReached, DeadlineExceeded)
_EXPECTED = (LLMError, *_BUDGET)


def _failure(what: str, exc: Exception, stage: str) -> Failure:
    detail = getattr(exc, "detail", "") or getattr(exc, "message", "") or str(exc)
    return Failure(
        f"{what} failed: {detail or type(exc).__name__}",
        budget=isinstance(exc, _BUDGET),
        stage=stage,
    )


def critique_step(events: Events, *, iteration: int, critic: Critic) -> Result:
    """Critique the most recent Draft or FinalSpec."""
    current = most_recent_reasoning_state(events)
    if current is None:
        return Failure("no draft to critique")
    try:
        verdict = critic(current, iteration)
    except _EXPECTED as exc:
        return _failure("critique", exc, "critique")
    critique = Critique(
        text=verdict.critique,
        score=verdict.score,
        issues=tuple(verdict.issues),
        iteration=iteration,
        of_iteration=current.iteration,
    )
    return Ok((*events, critique))


def improve_step(events: Events, *, iteration: int, improver: Improver) -> Result:
    """Improve the most recent Draft or FinalSpec with the latest critique of it."""
    current = most_recent_reasoning_state(events)
    if current is None:
        return Failure("no draft to improve", stage="final_spec")
    critique = latest_critique(events)
    if critique is None or critique.of_iteration != current.iteration:
        return Failure("no critique of the latest version to act on", stage="final_spec")
    try:
        text = improver(current, critique, iteration)
    except _EXPECTED as exc:
        return _failure("improvement", exc, "final_spec")
    if not text.strip():
        return Failure("the improvement came back empty", stage="final_spec")
    return Ok((*events, FinalSpec(text=text, iteration=iteration)))


# -- the loop -----------------------------------------------------------------------------------


@dataclass
class Refined:
    events: Events
    text: str
    best_iteration: int
    best_score: int | None
    failure: Failure | None = None
    stopped_early: bool = False


def best_version(events: Events) -> tuple[Draft | FinalSpec, int | None]:
    """The version to send: the best-scoring one; the last improvement (never scored) when it
    improves the best-scoring version (ties go to the later version)."""
    versions = {s.iteration: s for s in events if isinstance(s, Draft | FinalSpec)}
    scores = {c.of_iteration: c.score for c in events if isinstance(c, Critique)}
    if not versions:
        raise ValueError("no draft")
    if not scores:
        last = max(versions)
        return versions[last], None
    best = max(scores, key=lambda it: (scores[it], it))
    last = max(versions)
    if last not in scores and last - 1 == best:
        return versions[last], scores[best]
    return versions[best], scores[best]


def improvement_sent(events: Events, iteration: int) -> bool:
    """Whether the improvement `iteration` about to be made of the most recent version is the
    version sent when nothing follows it (the loop's last iteration): `best_version` keeps an
    unscored last improvement only when it improves the best-scoring version. Known before the
    improve call, so that call's reply may be shown while it is written."""
    if most_recent_reasoning_state(events) is None:
        return False
    chosen, _ = best_version((*events, FinalSpec(text="", iteration=iteration)))
    return chosen.iteration == iteration


def _worse_than_best(events: Events, critique: Critique) -> bool:
    """The version `critique` read scored below an earlier version."""
    earlier = [c.score for c in events if isinstance(c, Critique) and c is not critique]
    return bool(earlier) and critique.score < max(earlier)


def refine(
    draft: str,
    *,
    iterations: int,
    stop_score: int,
    critic: Critic,
    improver: Improver,
    on_event: Callable[[ReasoningState | Failure, int], None] = lambda state, it: None,
    final_improver: Improver | None = None,
) -> Refined:
    """Draft, then `iterations` × (critique → improve), each on the most recent version.
    LLM calls: 2 per iteration (the draft's call is the caller's); an early stop saves the
    improve call of its iteration and everything after it. `final_improver` (if given) makes
    the last improvement when it is sure to be the version sent (`improvement_sent`): the
    caller may show that one to the customer while it is written."""
    events: Events = (Draft(text=draft),)
    on_event(events[0], 0)
    failure: Failure | None = None
    stopped_early = False
    for iteration in range(1, iterations + 1):
        result = critique_step(events, iteration=iteration, critic=critic)
        if isinstance(result, Failure):
            failure = result
            on_event(result, iteration)
            break
        events = result.events
        on_event(events[-1], iteration)
        critique = events[-1]
        assert isinstance(critique, Critique)
        if critique.score >= stop_score:
            stopped_early = True
            break
        if iteration == iterations and _worse_than_best(events, critique):
            # The last improvement is never scored: `best_version` would drop one built on a
            # version that scored below an earlier one, so it is not asked for.
            break
        rewrite = improver
        if (
            final_improver is not None
            and iteration == iterations
            and improvement_sent(events, iteration)
        ):
            rewrite = final_improver
        result = improve_step(events, iteration=iteration, improver=rewrite)
        if isinstance(result, Failure):
            failure = result
            on_event(result, iteration)
            break
        events = result.events
        on_event(events[-1], iteration)
    chosen, score = best_version(events)
    return Refined(
        events=events,
        text=chosen.text,
        best_iteration=chosen.iteration,
        best_score=score,
        failure=failure,
        stopped_early=stopped_early,
    )
