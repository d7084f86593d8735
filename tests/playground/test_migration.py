"""The migration that gives every playground run its trace: each run's figures and its steps
(same order, names, outputs, tokens, latency, errors) end up on one ReasoningTrace of kind
`playground`, and PlaygroundStep is gone. Run on an empty database of its own along the graph
these apps need (tests/support/migrations.py, `scratch_database`): migrate to before, store runs
the old way, migrate forward."""

from __future__ import annotations

from decimal import Decimal

from tests.support.migrations import migrate

BEFORE = [("playground", "0001_initial"), ("reasoning", "0003_trace_progress")]
AFTER = [("playground", "0003_run_figures_on_trace")]


def test_runs_and_their_steps_move_onto_traces(scratch_database):
    old = migrate(BEFORE, using=scratch_database)
    plan = old.get_model("clients", "Plan").objects.create(slug="runs", name="Runs")
    OldClient = old.get_model("clients", "Client")
    client = OldClient.objects.create(name="Old runs", slug="old-runs", plan=plan)
    other = OldClient.objects.create(name="Other runs", slug="other-runs", plan=plan)
    Run = old.get_model("playground", "PlaygroundRun")
    Step = old.get_model("playground", "PlaygroundStep")
    done = Run.objects.create(
        client_id=client.pk,
        mode="deliberative",
        question="Can I return my boots?",
        status="done",
        model="gpt-4o-mini",
        critique_triggered=True,
        critique_reasons=["low confidence"],
        context_fetched=["policies"],
        escalated=True,
        tool_calls=1,
        llm_calls=2,
        prompt_tokens=300,
        completion_tokens=40,
        cost_usd=Decimal("0.0012"),
        billed_usd=Decimal("0.0030"),
        duration_ms=1500,
        llm_wait_ms=1200,
        progress_step=2,
        progress_max=10,
        final={"replies": [{"text": "Yes.", "kind": "text", "data": {}}]},
    )
    stopped = Run.objects.create(
        client_id=other.pk, mode="standard", question="Hi", status="stopped"
    )
    recorded = [
        ("reason_step", {"step": 1, "max_steps": 10, "mean": 0.5}, 120, 100, 20, ""),
        ("feedback", {"step": 1, "feedback": "Cite the policy."}, 80, 200, 20, ""),
        ("improve", {}, 5, 0, 0, "timeout: no answer"),
    ]
    # stored out of order: the copy keeps the run's order by index
    for index in (2, 0, 1):
        name, output, latency, prompt, completion, error = recorded[index]
        Step.objects.create(
            client_id=client.pk,
            run_id=done.pk,
            index=index,
            name=name,
            input_summary=f"input {index}",
            output=output,
            latency_ms=latency,
            prompt_tokens=prompt,
            completion_tokens=completion,
            error=error,
        )

    new = migrate(AFTER, using=scratch_database)
    Trace = new.get_model("reasoning", "ReasoningTrace")
    ReasoningStep = new.get_model("reasoning", "ReasoningStep")
    assert "playgroundstep" not in {m._meta.model_name for m in new.get_models()}
    assert Trace.objects.count() == 2

    trace = Trace.objects.get(playground_run_id=done.pk)
    assert (trace.kind, trace.client_id, trace.mode, trace.model, trace.status) == (
        "playground",
        client.pk,
        "deliberative",
        "gpt-4o-mini",
        "done",
    )
    assert (trace.conversation_id, trace.user_message_id) == (None, None)
    assert (trace.llm_calls, trace.prompt_tokens, trace.completion_tokens) == (2, 300, 40)
    assert (trace.cost_usd, trace.billed_usd) == (Decimal("0.0012"), Decimal("0.0030"))
    assert (trace.duration_ms, trace.llm_wait_ms, trace.tool_calls) == (1500, 1200, 1)
    assert trace.critique_triggered and trace.escalated
    assert (trace.critique_reasons, trace.context_fetched) == (["low confidence"], ["policies"])
    steps = list(ReasoningStep.objects.filter(trace_id=trace.pk).order_by("index"))
    assert [
        (s.index, s.name, s.output, s.latency_ms, s.prompt_tokens, s.completion_tokens, s.error)
        for s in steps
    ] == [(i, *recorded[i]) for i in range(3)]
    assert [s.input_summary for s in steps] == ["input 0", "input 1", "input 2"]
    assert {s.client_id for s in steps} == {client.pk}

    other_trace = Trace.objects.get(playground_run_id=stopped.pk)
    assert (other_trace.client_id, other_trace.status) == (other.pk, "stopped")
    assert not ReasoningStep.objects.filter(trace_id=other_trace.pk).exists()

    # what stays on the run: what is about the run
    run = new.get_model("playground", "PlaygroundRun").objects.get(pk=done.pk)
    assert (run.progress_step, run.progress_max, run.status) == (2, 10, "done")
    assert run.final["replies"][0]["text"] == "Yes."
    assert not hasattr(run, "llm_calls")
