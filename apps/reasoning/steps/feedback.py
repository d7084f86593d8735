"""`feedback` — the server's feedback LLM after each reasoning step: it sees the current scores,
the WHOLE score history and the rubric's principle definitions (re-injected every time, as the
dharma seed insists, so the judge does not drift) and returns 2–3 sentences of guidance for the
next step."""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field, field_validator

from apps.reasoning.steps import _data
from apps.reasoning.steps import _deliberative as d
from apps.reasoning.steps._base import Out, Step, required_text


class FeedbackOut(Out):
    feedback: str = Field(
        "", description="2-3 sentences of guidance for the next step.", validate_default=True
    )

    _text = field_validator("feedback")(required_text)


PROMPT = """You coach a customer-support assistant that reasons in scored steps toward a target
mean self-score of {target}. Current step {step} of at most {max_steps}: scores {scores}, mean
{mean}.

Principles (judge by these definitions, not by keywords):
{rubric}

The data blocks hold the customer's message and the score history (oldest first).

Is the trajectory moving toward the target? Which principles are weakest? What should the next
step do? Return JSON: feedback (2-3 sentences of specific, actionable guidance for the next
step; not a template)."""


def history_text(history: list[dict[str, Any]]) -> str:
    return "\n".join(
        f"- step {h['step']}: scores {json.dumps(h['scores'], sort_keys=True)}, mean "
        f"{h['mean']:.3f}; content: {h['content']}"
        for h in history
    )


def prompt(
    *,
    principles: list[dict[str, str]],
    history: list[dict[str, Any]],
    target: float,
    max_steps: int,
    user_text: str,
) -> list[dict[str, str]]:
    """System: the task, the rubric and the current scores (numbers the server computed).
    Data: the customer's message and the steps' content (a model wrote it)."""
    current = history[-1]
    system = PROMPT.format(
        target=target,
        step=current["step"],
        max_steps=max_steps,
        rubric=d.rubric_text(principles),
        scores=json.dumps(current["scores"], sort_keys=True),
        mean=f"{current['mean']:.3f}",
    )
    return [
        _data.system_message(system),
        _data.data_message(
            _data.block(_data.CUSTOMER, user_text),
            _data.block(_data.REASONING, history_text(history)),
        ),
    ]


def hint(*, history: list[dict[str, Any]], target: float) -> dict[str, Any]:
    return {"score_history": history, "target": target}


def offline(hint: dict[str, Any]) -> dict[str, Any]:
    history = hint.get("score_history") or [{"step": 1, "scores": {}, "mean": 0.0}]
    current = history[-1]
    scores: dict[str, float] = current.get("scores", {})
    weakest = min(scores, key=scores.__getitem__) if scores else "the rubric"
    target = float(hint.get("target", 0.75))
    trend = (
        "rising" if len(history) > 1 and current["mean"] > history[-2]["mean"] else "not rising yet"
    )
    gap = max(0.0, target - current["mean"])
    return {
        "feedback": f"(Offline demo) The mean is {current['mean']:.2f} and {trend}"
        + (f", {gap:.2f} below the target {target:.2f}." if gap else ", at the target.")
        + f" Strengthen {weakest} next: tie each claim to the business information."
    }


# What a reply looks like (docs/llm-protocol.md shows it; a test validates it).
EXAMPLE: dict[str, Any] = {
    "feedback": "Mean 0.65 and rising. helpful_complete is weakest: say what the customer "
    "can do instead (store credit, warranty)."
}


STEP = Step(
    name="feedback",
    output=FeedbackOut,
    prompt=prompt,
    hint=hint,
    offline=offline,
    description="Deliberative mode: guidance for the next step from the whole score history.",
    example=EXAMPLE,
    language="review",
)
