"""Runs: the candidate configuration (in-memory copies; a model override for its calls only),
progress and the report, budget exhaustion, stop, idempotent jobs, determinism and tenancy."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from apps.billing.services.simulations import simulation_budget_add
from apps.core.exceptions import ApplicationError
from apps.core.tenancy import tenant_scope
from apps.notes.models import Note, NoteStatus, NoteType
from apps.reasoning.models import ReasoningTrace
from apps.simulations import services
from apps.simulations.config import config_validate_overrides, live_config
from apps.simulations.models import CaseRun, CaseStatus, RunStatus, Side, SimulationRun
from tests.factories import ClientFactory, ModelPriceFactory
from tests.simulations.conftest import UNSCOPED, live_rows, make_case, run_now
from tests.support.shop import assess, make_shop

pytestmark = pytest.mark.django_db

HOURS = assess(response="We're open Mon-Fri 9-17.", confidence=9)


def test_the_model_override_reaches_the_server_for_the_candidate_only(shop, llm, webhook):
    make_case(shop, "hours", turns=[{"customer": "When are you open?"}])
    llm.default("assess", HOURS)
    ModelPriceFactory(model="gpt-candidate-x")  # a model without a price is refused
    run = run_now(shop, overrides={"model": "gpt-candidate-x"})
    assert run.status == RunStatus.DONE
    models = [call.model for call in llm.calls("assess")]
    # Case runs go in (case, side, attempt) order: the baseline first.
    assert models == ["gpt-4o-mini", "gpt-candidate-x"]
    assert run.baseline["model"] == "gpt-4o-mini"
    assert run.candidate["model"] == "gpt-candidate-x"
    traces = ReasoningTrace.objects.unscoped(UNSCOPED).order_by("pk")
    assert all(t.kind == "simulation" for t in traces)


def test_a_candidate_run_never_changes_the_live_client_or_plan(shop, llm, webhook):
    make_case(shop, "hours", turns=[{"customer": "When are you open?"}])
    llm.default("assess", HOURS)
    long_answer = (
        "We're open Monday to Friday from 9 in the morning to 5 in the afternoon, and our "
        "support team answers messages within one working day."
    )
    llm.default("respond", {"response": long_answer, "confidence": 9})
    llm.default("evaluate", {"valid": True, "evaluation": "Supported by the hours."})
    plan_before = copy.copy(shop.plan.__dict__)
    info_before = copy.deepcopy(shop.business_info)
    overrides = {
        "mode": "standard",
        "evaluation": True,
        "business_info": {"about": {"description": "Another shop."}},
        "refinement_iterations": 0,
    }
    run = run_now(shop, overrides=overrides)
    assert run.status == RunStatus.DONE, run.error
    assert run.candidate["mode"] == "standard" and run.candidate["evaluation"] is True
    assert run.baseline["mode"] == "adaptive"
    shop.refresh_from_db()
    shop.plan.refresh_from_db()
    assert shop.business_info == info_before
    assert shop.plan.ai_mode == plan_before["ai_mode"] == "adaptive"
    assert shop.plan.evaluation_enabled == plan_before["evaluation_enabled"]
    assert shop.plan.deliberation == plan_before["deliberation"]
    # The candidate's standard turn ran `respond`; the baseline's adaptive one `assess`.
    assert len(llm.calls("respond")) == 1 and len(llm.calls("assess")) == 1
    assert live_config(client=shop)["mode"] == "adaptive"
    candidate = CaseRun.objects.unscoped(UNSCOPED).get(run=run, side=Side.CANDIDATE)
    assert candidate.transcript[0]["evaluation"] == "validated"  # the candidate's evaluation on
    assert len(llm.calls("evaluate")) == 1


def test_overrides_are_validated(shop):
    with pytest.raises(ApplicationError) as caught:
        config_validate_overrides(client=shop, overrides={"mode": "psychic"})
    assert "overrides.mode" in caught.value.extra["fields"]
    with pytest.raises(ApplicationError):
        config_validate_overrides(client=shop, overrides={"colour": "blue"})
    with pytest.raises(ApplicationError):
        config_validate_overrides(client=shop, overrides={"notes": {"approve": [999999]}})
    with pytest.raises(ApplicationError):
        config_validate_overrides(
            client=shop, overrides={"deliberation_min_steps": 5, "deliberation_max_steps": 2}
        )
    assert config_validate_overrides(client=shop, overrides={"notes": "none"}) == {"notes": "none"}


def test_notes_approved_only_for_the_candidate(shop, llm, webhook):
    shop.plan.notes_enabled = True
    shop.plan.notes_prompt_budget_tokens = 500
    shop.plan.save()
    note = Note.objects.create(
        client=shop,
        content="Customers asking about TH- orders want the tracking link.",
        status=NoteStatus.PENDING_REVIEW,
        type=NoteType.TIP,
        language="en",
    )
    make_case(shop, "hours", turns=[{"customer": "When are you open?"}])
    llm.default("assess", HOURS)
    run = run_now(shop, overrides={"notes": {"approve": [note.pk]}})
    assert run.status == RunStatus.DONE, run.error
    baseline, candidate = llm.calls("assess")
    assert "tracking link" not in baseline.prompt_text
    assert "tracking link" in candidate.prompt_text
    note.refresh_from_db()
    assert note.status == NoteStatus.PENDING_REVIEW  # never approved for real


def test_an_exhausted_simulation_budget_ends_the_run_with_an_error(shop, llm, webhook):
    make_case(shop, "a", turns=[{"customer": "When are you open?"}])
    make_case(shop, "b", turns=[{"customer": "Do you ship abroad?"}])
    run = services.simulation_run_create(
        client=shop, source="cli", selection={}, enqueue=False
    )  # admitted: its estimate fits the simulation budget
    # Meanwhile another run used up the month's simulation budget.
    simulation_budget_add(client=shop, tokens=shop.plan.simulation_monthly_tokens)
    with tenant_scope(shop.pk):
        services.simulation_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert "simulation budget reached" in run.error
    assert llm.calls() == []
    statuses = set(CaseRun.objects.unscoped(UNSCOPED).values_list("status", flat=True))
    assert statuses == {CaseStatus.ERROR}
    assert run.completed == run.total == 4
    assert run.report  # the report is still built


def test_stop_ends_the_queued_case_runs(shop, llm, webhook):
    llm.default("assess", HOURS)
    make_case(shop, "a", turns=[{"customer": "When are you open?"}])
    make_case(shop, "b", turns=[{"customer": "Do you ship abroad?"}])
    run = services.simulation_run_create(
        client=shop, source="cli", selection={}, compare=False, enqueue=False
    )
    first = CaseRun.objects.unscoped(UNSCOPED).filter(run=run).order_by("case_name").first()
    with tenant_scope(shop.pk):
        services.caserun_execute(case_run_id=first.pk)
        assert services.simulation_run_stop(client=shop, run=run) is True
        services.simulation_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.STOPPED and run.completed == run.total == 2
    statuses = dict(CaseRun.objects.unscoped(UNSCOPED).values_list("case_name", "status"))
    assert statuses == {"a": CaseStatus.PASSED, "b": CaseStatus.STOPPED}
    assert len(llm.calls("assess")) == 1
    assert services.simulation_run_stop(client=shop, run=run) is False  # already finished


def test_a_stop_during_a_case_ends_it_before_the_next_call(shop, llm, webhook, monkeypatch):
    make_case(
        shop, "long", turns=[{"customer": "When are you open?"}, {"customer": "And Sundays?"}]
    )
    run = services.simulation_run_create(
        client=shop, source="cli", selection={}, compare=False, enqueue=False
    )

    llm.default("assess", HOURS)
    original = services._CaseRunner._turn

    def turn_then_stop(self, *args, **kwargs):
        entry = original(self, *args, **kwargs)
        services.SimulationRun.objects.unscoped(UNSCOPED).filter(pk=run.pk).update(
            stop_requested=True
        )
        return entry

    monkeypatch.setattr(services._CaseRunner, "_turn", turn_then_stop)
    with tenant_scope(shop.pk):
        services.simulation_run_execute(run_id=run.pk)
    run.refresh_from_db()
    case_run = CaseRun.objects.unscoped(UNSCOPED).get(run=run)
    assert case_run.status == CaseStatus.STOPPED
    assert len(llm.calls("assess")) == 1
    assert run.status == RunStatus.STOPPED
    assert case_run.transcript[0]["customer"] == "When are you open?"


def test_a_redelivered_job_finds_its_case_run_claimed(shop, llm, webhook):
    llm.default("assess", HOURS)
    make_case(shop, "a", turns=[{"customer": "When are you open?"}])
    run = services.simulation_run_create(
        client=shop, source="cli", selection={}, compare=False, enqueue=False
    )
    case_run = CaseRun.objects.unscoped(UNSCOPED).get(run=run)
    with tenant_scope(shop.pk):
        assert services.caserun_execute(case_run_id=case_run.pk) is not None
        assert services.caserun_execute(case_run_id=case_run.pk) is None
    run.refresh_from_db()
    assert run.completed == 1 and run.status == RunStatus.DONE
    assert len(llm.calls("assess")) == 1


def test_enqueued_runs_go_through_the_task_path(
    shop, llm, webhook, django_capture_on_commit_callbacks
):
    llm.default("assess", HOURS)
    make_case(shop, "a", turns=[{"customer": "When are you open?"}], repeat=2)
    with django_capture_on_commit_callbacks(execute=True):
        run = services.simulation_run_create(client=shop, source="api", selection={})
    run.refresh_from_db()
    assert run.status == RunStatus.DONE and run.total == run.completed == 4
    sides = sorted(CaseRun.objects.unscoped(UNSCOPED).values_list("side", "attempt"))
    assert sides == [
        (Side.BASELINE, 1),
        (Side.BASELINE, 2),
        (Side.CANDIDATE, 1),
        (Side.CANDIDATE, 2),
    ]


def _stable(value):
    """A transcript or report without what changes between runs (timings, ids)."""
    if isinstance(value, dict):
        return {
            k: _stable(v)
            for k, v in value.items()
            if k not in {"latency_ms", "trace", "duration_ms"} and "latency" not in k
        }
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def test_the_same_model_gives_the_same_report_twice(db, settings):
    """The offline demo model (deterministic): two runs, the same transcripts and report."""
    settings.OPENAI_API_KEY = ""
    shop = make_shop("adaptive", "http://127.0.0.1:9/hook", slug="det-shop")
    make_case(shop, "hours", turns=[{"customer": "When are you open?"}])
    make_case(
        shop,
        "cancel",
        turns=[{"customer": "Please cancel order TH-12345"}, {"customer": "Yes, cancel it"}],
        tools={"cancel_order": {"ok": True, "result": {"cancelled": True}}},
    )
    first = run_now(shop, overrides={"mode": "standard"})
    second = run_now(shop, overrides={"mode": "standard"})
    assert first.status == second.status == RunStatus.DONE

    def transcripts(run):
        rows = (
            CaseRun.objects.unscoped(UNSCOPED)
            .filter(run=run)
            .order_by("case_name", "side", "attempt")
        )
        return [_stable(r.transcript) for r in rows]

    assert transcripts(first) == transcripts(second)
    assert _stable(first.report) == _stable(second.report)


def test_a_run_never_reads_another_clients_cases_or_conversations(shop, llm, webhook, chat):
    other = ClientFactory(slug="other-shop")
    theirs = make_case(other, "theirs", turns=[{"customer": "Hi"}])
    llm.default("assess", HOURS)
    chat.say("When are you open?")  # a conversation of `shop`
    before = live_rows()
    with pytest.raises(ApplicationError) as caught:
        services.simulation_run_create(
            client=other,
            source="cli",
            selection={"cases": [str(make_case(shop, "mine").public_id)]},
        )
    assert caught.value.status == 404
    conversation = chat.conversation
    with pytest.raises(ApplicationError) as caught:
        services.simulation_run_create(
            client=other,
            source="cli",
            kind="replay",
            selection={"conversations": [str(conversation.public_id)]},
        )
    assert caught.value.status == 404
    with pytest.raises(ApplicationError):  # `other` has no saved conversation to replay
        services.simulation_run_create(client=other, source="cli", kind="replay", selection={})
    run = run_now(other, compare=False)
    assert list(
        CaseRun.objects.unscoped(UNSCOPED).filter(run=run).values_list("case_id", flat=True)
    ) == [theirs.pk]
    assert live_rows() == before


def _one_case_not_queued(shop: Any, llm: Any, *, source: str) -> tuple[SimulationRun, Any]:
    """A run of one case whose case run is created but not queued: the run and its case runs."""
    llm.default("assess", HOURS)
    make_case(shop, "a", turns=[{"customer": "When are you open?"}])
    run = services.simulation_run_create(
        client=shop, source=source, selection={}, compare=False, enqueue=False
    )
    return run, CaseRun.objects.unscoped(UNSCOPED).filter(run=run)


def test_a_case_run_whose_worker_died_is_taken_over_after_the_lease(shop, llm, webhook):
    from datetime import timedelta

    from django.utils import timezone

    run, rows = _one_case_not_queued(shop, llm, source="cli")
    rows.update(status=CaseStatus.RUNNING, updated_at=timezone.now())
    case_run = rows.get()
    with tenant_scope(shop.pk):
        assert services.caserun_execute(case_run_id=case_run.pk) is None  # alive: left alone
        rows.update(updated_at=timezone.now() - timedelta(hours=1))
        assert services.caserun_execute(case_run_id=case_run.pk) is not None
    run.refresh_from_db()
    assert run.status == RunStatus.DONE and run.completed == 1


def test_the_worker_task_runs_one_case_run_through_the_slots(shop, llm, webhook):
    from apps.simulations import tasks

    run, rows = _one_case_not_queued(shop, llm, source="api")
    case_run = rows.get()
    tasks.execute_case_run.delay(case_run.pk, client_id=shop.pk)
    tasks.execute_case_run.delay(case_run.pk, client_id=shop.pk)  # redelivered: nothing to do
    run.refresh_from_db()
    assert run.status == RunStatus.DONE and run.completed == 1
    assert len(llm.calls("assess")) == 1


def test_selectors_stay_within_the_client(shop):
    from apps.simulations.selectors import simcase_list, simulation_run_get, simulation_run_list

    other = ClientFactory(slug="other-shop")
    make_case(shop, "a", tags=["cancel"], suite="demo")
    make_case(shop, "b", tags=["returns"], suite="demo")
    make_case(other, "c", tags=["cancel"], suite="demo")
    assert [c.name for c in simcase_list(client=shop, tags=["cancel"])] == ["a"]
    assert [c.name for c in simcase_list(client=shop, suite="demo")] == ["a", "b"]
    run = services.simulation_run_create(client=shop, source="cli", selection={}, enqueue=False)
    assert simulation_run_get(client=other, public_id=run.public_id) is None
    assert simulation_run_get(client=shop, public_id="not-a-uuid") is None
    assert simulation_run_get(client=shop, public_id=run.public_id) == run
    assert list(simulation_run_list(client=other)) == []
    assert list(simulation_run_list(client=shop)) == [run]
