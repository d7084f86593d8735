"""What deliberative mode's steps share: tolerant parsing of scores and lists of objects, the
rubric as prompt text, and the offline demo model's scripted deliberation (deterministic, so
`make demo` shows the whole loop without a key)."""

from __future__ import annotations

import re
from typing import Any

from apps.reasoning.steps import _demo


def clamp01(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    if number != number:  # NaN
        return 0.0
    if number > 1 and number <= 100:  # a model that answered in percent
        number /= 100
    return round(max(0.0, min(1.0, number)), 3)


def scores_dict(value: Any) -> dict[str, float]:
    if not isinstance(value, dict):
        return {}
    return {str(k): clamp01(v) for k, v in value.items()}


def object_list(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        return []
    return [v for v in value if isinstance(v, dict)]


def rubric_text(principles: list[dict[str, str]]) -> str:
    return "\n".join(f"- {p['key']} ({p['label']}): {p['definition']}" for p in principles)


# -- the offline demo's scripted deliberation ---------------------------------------------------

STEP_FOCUS = [
    "Restating what the customer asks and what a good answer must settle",
    "Checking the business information and policies that apply",
    "Weighing the customer's, the business's and the policy's view",
    "Looking for gaps: what is unknown, what must not be promised",
    "Drafting the substance of the answer and the next step for the customer",
    "Re-reading for tone and completeness",
]


def demo_scores(keys: list[str], step: int) -> dict[str, float]:
    """Scores that climb step by step (0.55 → 0.85), the weakest principle a little behind;
    step 3 does not rise, so the demo shows the feedback call as well as the server's notes
    (apps/reasoning/deliberation/loop.py)."""
    rises = step - 1 - (1 if step >= 3 else 0)
    base = min(0.55 + 0.07 * rises, 0.85)
    return {
        k: round(max(0.0, base - (0.05 if n == len(keys) - 1 else 0.0)), 2)
        for n, k in enumerate(keys)
    }


def demo_hypotheses(text: str) -> list[dict[str, Any]]:
    low = text.lower()
    if " or " in low:  # "refund or exchange?": two readings, close together
        first, _, second = low.partition(" or ")
        first_words = re.findall(r"[a-z']+", first)[-3:]
        second_words = re.findall(r"[a-z']+", second)[:3]
        return [
            {"intent": " ".join(first_words) or "the first option", "confidence": 0.5},
            {"intent": " ".join(second_words) or "the second option", "confidence": 0.45},
        ]
    return [
        {"intent": text.strip()[:80] or "a question", "confidence": 0.8},
        {"intent": "something else about their order", "confidence": 0.2},
    ]


def demo_answer(hint: dict[str, Any]) -> dict[str, Any]:
    return _demo.answer(hint, adaptive=False)
