"""A plan's deliberative-mode settings: one JSON object, `Plan.deliberation`, whose shape is
`DeliberationSettings`. Code reads it through `deliberation_settings(plan)` and writes it
through `deliberation_settings_set(plan, ...)`, never the JSON itself; the plan admin shows one
form row per setting. The rubric the loop scores against stays a foreign key (`Plan.rubric`).

The step and target bounds (1 ≤ MIN ≤ MAX ≤ 20, 0 < TARGET ≤ 1) are checked with translated
messages by `deliberation_errors`, against the rubric's values where the plan inherits them
(`Plan.clean`); the model below checks the types and the refinement bounds."""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.core.exceptions import NON_FIELD_ERRORS
from django.utils.translation import gettext
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

if TYPE_CHECKING:
    from apps.clients.models import Plan

DELIBERATION_MAX_STEPS_LIMIT = 20
MAX_REFINEMENT_ITERATIONS = 5
# Each setting's row in the plan admin; also the names errors are reported under and the
# simulation overrides' names (docs/api.md).
DELIBERATION_ROWS = {
    "min_steps": "deliberation_min_steps",
    "max_steps": "deliberation_max_steps",
    "target": "deliberation_target",
    "refinement_iterations": "refinement_iterations",
    "refinement_stop_score": "refinement_stop_score",
}


class DeliberationSettings(BaseModel):
    """MIN / MAX / TARGET override the rubric's (None = the rubric's); the refinement rounds
    after the answer is written (0 = off) and the critique score that ends them early."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    min_steps: int | None = None
    max_steps: int | None = None
    target: float | None = None
    refinement_iterations: int = Field(default=2, ge=0, le=MAX_REFINEMENT_ITERATIONS)
    refinement_stop_score: int = Field(default=90, ge=1, le=100)

    @field_validator("target", mode="before")
    @classmethod
    def _three_places(cls, value: Any) -> Any:
        """TARGET keeps three decimal places (0.75, 0.875), a number in the JSON."""
        if isinstance(value, int | float | Decimal) and not isinstance(value, bool):
            return round(float(value), 3)
        return value


def default_deliberation() -> dict[str, Any]:
    """A new plan's `deliberation`: every setting at its default, written out."""
    return DeliberationSettings().model_dump()


def deliberation_settings(plan: Plan) -> DeliberationSettings:
    """The plan's deliberative-mode settings (a key the JSON lacks has its default)."""
    return DeliberationSettings.model_validate(plan.deliberation or {})


def deliberation_settings_set(plan: Plan, **changes: Any) -> DeliberationSettings:
    """Change some of the plan's settings in memory (validated; the caller saves). A new dict
    is assigned, so a copy of the plan (a simulation's side) never shares it with the live
    row."""
    merged = {**deliberation_settings(plan).model_dump(), **changes}
    value = DeliberationSettings.model_validate(merged)
    plan.deliberation = value.model_dump()
    return value


def settings_errors(exc: ValidationError) -> dict[str, list[str]]:
    """A malformed `Plan.deliberation` (written by code, not the admin's rows), by row."""
    errors: dict[str, list[str]] = {}
    for error in exc.errors():
        key = str(error["loc"][0]) if error["loc"] else ""
        errors.setdefault(DELIBERATION_ROWS.get(key, NON_FIELD_ERRORS), []).append(
            f"{key}: {error['msg']}" if key else error["msg"]
        )
    return errors


def deliberation_errors(
    *, min_steps: int | None, max_steps: int | None, target: Decimal | float | None
) -> dict[str, str]:
    """What is wrong with a loop's MIN / MAX / TARGET (1 ≤ MIN ≤ MAX ≤ 20, 0 < TARGET ≤ 1),
    by field; None values are not checked (they are inherited)."""
    errors: dict[str, str] = {}
    limit = DELIBERATION_MAX_STEPS_LIMIT
    if min_steps is not None and not 1 <= min_steps <= limit:
        errors["min_steps"] = gettext(
            "The minimum number of steps must be between 1 and %(limit)s."
        ) % {"limit": limit}
    if max_steps is not None and not 1 <= max_steps <= limit:
        errors["max_steps"] = gettext(
            "The maximum number of steps must be between 1 and %(limit)s."
        ) % {"limit": limit}
    if min_steps is not None and max_steps is not None and not errors and min_steps > max_steps:
        errors["max_steps"] = gettext(
            "The maximum number of steps (%(max)s) must be at least the minimum (%(min)s)."
        ) % {"max": max_steps, "min": min_steps}
    if target is not None and not 0 < float(target) <= 1:
        errors["target"] = gettext("The target score must be above 0 and at most 1 (e.g. 0.75).")
    return errors
