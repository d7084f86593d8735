"""The simulations API: test cases (CRUD with the case format's errors, filters), runs (start,
detail with progress and the report, stop) and a run's case runs with transcripts and checks."""

from __future__ import annotations

import uuid

import pytest
from django.urls import reverse

from apps.simulations.models import RunStatus, SimulationRun
from tests.api.conftest import assert_error
from tests.simulations.factories_sim import case_data, case_rows, make_case, make_finished_run

pytestmark = pytest.mark.django_db


def db_cases(client):
    return case_rows(client, "enabled", "updated_at")


def test_create_read_replace_patch_delete(agent_a, client_a):
    created = agent_a.post(reverse("api-simcase-list"), case_data(), format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["name"] == "cancel-confirmed" and body["suite"] == "demo"
    url = reverse("api-simcase-detail", args=[body["id"]])
    assert agent_a.get(url).json() == body

    replaced = agent_a.put(url, case_data(suite="smoke", tags=["x"]), format="json")
    assert replaced.status_code == 200, replaced.content
    assert replaced.json()["suite"] == "smoke" and replaced.json()["tags"] == ["x"]

    patched = agent_a.patch(url, {"enabled": False}, format="json")
    assert patched.status_code == 200
    assert patched.json()["enabled"] is False
    assert patched.json()["turns"] == replaced.json()["turns"]

    assert agent_a.delete(url).status_code == 204
    assert db_cases(client_a) == []
    assert_error(agent_a.get(url), 404, "not_found")


def test_an_invalid_case_is_a_400_naming_the_place(agent_a, client_a):
    data = case_data()
    data["turns"][0]["expect"]["tool_called"] = {"params": {"order_id": "TH-1"}}  # no name
    error = assert_error(agent_a.post(reverse("api-simcase-list"), data, format="json"), 400)
    assert any(path.startswith("turns[0].expect") for path in error["fields"]), error
    assert db_cases(client_a) == []
    not_object = agent_a.post(reverse("api-simcase-list"), ["a"], format="json")
    assert_error(not_object, 400)


def test_a_duplicate_name_is_a_400(agent_a, client_a):
    make_case(client_a)
    error = assert_error(agent_a.post(reverse("api-simcase-list"), case_data(), format="json"), 400)
    assert "name" in error["fields"]


def test_list_filters_by_suite_and_tag(viewer_a, client_a):
    make_case(client_a, "one", suite="demo", tags=["cancel"])
    make_case(client_a, "two", suite="demo", tags=["returns"])
    make_case(client_a, "three", suite="smoke", tags=["cancel"])
    url = reverse("api-simcase-list")

    def names(**query):
        response = viewer_a.get(url, query)
        assert response.status_code == 200, response.content
        return sorted(case["name"] for case in response.json()["results"])

    assert names() == ["one", "three", "two"]
    assert names(suite="demo") == ["one", "two"]
    assert names(tag="cancel") == ["one", "three"]
    assert names(suite="demo", tag="cancel") == ["one"]
    assert_error(viewer_a.get(url, {"suite": "not a slug!"}), 400)


def test_a_malformed_id_is_a_404_not_a_500(viewer_a):
    for name in ("api-simcase-detail", "api-simrun-detail", "api-simrun-cases"):
        assert_error(viewer_a.get(reverse(name, args=["nope"])), 404, "not_found")
        assert_error(viewer_a.get(reverse(name, args=[uuid.uuid4()])), 404, "not_found")


def test_run_detail_has_progress_and_the_report(viewer_a, client_a):
    run = make_finished_run(client_a)
    body = viewer_a.get(reverse("api-simrun-detail", args=[run.public_id])).json()
    assert body["status"] == "done"
    assert body["progress"] == {"total": 4, "completed": 4, "percent": 100}
    assert body["report"]["summary"] == {
        "fixed": 1,
        "broke": 1,
        "unchanged_pass": 0,
        "unchanged_fail": 0,
    }
    assert body["overrides"] == {"mode": "deliberative"}
    listed = viewer_a.get(reverse("api-simrun-list")).json()
    assert [r["id"] for r in listed["results"]] == [str(run.public_id)]
    assert "report" not in listed["results"][0]  # the list stays light


def test_case_runs_carry_transcripts_and_checks(viewer_a, client_a):
    run = make_finished_run(client_a)
    url = reverse("api-simrun-cases", args=[run.public_id])
    every = viewer_a.get(url).json()
    assert every["count"] == 4
    failed = viewer_a.get(url, {"side": "candidate", "status": "failed"}).json()["results"]
    assert [(r["case_name"], r["side"]) for r in failed] == [("broke-one", "candidate")]
    assert failed[0]["checks"][0]["expect"] == "tool_called"
    assert failed[0]["transcript"][0]["tools_proposed"][0]["name"] == "cancel_order"
    assert_error(viewer_a.get(url, {"side": "both"}), 400)


def test_stopping_a_finished_run_changes_nothing(agent_a, client_a):
    run = make_finished_run(client_a)
    response = agent_a.post(reverse("api-simrun-stop", args=[run.public_id]))
    assert response.status_code == 200
    assert response.json()["status"] == "done"
    run.refresh_from_db()
    assert run.status == RunStatus.DONE


def test_stopping_a_queued_run_stops_it(agent_a, client_a):
    run = SimulationRun.objects.create(client=client_a, status=RunStatus.QUEUED, total=2)
    response = agent_a.post(reverse("api-simrun-stop", args=[run.public_id]))
    assert response.status_code == 200
    run.refresh_from_db()
    assert run.stop_requested or run.status == RunStatus.STOPPED


def test_a_run_starts_from_the_api(agent_a, client_a):
    make_case(client_a, "one")
    response = agent_a.post(
        reverse("api-simrun-list"),
        {"name": "API run", "selection": {"suite": "demo"}, "overrides": {}, "compare": False},
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    run = SimulationRun.objects.unscoped("test checks the database directly").get(
        public_id=body["id"]
    )
    assert run.client == client_a and run.source == "api" and run.name == "API run"
    assert run.compare is False
    assert body["progress"]["total"] == run.total


def test_bad_overrides_are_a_400_and_start_nothing(agent_a, client_a):
    response = agent_a.post(
        reverse("api-simrun-list"), {"overrides": {"mode": "no-such-mode"}}, format="json"
    )
    assert_error(response, 400)
    assert not SimulationRun.objects.unscoped("test checks the database directly").exists()
