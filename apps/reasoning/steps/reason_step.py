"""`reason_step` — one step of deliberative mode's server-controlled loop: this step's
reasoning, `continue` / `final`, a self-score per rubric principle (0–1) and the rationale for
the scores; on the first step optionally 2–4 hypotheses about what the customer wants."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from apps.reasoning.steps import _data
from apps.reasoning.steps import _deliberative as d
from apps.reasoning.steps._base import Out, Step, required_text
from apps.reasoning.steps._shared import extend


class ReasonStepOut(Out):
    content: str = Field("", description="This step's reasoning.", validate_default=True)
    status: Literal["continue", "final"] = "continue"
    scores: dict[str, float] = Field(
        default_factory=dict, description="Rubric principle key -> self-score 0-1."
    )
    rationale: str = Field("", description="Why these scores.")
    hypotheses: list[dict[str, Any]] = Field(
        default_factory=list,
        description="First step only: 2-4 readings of what the customer wants, each "
        "{intent, confidence 0-1}; [] otherwise.",
    )

    _content = field_validator("content")(required_text)

    @field_validator("status", mode="before")
    @classmethod
    def _status(cls, value: Any) -> str:
        return "final" if str(value).strip().lower() == "final" else "continue"

    @field_validator("scores", mode="before")
    @classmethod
    def _scores(cls, value: Any) -> dict[str, float]:
        return d.scores_dict(value)

    @field_validator("hypotheses", mode="before")
    @classmethod
    def _hypotheses(cls, value: Any) -> list[dict[str, Any]]:
        out = []
        for item in d.object_list(value)[:4]:
            intent = str(item.get("intent") or "").strip()
            if intent:
                out.append({"intent": intent, "confidence": d.clamp01(item.get("confidence"))})
        return sorted(out, key=lambda h: -h["confidence"])

    def scored(self, keys: list[str]) -> dict[str, float]:
        """The scores of the rubric's principles; a principle the model left out scores 0."""
        return {k: self.scores.get(k, 0.0) for k in keys}


PROTOCOL = """Before you answer, reason about the customer's last message in steps (the customer
does not see them), each building on the earlier ones and the server's feedback. The server runs
at least {min_steps} and at most {max_steps} steps and stops once your mean self-score reaches
{target}.

Rubric — score each step 0-1 on each principle honestly (an unearned score wastes a step):
{rubric}

Each step returns JSON: content (this step's reasoning), status ("continue" or "final"),
scores ({keys} -> 0-1), rationale (why these scores), hypotheses ([] except on the
first step)."""

REQUEST = "(server) Take reasoning step {index} of at most {max_steps}."

HYPOTHESES = """ This first step also returns hypotheses: 2-4 readings of what the customer
wants, each {"intent": text, "confidence": 0-1}; [] when the request is unambiguous."""


def protocol(
    *, principles: list[dict[str, str]], min_steps: int, max_steps: int, target: float
) -> dict[str, str]:
    """The loop's rules and the rubric: a system message of our words, sent once after the
    shared prefix (`_shared.shared_prefix`) and kept in place by every later step, so each step
    re-uses the previous one's prompt as a cached prefix."""
    return _data.instructions_message(
        PROTOCOL.format(
            min_steps=min_steps,
            max_steps=max_steps,
            target=target,
            rubric=d.rubric_text(principles),
            keys=", ".join(p["key"] for p in principles),
        )
    )


def prompt(
    *, prefix: list[dict[str, str]], transcript: list[dict[str, str]], index: int, max_steps: int
) -> list[dict[str, str]]:
    """The shared prefix (`_shared.shared_prefix`: our rules, the business's context, the
    notes, the conversation, the knowledge-base excerpts, the confirmation state), then the
    loop's `transcript` (the protocol message, then every earlier step and the server's
    feedback after it — append-only), then this step's request: a trailing system message
    (the language line goes at its end)."""
    request = REQUEST.format(index=index, max_steps=max_steps)
    if index == 1:
        request += HYPOTHESES.replace("\n", " ")
    return extend(prefix, *transcript, _data.instructions_message(request))


def hint(*, index: int, max_steps: int, keys: list[str], target: float) -> dict[str, Any]:
    return {"step_index": index, "max_steps": max_steps, "keys": keys, "target": target}


def offline(hint: dict[str, Any]) -> dict[str, Any]:
    step = int(hint.get("step_index", 1))
    keys = list(hint.get("keys", []))
    scores = d.demo_scores(keys, step)
    mean = sum(scores.values()) / len(scores) if scores else 0.0
    weakest = min(scores, key=scores.__getitem__) if scores else "—"
    focus = d.STEP_FOCUS[(step - 1) % len(d.STEP_FOCUS)]
    out: dict[str, Any] = {
        "content": f"Step {step} (offline demo model): {focus} for: "
        f"“{str(hint.get('user_text', ''))[:120]}”.",
        "status": "final" if mean >= float(hint.get("target", 0.75)) else "continue",
        "scores": scores,
        "rationale": f"Scores rise as the reasoning covers more; {weakest} is still the weakest.",
        "hypotheses": d.demo_hypotheses(str(hint.get("user_text", ""))) if step == 1 else [],
    }
    return out


# What a reply looks like (docs/llm-protocol.md shows it; a test validates it).
EXAMPLE: dict[str, Any] = {
    "content": "The customer wants to return a jacket bought 40 days ago; policy says 30.",
    "status": "continue",
    "scores": {
        "grounded": 0.8,
        "policy_compliant": 0.6,
        "helpful_complete": 0.5,
        "caring_tone": 0.7,
    },
    "rationale": "Grounded in the returns policy; no next step offered yet.",
    "hypotheses": [
        {"intent": "return the jacket for a refund", "confidence": 0.7},
        {"intent": "exchange it for another size", "confidence": 0.3},
    ],
}


STEP = Step(
    name="reason_step",
    output=ReasonStepOut,
    prompt=prompt,
    hint=hint,
    offline=offline,
    description="Deliberative mode: one scored reasoning step of the server-controlled loop.",
    example=EXAMPLE,
    language="review",
)
