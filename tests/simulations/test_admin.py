"""The simulations admin: cases edited as JSON with the case format's errors shown on their
field, list filters, "Run selected cases", the New simulation form (cases or a replay preset and
a candidate configuration) and the report page — both sides, each case's change with its failed
checks and transcript, judged criteria labelled as the model's opinion, progress while running."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.urls import reverse

from apps.accounts.models import Role
from apps.simulations import services
from apps.simulations.models import RunStatus, SimCase, SimulationRun
from apps.simulations.schema import case_validate
from tests.api.conftest import make_tenant_data
from tests.factories import MembershipFactory, UserFactory
from tests.simulations.factories_sim import case_data, make_case, make_finished_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(client, client_a):
    user = MembershipFactory(client=client_a, role=Role.AGENT).user
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    from django.contrib.auth.models import Permission

    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="simulations"))
    client.force_login(user)
    return client


@pytest.fixture
def operator(client):
    client.force_login(UserFactory(is_superuser=True, is_staff=True))
    return client


def case_form(client_a: Any, **overrides: Any) -> dict[str, Any]:
    data = case_data()
    form = {
        "client": client_a.pk,
        "name": data["name"],
        "suite": data["suite"],
        "description": data["description"],
        "repeat": 1,
        "enabled": "on",
    }
    for field in ("tags", "history", "turns", "simulated", "expect", "criteria", "tools"):
        form[field] = json.dumps(data.get(field, {} if field in ("simulated", "expect") else []))
    form.update(overrides)
    return form


def test_a_case_is_added_and_an_invalid_one_shows_the_error_on_its_field(agent, client_a):
    url = reverse("admin:simulations_simcase_add")
    bad_turns = json.dumps([{"customer": "Hi", "expect": {"escalated": "maybe"}}])
    response = agent.post(url, case_form(client_a, turns=bad_turns))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert "turns" in errors and "turns[0].expect" in str(errors["turns"])
    broken_json = agent.post(url, case_form(client_a, expect="{not json"))
    assert "expect" in broken_json.context["adminform"].form.errors
    assert not SimCase.objects.unscoped("test checks the database directly").exists()

    created = agent.post(url, case_form(client_a))
    assert created.status_code == 302, created.context and created.context["adminform"].form.errors
    case = SimCase.objects.for_client(client_a).get()
    assert case.turns == case_validate(case_data())["turns"]
    change = agent.get(reverse("admin:simulations_simcase_change", args=[case.pk]))
    assert "Please cancel order TH-10042" in change.content.decode()


def test_case_list_filters_by_suite_and_tag(agent, client_a):
    make_case(client_a, "one", suite="demo", tags=["cancel"])
    make_case(client_a, "two", suite="smoke", tags=["returns"])
    url = reverse("admin:simulations_simcase_changelist")
    assert [c.name for c in agent.get(url, {"tag": "returns"}).context["cl"].result_list] == ["two"]
    assert [c.name for c in agent.get(url, {"suite": "demo"}).context["cl"].result_list] == ["one"]


def test_run_selected_cases_opens_the_new_simulation_form(agent, client_a):
    one = make_case(client_a, "one")
    two = make_case(client_a, "two")
    response = agent.post(
        reverse("admin:simulations_simcase_changelist"),
        {"action": "run_selected", "_selected_action": [one.pk, two.pk]},
    )
    assert response.status_code == 302
    form_page = agent.get(response["Location"])
    assert form_page.status_code == 200
    assert "2 cases picked on the case list" in form_page.content.decode()
    picked = form_page.context["form"]["cases"].value()
    assert set(picked.split(",")) == {str(one.public_id), str(two.public_id)}


def test_the_new_simulation_form_starts_a_replay_of_last_weeks_escalations(agent, client_a):
    make_tenant_data(client_a)  # a conversation with an escalation, today
    # The plan is adaptive: a platform operator granted deliberative (as for the playground).
    client_a.playground_modes = ["deliberative"]
    client_a.save(update_fields=["playground_modes"])
    response = agent.post(
        reverse("admin:simulations_simulationrun_add"),
        {
            "client": client_a.pk,
            "name": "Escalations vs deliberative",
            "kind": "replay",
            "preset": "last_week_escalated",
            "limit": 50,
            "mode": "deliberative",
            "evaluation": "",
            "notes": "live",
            "compare": "on",
        },
    )
    assert response.status_code == 302, response.context and response.context["form"].errors
    run = SimulationRun.objects.for_client(client_a).get()
    assert run.kind == "replay" and run.source == "admin"
    assert run.selection["escalated_only"] is True and run.selection["limit"] == 50
    assert run.total == 2  # the escalated conversation, on both sides
    assert run.candidate_overrides["mode"] == "deliberative"
    assert response["Location"] == reverse("admin:simulations_simulationrun_change", args=[run.pk])


def test_a_viewer_cannot_start_a_simulation(client, client_a):
    user = MembershipFactory(client=client_a, role=Role.VIEWER).user
    from django.contrib.auth.models import Permission

    user.user_permissions.add(*Permission.objects.all())
    client.force_login(user)
    response = client.post(
        reverse("admin:simulations_simulationrun_add"), {"client": client_a.pk, "kind": "cases"}
    )
    assert response.status_code == 403
    assert not SimulationRun.objects.unscoped("test checks the database directly").exists()


def test_the_report_shows_both_sides_changes_checks_and_the_judged_opinion(agent, client_a):
    run = make_finished_run(client_a)
    page = agent.get(reverse("admin:simulations_simulationrun_change", args=[run.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    assert "Baseline (live)" in html and "Candidate" in html
    assert 'data-case="broke-one" data-change="broke"' in html
    assert 'data-case="fixed-one" data-change="fixed"' in html
    assert "cancel_order did not run" in html
    assert "cancel_order: proposed → ran" in html
    assert "the model's opinion, not a code check" in html
    assert 'http-equiv="refresh"' not in html  # finished: no refreshing
    transcript_links = [
        reverse("admin:simulations_simulationrun_caserun", args=[run.pk, cr.pk])
        for cr in run.case_runs.all()
    ]
    assert all(link in html for link in transcript_links)
    transcript = agent.get(transcript_links[0])
    assert transcript.status_code == 200
    assert "Please cancel order TH-10042" in transcript.content.decode()
    assert "proposed for confirmation" in transcript.content.decode()


def test_a_running_run_shows_progress_and_refreshes(agent, client_a):
    run = SimulationRun.objects.create(
        client=client_a, status=RunStatus.RUNNING, total=8, completed=2
    )
    html = agent.get(reverse("admin:simulations_simulationrun_change", args=[run.pk])).content
    text = html.decode()
    assert 'id="run-progress" value="25"' in text
    assert 'http-equiv="refresh"' in text
    listing = agent.get(reverse("admin:simulations_simulationrun_changelist")).content.decode()
    assert "2/8" in listing


def test_another_clients_report_is_not_shown(agent, client_b):
    run = make_finished_run(client_b)
    page = agent.get(reverse("admin:simulations_simulationrun_change", args=[run.pk]))
    assert page.status_code in (302, 403, 404)
    case_run = run.case_runs.first()
    page = agent.get(reverse("admin:simulations_simulationrun_caserun", args=[run.pk, case_run.pk]))
    assert page.status_code in (302, 403, 404)


def test_the_candidate_may_approve_the_notes_waiting_for_review(agent, client_a):
    from apps.notes.services import note_add

    make_case(client_a, "one")
    waiting = note_add(client=client_a, type="pattern", content="Customers say hi.", source="ai")
    response = agent.post(
        reverse("admin:simulations_simulationrun_add"),
        {
            "client": client_a.pk,
            "kind": "cases",
            "suite": "demo",
            "preset": "custom",
            "limit": 100,
            "notes": "pending",
            "compare": "on",
        },
    )
    assert response.status_code == 302, response.context and response.context["form"].errors
    run = SimulationRun.objects.for_client(client_a).get()
    assert run.candidate_overrides["notes"] == {"approve": [waiting.pk]}
    waiting.refresh_from_db()
    assert waiting.status == "pending_review"  # the live note is not approved


def test_a_cases_client_cannot_be_changed_on_its_page(agent, client_a):
    case = make_case(client_a, "one")
    page = agent.get(reverse("admin:simulations_simcase_change", args=[case.pk]))
    assert 'name="client"' not in page.content.decode()


def new_simulation_form(client_a: Any, **fields: Any) -> dict[str, Any]:
    return {
        "client": client_a.pk,
        "kind": "cases",
        "preset": "last_week_escalated",
        "limit": 50,
        "evaluation": "",
        "notes": "live",
        "compare": "on",
        **fields,
    }


def test_the_new_simulation_form_shows_the_budget_and_the_estimate(agent, client_a):
    case = make_case(client_a, "one")  # two customer turns, judged criteria
    url = reverse("admin:simulations_simulationrun_add")
    page = agent.get(url).content.decode()
    assert 'id="simulation-budget"' in page
    assert "0 of 2,000,000 tokens used" in page
    estimated = agent.post(url, new_simulation_form(client_a, _estimate="1"))
    assert estimated.status_code == 200
    page = estimated.content.decode()
    # 2 turns × 2 sides × an adaptive turn's typical tokens (no history yet; the form's
    # evaluation is off), and the judge's call per case run; the basis is said
    assert case.criteria
    typical = services.TYPICAL_TURN_TOKENS["adaptive"][0]
    expected = 4 * typical + 2 * services.TYPICAL_JUDGE_CALL_TOKENS
    assert 'id="simulation-estimate"' in page and f"about {expected:,} tokens" in page
    assert f"Expected per turn — adaptive: {typical:,} tokens a turn, typical figures." in page
    assert not SimulationRun.objects.unscoped("test checks the database directly").exists()


def test_the_new_simulation_form_refuses_what_the_plan_does_not_allow(agent, client_a):
    make_case(client_a, "one")
    url = reverse("admin:simulations_simulationrun_add")
    response = agent.post(url, new_simulation_form(client_a, mode="deliberative"))
    assert response.status_code == 200
    errors = " ".join(response.context["form"].non_field_errors())
    assert "deliberative mode is not included in the plan" in errors
    unpriced = agent.post(url, new_simulation_form(client_a, model="gpt-rt-premium-unpriced"))
    assert "gpt-rt-premium-unpriced has no price" in " ".join(
        unpriced.context["form"].non_field_errors()
    )
    client_a.plan.simulation_monthly_tokens = 1_000
    client_a.plan.save(update_fields=["simulation_monthly_tokens"])
    too_big = agent.post(url, new_simulation_form(client_a))
    assert "simulation budget" in " ".join(too_big.context["form"].non_field_errors())
    assert not SimulationRun.objects.unscoped("test checks the database directly").exists()
