"""Simulations in the staff API: cases, runs and case runs as they leave, and what may come in.

Cases are validated by `apps.simulations.schema.case_validate` (the one definition of the
format, docs/simulations.md), not here: the write serializer only documents the body's shape and
refuses what is not an object."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.api.schema import NamedChoiceField
from apps.simulations.models import CaseStatus, RunKind, RunSource, RunStatus, Side

MAX_SLUG_CHARS = 100


class SimCaseFilterSerializer(serializers.Serializer):
    suite = serializers.SlugField(required=False, max_length=50)
    tag = serializers.CharField(required=False, max_length=MAX_SLUG_CHARS)


class SimCaseSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="public_id", help_text="The case's public id.")
    name = serializers.CharField(help_text="A slug, unique within the client.")
    suite = serializers.CharField()
    description = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())
    history = serializers.ListField(
        child=serializers.DictField(),
        help_text='Earlier messages: [{"role": "user"|"assistant", "text"}].',
    )
    turns = serializers.ListField(
        child=serializers.DictField(),
        help_text='The customer\'s messages with their expectations: [{"customer", "expect"}].',
    )
    simulated = serializers.DictField(
        help_text='A simulated customer instead of turns: {"persona", "goal", "max_turns"}.'
    )
    expect = serializers.DictField(help_text="Expectations over the whole case.")
    criteria = serializers.ListField(
        child=serializers.CharField(), help_text="Criteria a model judges (its opinion)."
    )
    tools = serializers.DictField(help_text="Stub results per tool name.")
    repeat = serializers.IntegerField(help_text="Attempts per side (pass^k).")
    enabled = serializers.BooleanField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class SimCaseWriteSerializer(serializers.Serializer):
    """A case in the case format (docs/simulations.md); checked by `case_validate`."""

    name = serializers.CharField(max_length=MAX_SLUG_CHARS)
    suite = serializers.CharField(required=False, max_length=50)
    description = serializers.CharField(required=False, allow_blank=True)
    tags = serializers.ListField(child=serializers.CharField(), required=False)
    history = serializers.ListField(child=serializers.DictField(), required=False)
    turns = serializers.ListField(child=serializers.DictField(), required=False)
    simulated = serializers.DictField(required=False)
    expect = serializers.DictField(required=False)
    criteria = serializers.ListField(child=serializers.CharField(), required=False)
    tools = serializers.DictField(required=False)
    repeat = serializers.IntegerField(required=False, min_value=1)
    enabled = serializers.BooleanField(required=False)


class ProgressSerializer(serializers.Serializer):
    total = serializers.IntegerField(help_text="Case runs to do (cases × sides × attempts).")
    completed = serializers.IntegerField()
    percent = serializers.IntegerField(help_text="0–100.")


def run_progress(run: Any) -> dict[str, int]:
    percent = round(100 * run.completed / run.total) if run.total else (100 if run.finished else 0)
    return {"total": run.total, "completed": run.completed, "percent": min(percent, 100)}


class SimulationRunSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="public_id", help_text="The run's public id.")
    name = serializers.CharField()
    kind = NamedChoiceField(choices=RunKind, enum_name="SimulationRunKind")
    status = NamedChoiceField(choices=RunStatus, enum_name="SimulationRunStatus")
    # (a field named `source` shadows Field.source in the type stubs only)
    source = NamedChoiceField(  # type: ignore[assignment]
        choices=RunSource, enum_name="SimulationRunSource", help_text="Where it was started."
    )
    selection = serializers.DictField(help_text="Which cases or conversations ran.")
    compare = serializers.BooleanField(help_text="Whether the baseline ran too.")
    overrides = serializers.DictField(
        source="candidate_overrides", help_text="What the candidate changed."
    )
    progress = serializers.SerializerMethodField()
    error = serializers.CharField()
    created_by = serializers.EmailField(source="created_by.email", allow_null=True)
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)

    @extend_schema_field(ProgressSerializer)
    def get_progress(self, run: Any) -> dict[str, int]:
        return run_progress(run)


class SimulationBudgetSerializer(serializers.Serializer):
    month = serializers.DateField(help_text="The month (its first day).")
    monthly_tokens = serializers.IntegerField(
        help_text="The client's simulation budget this month (0 = no limit); apart from the "
        "live budget, which simulations never use."
    )
    used = serializers.IntegerField(help_text="Tokens simulations used this month.")
    held_by_runs_in_flight = serializers.IntegerField(
        help_text="What the client's queued and running runs may still use."
    )
    left = serializers.IntegerField(
        allow_null=True, help_text="What a new run may use (null: no limit)."
    )


class SimulationPerTurnSerializer(serializers.Serializer):
    tokens = serializers.IntegerField(help_text="Expected tokens a turn (or a call).")
    basis = serializers.ChoiceField(
        choices=["recent", "typical"],
        help_text="`recent`: the client's average; `typical`: the shipped typical figures.",
    )
    recent = serializers.IntegerField(help_text="Recent turns (or calls) averaged; 0: typical.")


class SimulationEstimateSerializer(serializers.Serializer):
    case_runs = serializers.IntegerField(help_text="Cases × sides × attempts.")
    turns = serializers.IntegerField(help_text="Customer turns, every side together.")
    tokens = serializers.IntegerField(
        help_text="Expected tokens: turns × each side's expected tokens a turn of its mode (the "
        "client's average over its recent turns of that mode, or typical figures), plus the "
        "simulated customer's and the judge's calls."
    )
    cost_usd = serializers.CharField(
        help_text="Provider cost, USD, of the expected tokens, each at the model's dearer price."
    )
    billed_usd = serializers.CharField(help_text="cost_usd × the plan's multiplier for the mode.")
    fits = serializers.BooleanField(
        help_text="Whether the run fits what is left of the simulation budget (a run that "
        "does not is refused)."
    )
    basis = serializers.CharField(
        help_text="Where the per-turn figures come from, in words: per mode, 'from N recent "
        "turns' (the client's last 30 days) or 'typical figures' (too little history)."
    )
    per_turn = serializers.DictField(
        child=SimulationPerTurnSerializer(),
        help_text="By mode (and `customer`, `judge` for a simulated customer's and the judge's "
        "calls): the expected tokens and their basis.",
    )
    budget = SimulationBudgetSerializer()


class SimulationRunDetailSerializer(SimulationRunSerializer):
    baseline = serializers.DictField(help_text="The live configuration the baseline ran with.")
    candidate = serializers.DictField(help_text="The candidate's configuration.")
    estimate = serializers.DictField(
        help_text="What the run was estimated to use when it started (the shape of "
        "POST /api/v1/simulations/runs/estimate)."
    )
    report = serializers.DictField(
        help_text="The side-by-side report (docs/simulations.md, 'The report'); empty until "
        "the run has finished."
    )


class SimulationRunCreateSerializer(serializers.Serializer):
    name = serializers.CharField(required=False, allow_blank=True, max_length=200)
    kind = NamedChoiceField(choices=RunKind, enum_name="SimulationRunKind", default=RunKind.CASES)
    selection = serializers.DictField(
        required=False,
        default=dict,
        help_text='Cases: {"suite", "tags", "cases": [public ids or names]}; a replay: '
        '{"since", "until", "escalated_only", "with_tool", "limit"}.',
    )
    overrides = serializers.DictField(
        required=False,
        default=dict,
        help_text="The candidate's configuration: any of mode, rubric, model, "
        "refinement_iterations, deliberation_min_steps, deliberation_max_steps, "
        'deliberation_target, business_info, notes ("live" | "none" | {"approve": [ids]}), '
        "evaluation.",
    )
    compare = serializers.BooleanField(
        required=False, default=True, help_text="Run the live configuration too (baseline)."
    )


class CaseRunFilterSerializer(serializers.Serializer):
    side = serializers.ChoiceField(choices=Side.choices, required=False)
    status = serializers.ChoiceField(choices=CaseStatus.choices, required=False)


class CaseRunSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    case = serializers.UUIDField(
        source="case.public_id", allow_null=True, help_text="The case's public id (null: deleted)."
    )
    conversation = serializers.UUIDField(
        source="conversation.public_id",
        allow_null=True,
        help_text="A replay: the saved conversation replayed.",
    )
    case_name = serializers.CharField()
    side = NamedChoiceField(choices=Side, enum_name="SimulationSide")
    attempt = serializers.IntegerField()
    status = NamedChoiceField(choices=CaseStatus, enum_name="CaseRunStatus")
    passed = serializers.BooleanField(
        allow_null=True, help_text="Code-checked expectations; null = nothing to check."
    )
    judged_passed = serializers.BooleanField(
        allow_null=True, help_text="The model's opinion on the criteria, kept apart."
    )
    transcript = serializers.ListField(child=serializers.DictField())
    checks = serializers.ListField(child=serializers.DictField())
    judged = serializers.ListField(child=serializers.DictField())
    llm_calls = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    cost_usd = serializers.DecimalField(max_digits=14, decimal_places=8)
    duration_ms = serializers.IntegerField()
    error = serializers.CharField()
    finished_at = serializers.DateTimeField(allow_null=True)
