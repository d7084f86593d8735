"""`reason_step` — one step of deliberative mode's server-controlled loop: this step's
reasoning, `continue` / `final`, a self-score per rubric principle (0–1) and the rationale for
the scores; on the first step optionally 2–4 hypotheses about what the customer wants."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from apps.reasoning.steps import _deliberative as d
from apps.reasoning.steps._base import Out, Step, required_text
from apps.reasoning.steps._shared import CONFIRMATION_RULE, RULES, chat_messages


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


PROMPT = """You are the customer-support assistant of the business below, reasoning step by
step before you answer (the customer does not see these steps). The server runs the loop: at
least {min_steps} and at most {max_steps} steps; it stops once your mean self-score reaches
{target}. Take one step of reasoning now — build on the earlier steps and the server's feedback.
{rules}
{confirmation}

{context}

Rubric — score this step 0-1 on each principle honestly (a high score you have not earned
only wastes a step):
{rubric}

Return JSON: content (this step's reasoning), status ("continue" or "final"), scores (object:
{keys} -> 0-1), rationale (why these scores){hypotheses}."""

HYPOTHESES = """, hypotheses (this first step only: 2-4 readings of what the customer wants,
each {"intent": text, "confidence": 0-1}; [] when the request is unambiguous)"""


def prompt(
    *,
    context: str,
    pending: str,
    principles: list[dict[str, str]],
    min_steps: int,
    max_steps: int,
    target: float,
    first: bool,
    conversation: list[dict[str, str]],
    notes: str = "",
) -> list[dict[str, str]]:
    """System: our rules, the business's context and the rubric. Then the notes block, the
    `conversation` (the chat history, the earlier steps and the server's feedback, and the
    server's request for this step) and the confirmation state."""
    system = PROMPT.format(
        min_steps=min_steps,
        max_steps=max_steps,
        target=target,
        rules=RULES,
        confirmation=CONFIRMATION_RULE,
        context=context,
        rubric=d.rubric_text(principles),
        keys=", ".join(p["key"] for p in principles),
        hypotheses=HYPOTHESES if first else "",
    )
    # The conversation ends with the earlier steps and the server's request: of it only the
    # chat history before the current customer message (the last one not from the server) may
    # be left out to fit a small context window.
    customer = [
        i
        for i, message in enumerate(conversation)
        if message.get("role") == "user" and not message.get("content", "").startswith("(server)")
    ]
    keep_from = customer[-1] if customer else len(conversation) - 1
    return chat_messages(
        system, history=conversation, notes=notes, pending=pending, keep_from=keep_from
    )


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
