"""The rubrics GuideDesk ships (installed by migration `clients.0001_squashed_0023` from `BUILTIN`;
editable in the admin).

`support` is the default for every deliberative plan; `contemplative` is a reflective set of
principles (awareness, humility, perspectives, care). `BUILTIN` is also what a deliberative turn
falls back to if the `support` row was deleted. Names and descriptions are shown to support
leads in the admin; slugs and principle keys are the import format's and stay as they are.
A change here reaches new databases only; existing ones need a data migration of their own."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

DEFAULT_RUBRIC = "support"

SUPPORT: dict[str, Any] = {
    "slug": "support",
    "name": "Support",
    "description": "For customer support answers: grounded, within policy, complete, caring.",
    "principles": [
        {
            "key": "grounded",
            "label": "Grounded in the business info",
            "definition": "Every fact, price, date and promise comes from the business "
            "information or a tool's result; what is not there is named as unknown, never "
            "invented or guessed.",
        },
        {
            "key": "policy_compliant",
            "label": "Policy-compliant",
            "definition": "The answer follows the business's written policies (returns, "
            "shipping, privacy, terms) and offers nothing they do not allow; an exception is "
            "handed to a person, never promised.",
        },
        {
            "key": "helpful_complete",
            "label": "Helpful and complete",
            "definition": "It answers what the customer actually needs, including the next "
            "step they must take and what they need for it, and leaves nothing essential out.",
        },
        {
            "key": "caring_tone",
            "label": "Caring in tone",
            "definition": "It acknowledges the customer's situation and feelings, is "
            "respectful and calm, never blames the customer, and stays concise.",
        },
    ],
    "min_steps": 4,
    "max_steps": 10,
    "target": Decimal("0.75"),
}

CONTEMPLATIVE: dict[str, Any] = {
    "slug": "contemplative",
    "name": "Reflective",
    "description": "For sensitive or disputed cases: reasoning that stays aware of itself, holds "
    "conclusions lightly, weighs several perspectives and considers everyone affected.",
    "principles": [
        {
            "key": "mindfulness",
            "label": "Mindfulness",
            "definition": "Meta-awareness of the reasoning process itself.",
        },
        {
            "key": "emptiness",
            "label": "Emptiness",
            "definition": "Holding conclusions lightly and acknowledging uncertainty.",
        },
        {
            "key": "nonDuality",
            "label": "Non-Duality",
            "definition": "Recognizing interdependence and multiple valid perspectives.",
        },
        {
            "key": "boundlessCare",
            "label": "Boundless Care",
            "definition": "Considering impact on all stakeholders.",
        },
    ],
    "min_steps": 4,
    "max_steps": 10,
    "target": Decimal("0.75"),
}

BUILTIN: dict[str, dict[str, Any]] = {r["slug"]: r for r in (SUPPORT, CONTEMPLATIVE)}
