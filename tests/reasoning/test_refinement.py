"""Iterative refinement as the seed tests it (its six cases), plus best-version selection and
the early stop — on the plain-Python states, no model involved."""

from __future__ import annotations

from typing import Any

import pytest

from apps.reasoning.deliberation.refinement import (
    Critique,
    Draft,
    Failure,
    FinalSpec,
    Ok,
    Verdict,
    best_version,
    critique_step,
    improve_step,
    most_recent_reasoning_state,
    refine,
)
from apps.reasoning.deliberation.termination import Termination, termination_after
from apps.reasoning.meter import TokenCapExceeded
from tests.reasoning.helpers import THREE_REFINEMENT_STATES


class Recorder:
    """A critic and an improver that remember what they were given."""

    def __init__(self, scores: list[int] | None = None) -> None:
        self.critiqued: list[str] = []
        self.improved: list[tuple[str, str]] = []
        self.scores = list(scores or [])

    def critic(self, state: Draft | FinalSpec, iteration: int) -> Verdict:
        self.critiqued.append(state.text)
        score = self.scores.pop(0) if self.scores else 50
        return Verdict(score=score, issues=[], critique=f"critique {iteration} of {state.text}")

    def improver(self, state: Draft | FinalSpec, critique: Critique, iteration: int) -> str:
        self.improved.append((state.text, critique.text))
        return f"improved {iteration}"


def test_critique_uses_the_draft_when_no_final_spec_exists() -> None:
    seen = Recorder()
    result = critique_step((Draft("the draft"),), iteration=1, critic=seen.critic)
    assert isinstance(result, Ok)
    assert seen.critiqued == ["the draft"]
    assert isinstance(result.events[-1], Critique) and result.events[-1].of_iteration == 0


# a draft, its critique and the improvement written from it
ONE_IMPROVEMENT = (
    Draft("the draft"),
    Critique("c1", 50, (), iteration=1, of_iteration=0),
    FinalSpec("improvement 1", iteration=1),
)


def test_critique_uses_the_most_recent_final_spec_when_it_exists() -> None:
    seen = Recorder()
    result = critique_step(ONE_IMPROVEMENT, iteration=2, critic=seen.critic)
    assert isinstance(result, Ok)
    assert seen.critiqued == ["improvement 1"]
    assert result.events[:3] == ONE_IMPROVEMENT  # append-only: what was there is unchanged


def test_improve_uses_the_most_recent_final_spec_when_it_exists() -> None:
    seen = Recorder()
    events = (*ONE_IMPROVEMENT, Critique("c2", 60, (), iteration=2, of_iteration=1))
    result = improve_step(events, iteration=2, improver=seen.improver)
    assert isinstance(result, Ok)
    assert seen.improved == [("improvement 1", "c2")]
    assert result.events[-1] == FinalSpec("improved 2", iteration=2)


def test_a_three_iteration_refinement_loop_chains_properly() -> None:
    seen = Recorder(scores=[10, 20, 30])
    events_seen: list[tuple[str, int]] = []
    refined = refine(
        "the draft",
        iterations=3,
        stop_score=100,
        critic=seen.critic,
        improver=seen.improver,
        on_event=lambda state, it: events_seen.append((state.kind, it)),
    )
    assert [type(s).__name__ for s in refined.events] == [
        "Draft",
        "Critique",
        "FinalSpec",
        "Critique",
        "FinalSpec",
        "Critique",
        "FinalSpec",
    ]
    assert events_seen == THREE_REFINEMENT_STATES
    assert seen.critiqued == ["the draft", "improved 1", "improved 2"]  # always the latest
    assert refined.text == "improved 3" and refined.best_iteration == 3


def test_critique_returns_a_failure_when_there_is_no_reasoning_state() -> None:
    seen = Recorder()
    result = critique_step((), iteration=1, critic=seen.critic)
    assert result == Failure("no draft to critique")
    assert seen.critiqued == []


def test_improve_returns_a_failure_when_there_is_no_reasoning_state() -> None:
    seen = Recorder()
    result = improve_step(
        (Critique("c", 1, (), iteration=1, of_iteration=0),), iteration=1, improver=seen.improver
    )
    assert isinstance(result, Failure) and result.message == "no draft to improve"
    assert seen.improved == []


def test_most_recent_reasoning_state_skips_critiques() -> None:
    assert most_recent_reasoning_state(()) is None
    events = (Draft("d"), Critique("c", 1, (), iteration=1, of_iteration=0))
    assert most_recent_reasoning_state(events) == Draft("d")


def test_states_are_immutable() -> None:
    draft = Draft("d")
    with pytest.raises(AttributeError):
        setattr(draft, "text", "changed")  # noqa: B010 (frozen dataclass)


def test_a_refused_call_is_a_failure_value_and_the_best_version_is_kept() -> None:
    def critic(state: Any, iteration: int) -> Verdict:
        if iteration == 2:
            raise TokenCapExceeded("refine_critique", "token cap 100")
        return Verdict(score=40, issues=[], critique="meh")

    refined = refine(
        "draft",
        iterations=3,
        stop_score=90,
        critic=critic,
        improver=lambda state, critique, it: f"improved {it}",
    )
    assert refined.failure is not None and refined.failure.budget
    assert refined.failure.message == "critique failed: token cap 100"
    assert refined.text == "improved 1"  # it improves the best-scored version (the draft)


@pytest.mark.parametrize(
    ("scores", "iterations", "expected_text", "expected_iteration"),
    [
        ([70, 80], 2, "improved 2", 2),  # rising: the last improvement
        ([70, 60], 2, "draft", 0),  # the improvement made it worse: back to the draft
        ([50, 80, 60], 3, "improved 1", 1),  # best-scoring in the middle
    ],
)
def test_the_best_scoring_version_is_kept(scores, iterations, expected_text, expected_iteration):
    seen = Recorder(scores=scores)
    refined = refine(
        "draft", iterations=iterations, stop_score=100, critic=seen.critic, improver=seen.improver
    )
    assert (refined.text, refined.best_iteration) == (expected_text, expected_iteration)
    assert best_version(refined.events)[0].text == expected_text


def test_refinement_stops_early_at_the_threshold() -> None:
    seen = Recorder(scores=[60, 92, 99])
    refined = refine(
        "draft", iterations=3, stop_score=90, critic=seen.critic, improver=seen.improver
    )
    assert refined.stopped_early
    assert (refined.text, refined.best_score) == ("improved 1", 92)
    assert len(seen.critiqued) + len(seen.improved) == 3  # not 2N = 6


@pytest.mark.parametrize(
    ("scores", "improvements", "expected_text"),
    [
        ([70, 60], 1, "draft"),  # the last critique scored below the draft's: no improve 2
        ([50, 80, 60], 2, "improved 1"),  # below iteration 1's version: no improve 3
        ([70, 70], 2, "improved 2"),  # a tie goes to the later version: improve 2 is kept
        ([70, 80], 2, "improved 2"),  # rising: improve 2 is kept
    ],
)
def test_the_last_improvement_is_not_asked_for_when_it_would_be_dropped(
    scores, improvements, expected_text
):
    seen = Recorder(scores=scores)
    refined = refine(
        "draft",
        iterations=len(scores),
        stop_score=100,
        critic=seen.critic,
        improver=seen.improver,
    )
    assert len(seen.improved) == improvements
    assert refined.text == expected_text and refined.failure is None


def test_zero_iterations_is_just_the_draft() -> None:
    seen = Recorder()
    refined = refine(
        "draft", iterations=0, stop_score=90, critic=seen.critic, improver=seen.improver
    )
    assert refined.text == "draft" and seen.critiqued == []


@pytest.mark.parametrize(
    ("step", "mean", "expected"),
    [
        (1, 0.99, None),  # MIN first
        (3, 0.99, None),
        (4, 0.75, Termination.TARGET_REACHED),  # reaching TARGET counts
        (4, 0.74, None),
        (9, 0.5, None),
        (10, 0.5, Termination.MAX_STEPS),
        (10, 0.8, Termination.TARGET_REACHED),
    ],
)
def test_termination_rule(step, mean, expected):
    assert termination_after(step=step, mean=mean, min_steps=4, max_steps=10, target=0.75) == (
        expected
    )
