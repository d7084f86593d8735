"""Client B cannot see, change, start or stop anything of client A's simulations: every
endpoint answers B's requests for A's cases and runs with the same 404 as a missing one, and
A's rows are untouched."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.urls import reverse

from apps.simulations.models import CaseRun, SimCase, SimulationRun
from tests.api.conftest import assert_error
from tests.simulations.factories_sim import case_data, make_case, make_finished_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def a_rows(client_a) -> dict[str, Any]:
    case = make_case(client_a, "only-a")
    run = make_finished_run(client_a, name="A's run")
    return {"case": case, "run": run}


def snapshot() -> dict[str, Any]:
    reason = "test checks the database directly"
    return {
        "cases": list(SimCase.objects.unscoped(reason).order_by("pk").values()),
        "runs": list(SimulationRun.objects.unscoped(reason).order_by("pk").values()),
        "case_runs": list(CaseRun.objects.unscoped(reason).order_by("pk").values()),
    }


def same_as_missing(api, method: str, name: str, a_id: Any, body: Any = None) -> None:
    call = getattr(api, method)
    kwargs = {"format": "json"} if body is not None else {}
    a_response = call(reverse(name, args=[a_id]), *([body] if body is not None else []), **kwargs)
    missing = call(
        reverse(name, args=[uuid.uuid4()]), *([body] if body is not None else []), **kwargs
    )
    assert_error(a_response, 404, "not_found")
    assert a_response.json() == missing.json()


@pytest.mark.parametrize(
    ("method", "name", "body"),
    [
        ("get", "api-simcase-detail", None),
        ("put", "api-simcase-detail", case_data("hijack")),
        ("patch", "api-simcase-detail", {"enabled": False}),
        ("delete", "api-simcase-detail", None),
    ],
)
def test_b_cannot_read_or_change_as_case(b_owner, a_rows, method, name, body):
    before = snapshot()
    same_as_missing(b_owner, method, name, a_rows["case"].public_id, body)
    assert snapshot() == before


@pytest.mark.parametrize(
    ("method", "name"),
    [
        ("get", "api-simrun-detail"),
        ("get", "api-simrun-cases"),
        ("post", "api-simrun-stop"),
    ],
)
def test_b_cannot_read_or_stop_as_run(b_owner, a_rows, method, name):
    a_rows["run"].status = "running"
    a_rows["run"].save(update_fields=["status"])
    before = snapshot()
    same_as_missing(b_owner, method, name, a_rows["run"].public_id)
    assert snapshot() == before


@pytest.mark.parametrize("name", ["api-simcase-list", "api-simrun-list"])
def test_bs_lists_hold_nothing_of_as(b_owner, a_rows, client_b, name):
    make_case(client_b, "only-b")
    make_finished_run(client_b, name="B's run")
    response = b_owner.get(reverse(name))
    assert response.status_code == 200
    text = response.content.decode()
    assert response.json()["count"] >= 1
    assert str(a_rows["case"].public_id) not in text and "only-a" not in text
    assert str(a_rows["run"].public_id) not in text and "A's run" not in text
    switched = b_owner.get(reverse(name), {"client": "acme"})
    if switched.status_code == 200:
        assert switched.content == response.content
    else:
        assert_error(switched, 403, "permission_denied")


def test_b_creating_a_case_of_the_same_name_creates_bs(b_owner, a_rows, client_b):
    before = snapshot()["cases"]
    response = b_owner.post(reverse("api-simcase-list"), case_data("only-a"), format="json")
    assert response.status_code == 201, response.content
    reason = "test checks the database directly"
    assert SimCase.objects.unscoped(reason).get(public_id=response.json()["id"]).client == client_b
    after = [row for row in snapshot()["cases"] if row["client_id"] != client_b.pk]
    assert after == before


def test_b_cannot_run_as_cases(b_owner, a_rows, client_b):
    """Naming A's case ids in B's run selects nothing of A's: no case run of A's case."""
    before = snapshot()
    response = b_owner.post(
        reverse("api-simrun-list"),
        {"selection": {"cases": [str(a_rows["case"].public_id)]}, "compare": False},
        format="json",
    )
    assert_error(response, 404)  # A's case is not one of B's: as if it did not exist
    reason = "test checks the database directly"
    assert (
        not CaseRun.objects.unscoped(reason)
        .filter(case=a_rows["case"], run__client=client_b)
        .exists()
    )
    assert snapshot()["cases"] == before["cases"]
    assert [r for r in snapshot()["case_runs"] if r["client_id"] != client_b.pk] == before[
        "case_runs"
    ]
