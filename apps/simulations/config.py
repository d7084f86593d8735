"""What decides behaviour, for a simulation's two sides: the live configuration (*baseline*)
and the same with overrides (*candidate*).

A configuration is the plan's mode, the rubric and deliberation settings, the model, the
business info, the notes set and the evaluation switch. `config_validate_overrides` checks what
a run may change; `side_for` builds what a side's turns run on — in-memory copies of the
client and its plan (`copy.copy`: never saved; the live rows are never written), the rubric and
refinement rounds a deliberative turn reads, the model override for the side's LLM calls only
(`apps.reasoning.llm.model_override`) and the notes block its turns read in place of the live
notes."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.utils.translation import gettext as _

from apps.billing.models import ModelPrice
from apps.clients import modes
from apps.clients.deliberation import (
    DELIBERATION_ROWS,
    MAX_REFINEMENT_ITERATIONS,
    deliberation_errors,
    deliberation_settings_set,
)
from apps.clients.models import Client, Plan, Rubric
from apps.core.exceptions import ApplicationError
from apps.knowledge.selectors import business_info_for
from apps.notes.models import Note, NoteStatus
from apps.notes.selectors import format_notes_for_prompt, relevant_notes
from apps.reasoning.deliberation.config import UnknownRubric, deliberation_config
from apps.reasoning.grants import allowed_modes, allowed_refinement_rounds
from apps.reasoning.llm import OFFLINE_MODEL
from apps.reasoning.modes import mode_that_runs

__all__ = [
    "OVERRIDE_KEYS",
    "Side",
    "config_validate_overrides",
    "live_config",
    "plan_limits_check",
    "side_for",
]

OVERRIDE_KEYS = (
    "mode",
    "rubric",
    "model",
    "refinement_iterations",
    "deliberation_min_steps",
    "deliberation_max_steps",
    "deliberation_target",
    "business_info",
    "notes",
    "evaluation",
)
MAX_APPROVED_NOTES = 200


def _live_model() -> str:
    return str(settings.LLM_MODEL) if settings.OPENAI_API_KEY else OFFLINE_MODEL


def _describe(*, client: Client, plan: Plan, rubric: str, model: str, notes: Any) -> dict:
    deliberation = deliberation_config(client=client, plan=plan, rubric=rubric or None)
    return {
        "mode": mode_that_runs(plan.ai_mode),
        "model": model,
        "rubric": deliberation.rubric,
        "deliberation": {
            "min_steps": deliberation.min_steps,
            "max_steps": deliberation.max_steps,
            "target": deliberation.target,
            "refinement_iterations": deliberation.refinement_iterations,
        },
        # the document the turns see: the basics with the FAQs from the knowledge base
        "business_info": business_info_for(client),
        "notes": notes,
        "evaluation": bool(plan.evaluation_enabled),
    }


def live_config(*, client: Client) -> dict[str, Any]:
    """The configuration the client's live turns run with."""
    return _describe(client=client, plan=client.plan, rubric="", model=_live_model(), notes="live")


def _fail(key: str, message: str) -> ApplicationError:
    return ApplicationError(
        _("The candidate configuration is not valid: %(problem)s") % {"problem": message},
        {"fields": {f"overrides.{key}": message}},
    )


def _int(key: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _fail(key, _("A whole number from %(low)d to %(high)d.") % {"low": low, "high": high})
    return value


# A cleaner checks and normalizes the overrides it knows: what goes into the clean overrides
# (nothing when they are not given), or raises `_fail` with the bad field.
_Cleaner = Callable[[Client, dict[str, Any]], dict[str, Any]]


def _given(key: str, clean: Callable[[Client, Any], Any]) -> _Cleaner:
    """The cleaner of the single override `key`, checked by `clean` when it is given."""

    def cleaner(client: Client, overrides: dict[str, Any]) -> dict[str, Any]:
        return {key: clean(client, overrides[key])} if key in overrides else {}

    return cleaner


def _clean_mode(client: Client, mode: Any) -> str:
    if mode not in modes.names():
        raise _fail("mode", _("Choose one of: %s.") % ", ".join(modes.names()))
    return str(mode)


def _clean_rubric(client: Client, overrides: dict[str, Any]) -> dict[str, Any]:
    """The rubric by slug (a name is looked up); an empty one (the plan's) is left out."""
    if "rubric" not in overrides:
        return {}
    rubric = str(overrides["rubric"] or "")
    try:
        deliberation_config(client=client, plan=client.plan, rubric=rubric or None)
    except UnknownRubric:
        raise _fail("rubric", _("No rubric with this slug or name.")) from None
    if not rubric:
        return {}
    found = Rubric.objects.filter(slug=rubric).values_list("slug", flat=True).first()
    return {"rubric": found or rubric}


def _clean_model(client: Client, model: Any) -> str:
    if not isinstance(model, str) or not model.strip() or len(model) > 100:
        raise _fail("model", _("A model name of at most 100 characters."))
    model = model.strip()
    if not ModelPrice.objects.filter(model=model).exists():
        raise _fail(
            "model",
            _(
                "The model %(model)s has no price, so its calls could not be billed; "
                "choose a model from the price list."
            )
            % {"model": model},
        )
    return model


def _clean_refinement_iterations(client: Client, value: Any) -> int:
    return _int("refinement_iterations", value, 0, MAX_REFINEMENT_ITERATIONS)


def _clean_deliberation(client: Client, overrides: dict[str, Any]) -> dict[str, Any]:
    """The deliberation steps and target (each left out when null), checked together."""
    clean: dict[str, Any] = {}
    for key in ("min_steps", "max_steps"):
        value = overrides.get(f"deliberation_{key}")
        if value is not None:
            clean[f"deliberation_{key}"] = _int(f"deliberation_{key}", value, 1, 1000)
    target = overrides.get("deliberation_target")
    if target is not None:
        if isinstance(target, bool) or not isinstance(target, int | float | str):
            raise _fail("deliberation_target", _("A number above 0 and at most 1."))
        try:
            clean["deliberation_target"] = float(target)
        except ValueError:
            raise _fail("deliberation_target", _("A number above 0 and at most 1.")) from None
    errors = deliberation_errors(
        min_steps=clean.get("deliberation_min_steps"),
        max_steps=clean.get("deliberation_max_steps"),
        target=clean.get("deliberation_target"),
    )
    for key, message in errors.items():
        raise _fail(f"deliberation_{key}", message)
    return clean


def _clean_business_info(client: Client, info: Any) -> dict[str, Any]:
    if not isinstance(info, dict):
        raise _fail("business_info", _("A business info document (an object)."))
    return info


def _clean_evaluation(client: Client, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _fail("evaluation", _("true or false."))
    return value


# In this order: the first bad override is the one reported.
_CLEANERS: tuple[_Cleaner, ...] = (
    _given("mode", _clean_mode),
    _clean_rubric,
    _given("model", _clean_model),
    _given("refinement_iterations", _clean_refinement_iterations),
    _clean_deliberation,
    _given("business_info", _clean_business_info),
    _given("notes", lambda client, notes: _notes(client, notes)),
    _given("evaluation", _clean_evaluation),
)


def config_validate_overrides(
    *, client: Client, overrides: dict[str, Any], within_plan: bool = True
) -> dict[str, Any]:
    """The candidate's overrides, checked and normalized (raises `ApplicationError` with the
    bad field). Nothing is saved. A model must have a price (a call is never billed at 0);
    `within_plan` (every source but `manage.py simulate`, the platform operator's) also keeps
    the mode, refinement rounds and deliberation steps to what the plan allows, or what a
    platform operator granted the client (`plan_limits_check`)."""
    if not isinstance(overrides, dict):
        raise _fail("", _("Overrides must be an object."))
    unknown = sorted(set(overrides) - set(OVERRIDE_KEYS))
    if unknown:
        raise _fail(unknown[0], _("Unknown setting; use one of: %s.") % ", ".join(OVERRIDE_KEYS))
    clean: dict[str, Any] = {}
    for cleaner in _CLEANERS:
        clean.update(cleaner(client, overrides))
    if within_plan:
        plan_limits_check(client=client, overrides=clean)
    return clean


def _refuse(key: str, message: str) -> ApplicationError:
    return ApplicationError(
        _("Your plan does not allow this simulation: %(problem)s") % {"problem": message},
        {"fields": {f"overrides.{key}": message}},
        code="not_in_plan",
    )


def plan_limits_check(*, client: Client, overrides: dict[str, Any]) -> None:
    """Refuse what the client's plan does not allow in a simulation (checked overrides): a mode
    dearer than the plan's and not granted, more refinement rounds than the plan's (or the
    granted number), more deliberation steps than the live configuration's. The grants are the
    playground's (`apps.reasoning.grants`)."""
    if "mode" in overrides:
        allowed = allowed_modes(client=client)
        if overrides["mode"] not in allowed:
            raise _refuse(
                "mode",
                _("the %(mode)s mode is not included in the plan; choose one of: %(allowed)s.")
                % {"mode": overrides["mode"], "allowed": ", ".join(allowed)},
            )
    rounds = overrides.get("refinement_iterations")
    most_rounds = allowed_refinement_rounds(client=client, ceiling=MAX_REFINEMENT_ITERATIONS)
    if rounds is not None and rounds > most_rounds:
        raise _refuse(
            "refinement_iterations",
            _("at most %(most)d refinement rounds (asked for %(asked)d).")
            % {"most": most_rounds, "asked": rounds},
        )
    live = deliberation_config(client=client, plan=client.plan)
    side = side_for(client=client, overrides=overrides)
    candidate = deliberation_config(client=side.client, plan=side.plan, rubric=side.rubric or None)
    for key, asked in (
        ("deliberation_min_steps", overrides.get("deliberation_min_steps")),
        ("deliberation_max_steps", candidate.max_steps),
    ):
        if asked is not None and asked > live.max_steps:
            field = key if key in overrides or key.endswith("min_steps") else "rubric"
            raise _refuse(
                field,
                _("at most %(most)d deliberation steps (asked for %(asked)d).")
                % {"most": live.max_steps, "asked": asked},
            )


def _notes(client: Client, value: Any) -> Any:
    if value in ("live", "none"):
        return value
    ids = value.get("approve") if isinstance(value, dict) and set(value) == {"approve"} else None
    if (
        not isinstance(ids, list)
        or len(ids) > MAX_APPROVED_NOTES
        or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids)
    ):
        raise _fail("notes", _('"live", "none" or {"approve": [note ids]}.'))
    found = set(Note.objects.for_client(client).filter(pk__in=ids).values_list("pk", flat=True))
    missing = [i for i in ids if i not in found]
    if missing:
        raise _fail("notes", _("No such note: %s.") % ", ".join(str(i) for i in missing[:5]))
    return {"approve": sorted(set(ids))}


@dataclass
class Side:
    """What one side's turns run on (never saved)."""

    client: Client
    plan: Plan
    rubric: str  # "" = the client's / plan's
    refinement_iterations: int | None
    model: str  # "" = the live model
    notes: Any  # "live" | "none" | {"approve": [...]}
    config: dict[str, Any]

    def notes_reader(self, language: str) -> Callable[[], tuple[str, list[int]]] | None:
        """What the side's turns read as notes (None: the live notes, as a live turn does)."""
        if self.notes == "live":
            return None
        client, plan = self.client, self.plan
        if self.notes == "none":
            return lambda: ("", [])
        ids = list(self.notes["approve"])

        def read() -> tuple[str, list[int]]:
            if not plan.notes_enabled or plan.notes_prompt_budget_tokens <= 0:
                return "", []
            live = relevant_notes(client=client, language=language)
            approved = [
                n
                for n in Note.objects.for_client(client)
                .filter(pk__in=ids)
                .exclude(status=NoteStatus.ARCHIVED)
                .defer("search_vector")
                if n.pk not in {m.pk for m in live}
            ]
            for note in approved:
                note.status = NoteStatus.ACTIVE  # as if approved: in memory only
            return format_notes_for_prompt(
                [*live, *approved], budget_tokens=plan.notes_prompt_budget_tokens
            )

        return read


def side_for(*, client: Client, overrides: dict[str, Any] | None) -> Side:
    """The side's in-memory client and plan with `overrides` applied (validated ones)."""
    overrides = overrides or {}
    plan = copy.copy(client.plan)
    side_client = copy.copy(client)
    side_client.plan = plan  # the copy's own cache: the live client object is untouched
    if "mode" in overrides:
        plan.ai_mode = overrides["mode"]
    if "evaluation" in overrides:
        plan.evaluation_enabled = overrides["evaluation"]
    changes = {key: overrides[row] for key, row in DELIBERATION_ROWS.items() if row in overrides}
    if changes:
        deliberation_settings_set(plan, **changes)  # a new dict: the live plan's is untouched
    if "business_info" in overrides:
        side_client.business_info = overrides["business_info"]
    rubric = str(overrides.get("rubric", ""))
    model = str(overrides.get("model", ""))
    notes = overrides.get("notes", "live")
    config = _describe(
        client=side_client,
        plan=plan,
        rubric=rubric,
        model=model or _live_model(),
        notes=notes,
    )
    return Side(
        client=side_client,
        plan=plan,
        rubric=rubric,
        refinement_iterations=overrides.get("refinement_iterations"),
        model=model,
        notes=notes,
        config=config,
    )
