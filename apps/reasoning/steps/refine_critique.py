"""`refine_critique` — refinement's critique of the most recent Draft or FinalSpec: a quality
score 0–100 and issues, each naming the sentence it concerns (`quote`). One call does the
reasoning checks (claims against the business info, support's fallacies) and weighs the
customer's, the business's and the policy's perspective (thinking-scaffolding layers 1, 3, 4)."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator

from apps.reasoning.steps import _data
from apps.reasoning.steps import _deliberative as d
from apps.reasoning.steps._base import Out, Step
from apps.reasoning.steps._shared import extend

IssueKind = Literal[
    "unsupported_claim",
    "policy_conflict",
    "false_promise",
    "reasoning_error",
    "tone",
    "missing_info",
]
ISSUE_KINDS: tuple[str, ...] = IssueKind.__args__  # type: ignore[attr-defined]


class RefineCritiqueOut(Out):
    score: int = Field(0, ge=0, le=100, description="Quality of the reply, 0-100.")
    issues: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Each {quote: the exact sentence, problem, kind: "
        + " | ".join(ISSUE_KINDS)
        + "}.",
    )
    critique: str = Field("", description="The critique in a few sentences.")

    @field_validator("score", mode="before")
    @classmethod
    def _score(cls, value: Any) -> int:
        try:
            number = float(value)
        except (TypeError, ValueError):
            return 0
        if 0 < number <= 1:  # a model that answered 0-1
            number *= 100
        return max(0, min(100, round(number)))

    @field_validator("issues", mode="before")
    @classmethod
    def _issues(cls, value: Any) -> list[dict[str, Any]]:
        out = []
        for item in d.object_list(value):
            kind = str(item.get("kind") or "").strip().lower().replace(" ", "_")
            out.append(
                {
                    "quote": str(item.get("quote") or "").strip(),
                    "problem": str(item.get("problem") or "").strip(),
                    "kind": kind if kind in ISSUE_KINDS else "reasoning_error",
                }
            )
        return out


INSTRUCTIONS = """Now review strictly, before the customer sees it, the reply to the customer's last
message in the "draft to review" block above (iteration {iteration}). The business information
above is the only source of truth; do not write a new reply. Report each problem as an issue
quoting the exact sentence it concerns:
1. unsupported_claim (not in the information), policy_conflict (contradicts a policy),
   false_promise (promises what the business does not);
2. reasoning_error: unsupported generalisation, false dilemma, appeal to authority, circular
   reasoning;
3. the customer's view (need met? tone, missing_info), the business's (cost, commitments) and
   the policy's (within the written rules?).
Return JSON: score (0-100, how good the reply is now), issues ([{{"quote", "problem", "kind"}}],
kind one of {kinds}; [] if none), critique (a few sentences)."""


def prompt(*, prefix: list[dict[str, str]], text: str, iteration: int) -> list[dict[str, str]]:
    """The shared prefix (`_shared.shared_prefix`: our rules, the business's context, the
    conversation …), the reply under review (a data block: a model wrote it), then the task —
    a trailing system message."""
    task = INSTRUCTIONS.format(iteration=iteration, kinds=", ".join(ISSUE_KINDS))
    return extend(
        prefix,
        _data.data_message(_data.block(_data.DRAFT, text)),
        _data.instructions_message(task),
    )


def hint(*, text: str, iteration: int) -> dict[str, Any]:
    return {"text": text, "iteration": iteration}


CLOSING = "If anything is unclear, just reply here and I'll help."


def offline(hint: dict[str, Any]) -> dict[str, Any]:
    text = str(hint.get("text", ""))
    iteration = int(hint.get("iteration", 1))
    first = re.split(r"(?<=[.!?])\s+", text.strip())[0] if text.strip() else ""
    if CLOSING in text:
        return {
            "score": min(95, 84 + 5 * iteration),
            "issues": [],
            "critique": "(Offline demo) Grounded, within policy and clear about the next step.",
        }
    return {
        "score": 72,
        "issues": [
            {
                "quote": first,
                "problem": "The reply does not tell the customer how to follow up.",
                "kind": "missing_info",
            }
        ],
        "critique": "(Offline demo) Accurate, but the customer is left without a next step.",
    }


# What a reply looks like (docs/llm-protocol.md shows it; a test validates it).
EXAMPLE: dict[str, Any] = {
    "score": 72,
    "issues": [
        {
            "quote": "I can pass your case to our team for an exception.",
            "problem": "Implies an exception the policy does not offer.",
            "kind": "false_promise",
        }
    ],
    "critique": "Accurate on the window; the last sentence over-promises.",
}


STEP = Step(
    name="refine_critique",
    output=RefineCritiqueOut,
    prompt=prompt,
    hint=hint,
    offline=offline,
    description="Deliberative refinement: score 0-100 and quoted issues of the latest version.",
    example=EXAMPLE,
    language="review",
)
