"""GET /api/v1/outcomes/ — roles, tenancy, validation and the CSV form."""

from __future__ import annotations

import csv
import io

import pytest

from apps.accounts.models import Role
from apps.escalations.models import EscalationReason
from tests.conftest import key_for, session_for
from tests.outcomes.conftest import at, make_conversation

pytestmark = pytest.mark.django_db

URL = "/api/v1/outcomes/"
PERIOD = "?start=2026-03-10&end=2026-03-11"


@pytest.fixture
def conversations(client_a, client_b):
    make_conversation(client_a, score=5, cost="0.02", billed="0.04")
    make_conversation(client_a, handoff=EscalationReason.CUSTOMER_REQUEST, cost="0.02")
    make_conversation(client_a, started=at(days=1), score=2)
    # Client B: many more, all rated 1 — none of it may show in A's report.
    for _ in range(4):
        make_conversation(client_b, score=1, cost="9")


@pytest.mark.parametrize("kind", ["api_key", "session"])
@pytest.mark.parametrize("role", [Role.VIEWER, Role.AGENT, Role.ADMIN, Role.OWNER])
def test_every_role_reads_outcomes_only_admins_see_money(client_a, conversations, kind, role):
    api = key_for(client_a, role) if kind == "api_key" else session_for(client_a, role)
    response = api.get(URL + PERIOD + "&group_by=day")
    assert response.status_code == 200, response.content
    body = response.json()
    totals = body["totals"]
    assert body["client"] == "acme"
    assert (totals["conversations"], totals["resolved"], totals["handed_off"]) == (3, 1, 1)
    assert (totals["ratings"], totals["csat"], totals["rating_average"]) == (2, 0.5, 3.5)
    assert totals["handoff_reasons"] == {"customer_request": 1}
    assert [group["key"] for group in body["groups"]] == ["2026-03-10", "2026-03-11"]
    if role in (Role.ADMIN, Role.OWNER):
        assert body["money_shown"] is True
        assert totals["cost_usd"] == "0.04000000"
        assert totals["cost_per_resolved_usd"] == "0.04000000"
        assert totals["billed_per_resolved_usd"] == "0.04000000"
    else:
        assert body["money_shown"] is False
        assert totals["cost_usd"] is None
        assert totals["cost_per_resolved_usd"] is None


def test_client_b_sees_only_its_own_figures(client_b, conversations):
    body = key_for(client_b, Role.OWNER).get(URL + PERIOD).json()
    assert body["client"] == "globex"
    assert body["totals"]["conversations"] == 4
    assert body["totals"]["csat"] == 0.0


def test_an_api_key_cannot_name_another_client(client_a, client_b, conversations):
    response = key_for(client_b, Role.OWNER).get(URL + PERIOD + "&client=acme")
    assert response.status_code == 403
    assert "conversations" not in response.json()


def test_a_session_naming_a_client_it_is_no_member_of_gets_nothing(client_a, client_b):
    api = session_for(client_b, Role.OWNER)
    response = api.get(URL + PERIOD + "&client=acme")
    assert response.status_code == 403
    assert "totals" not in response.json()


def test_unauthenticated_is_401(api):
    assert api.get(URL).status_code == 401


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("?start=2026-03-12&end=2026-03-10", "start"),
        ("?start=not-a-day", "start"),
        ("?start=2024-01-01&end=2026-01-01", "end"),
        ("?group_by=model", "group_by"),
    ],
)
def test_a_bad_query_is_a_400_naming_the_parameter(client_a, query, field):
    response = key_for(client_a, Role.VIEWER).get(URL + query)
    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]


def test_csv_has_a_row_per_day_and_a_total(client_a, conversations):
    response = key_for(client_a, Role.ADMIN).get(URL + PERIOD + "&group_by=day&format=csv")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert "outcomes-acme-2026-03-10-2026-03-11-day.csv" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [row["day"] for row in rows] == ["2026-03-10", "2026-03-11", "TOTAL"]
    assert rows[0]["conversations"] == "2"
    assert rows[0]["handoff_reasons"] == "customer_request:1"
    assert rows[2]["resolved"] == "1"
    assert rows[2]["cost_usd"] == "0.04000000"


def test_csv_errors_stay_json(client_a):
    response = key_for(client_a, Role.ADMIN).get(URL + "?start=bad&format=csv")
    assert response.status_code == 400
    assert response.json()["error"]["fields"]["start"]
