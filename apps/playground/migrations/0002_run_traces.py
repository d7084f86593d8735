"""Every playground run gets its trace: one ReasoningTrace (kind `playground`) per run, holding the
run's figures (calls, tokens, cost, timings, what the modes set) and its steps copied in order as
ReasoningSteps. The next migration drops PlaygroundStep and the run's copies of the figures."""

from django.db import migrations

TRACE_STATUS = {
    "running": "processing",
    "done": "done",
    "stopped": "stopped",
    "failed": "failed",
}
STEP_FIELDS = (
    "index",
    "name",
    "input_summary",
    "output",
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "error",
)


def runs_to_traces(apps, schema_editor):
    PlaygroundRun = apps.get_model("playground", "PlaygroundRun")
    PlaygroundStep = apps.get_model("playground", "PlaygroundStep")
    ReasoningTrace = apps.get_model("reasoning", "ReasoningTrace")
    ReasoningStep = apps.get_model("reasoning", "ReasoningStep")
    # Every client's runs (a migration is not a request): the historical managers are plain.
    for run in PlaygroundRun.objects.filter(trace__isnull=True).order_by("pk").iterator():
        trace = ReasoningTrace.objects.create(
            client_id=run.client_id,
            kind="playground",
            playground_run_id=run.pk,
            mode=run.mode,
            model=run.model,
            status=TRACE_STATUS.get(run.status, "failed"),
            critique_triggered=run.critique_triggered,
            critique_reasons=run.critique_reasons,
            context_fetched=run.context_fetched,
            escalated=run.escalated,
            tool_calls=run.tool_calls,
            llm_calls=run.llm_calls,
            prompt_tokens=run.prompt_tokens,
            completion_tokens=run.completion_tokens,
            cost_usd=run.cost_usd,
            billed_usd=run.billed_usd,
            finished_at=run.finished_at,
            duration_ms=run.duration_ms,
            llm_wait_ms=run.llm_wait_ms,
            error=run.error,
        )
        # The trace dates from its run (created_at is auto_now_add on create).
        ReasoningTrace.objects.filter(pk=trace.pk).update(
            created_at=run.created_at, updated_at=run.updated_at
        )
        steps = PlaygroundStep.objects.filter(run_id=run.pk).order_by("index")
        ReasoningStep.objects.bulk_create(
            [
                ReasoningStep(
                    client_id=step.client_id,
                    trace_id=trace.pk,
                    created_at=step.created_at,
                    updated_at=step.updated_at,
                    **{name: getattr(step, name) for name in STEP_FIELDS},
                )
                for step in steps
            ],
            batch_size=500,
        )


def traces_to_runs(apps, schema_editor):
    """Back: the steps and figures return to the runs; the playground traces go."""
    PlaygroundRun = apps.get_model("playground", "PlaygroundRun")
    PlaygroundStep = apps.get_model("playground", "PlaygroundStep")
    ReasoningTrace = apps.get_model("reasoning", "ReasoningTrace")
    ReasoningStep = apps.get_model("reasoning", "ReasoningStep")
    for trace in ReasoningTrace.objects.filter(kind="playground").order_by("pk").iterator():
        PlaygroundRun.objects.filter(pk=trace.playground_run_id).update(
            model=trace.model,
            critique_triggered=trace.critique_triggered,
            critique_reasons=trace.critique_reasons,
            context_fetched=trace.context_fetched,
            escalated=trace.escalated,
            tool_calls=trace.tool_calls,
            llm_calls=trace.llm_calls,
            prompt_tokens=trace.prompt_tokens,
            completion_tokens=trace.completion_tokens,
            cost_usd=trace.cost_usd,
            billed_usd=trace.billed_usd,
            duration_ms=trace.duration_ms,
            llm_wait_ms=trace.llm_wait_ms,
        )
        PlaygroundStep.objects.bulk_create(
            [
                PlaygroundStep(
                    client_id=step.client_id,
                    run_id=trace.playground_run_id,
                    **{name: getattr(step, name) for name in STEP_FIELDS},
                )
                for step in ReasoningStep.objects.filter(trace_id=trace.pk).order_by("index")
            ]
        )
        trace.delete()


class Migration(migrations.Migration):
    dependencies = [
        ("playground", "0001_initial"),
        ("reasoning", "0004_trace_owner"),
    ]

    operations = [migrations.RunPython(runs_to_traces, traces_to_runs)]
