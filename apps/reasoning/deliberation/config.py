"""The settings a deliberative turn runs with: the rubric (the client's, else the plan's, else
`support`) and MIN / MAX / TARGET (the plan's overrides over the rubric's), refinement
iterations and early-stop score (the plan's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Q

from apps.clients.deliberation import deliberation_settings
from apps.clients.models import Client, Plan, Rubric
from apps.clients.rubrics import BUILTIN, DEFAULT_RUBRIC


class UnknownRubric(LookupError):
    def __init__(self, name: str) -> None:
        super().__init__(f"no rubric {name!r} (slug or name); see the admin's Rubrics")
        self.name = name


@dataclass(frozen=True)
class DeliberationConfig:
    rubric: str  # slug
    rubric_name: str
    principles: list[dict[str, str]]
    min_steps: int
    max_steps: int
    target: float
    refinement_iterations: int
    refinement_stop_score: int

    @property
    def keys(self) -> list[str]:
        return [p["key"] for p in self.principles]

    def as_data(self) -> dict[str, Any]:
        return {
            "rubric": self.rubric,
            "min_steps": self.min_steps,
            "max_steps": self.max_steps,
            "target": self.target,
            "refinement_iterations": self.refinement_iterations,
            "refinement_stop_score": self.refinement_stop_score,
        }


def _rubric(client: Client, plan: Plan, slug: str | None) -> dict[str, Any]:
    rubric: Rubric | None = None
    if slug:
        rubric = Rubric.objects.filter(Q(slug=slug) | Q(name__iexact=slug)).first()
        if rubric is None and slug not in BUILTIN:
            raise UnknownRubric(slug)
    elif client.rubric_id:
        rubric = client.rubric
    elif plan.rubric_id:
        rubric = plan.rubric
    else:
        rubric = Rubric.objects.filter(slug=DEFAULT_RUBRIC).first()
    if rubric is None:  # the shipped row was deleted: its built-in text still works
        return BUILTIN.get(slug or DEFAULT_RUBRIC, BUILTIN[DEFAULT_RUBRIC])
    return {
        "slug": rubric.slug,
        "name": rubric.name,
        "principles": rubric.principles,
        "min_steps": rubric.min_steps,
        "max_steps": rubric.max_steps,
        "target": rubric.target,
    }


def deliberation_config(
    *,
    client: Client,
    plan: Plan,
    rubric: str | None = None,
    refinement_iterations: int | None = None,
) -> DeliberationConfig:
    """`rubric` (a slug or a name) and `refinement_iterations` override the client's and plan's
    choice (the playground and `manage.py reason` use them)."""
    chosen = _rubric(client, plan, rubric)
    own = deliberation_settings(plan)  # read once: one JSON column of the plan's row

    def pick(override: Any, inherited: Any) -> Any:
        return inherited if override is None else override

    return DeliberationConfig(
        rubric=chosen["slug"],
        rubric_name=chosen["name"],
        principles=list(chosen["principles"]),
        min_steps=int(pick(own.min_steps, chosen["min_steps"])),
        max_steps=int(pick(own.max_steps, chosen["max_steps"])),
        target=float(pick(own.target, chosen["target"])),
        refinement_iterations=int(pick(refinement_iterations, own.refinement_iterations)),
        refinement_stop_score=own.refinement_stop_score,
    )
