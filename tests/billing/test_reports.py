"""GET /api/v1/billing/usage/ — totals equal the sum of the usage records (JSON and CSV), every
group_by, date validation, tenancy."""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import pytest

from apps.accounts.models import Role
from apps.accounts.services import api_key_issue
from apps.billing import periods
from apps.billing.models import UsageRecord
from apps.billing.renderers import FIGURES
from apps.billing.services import usage_record_create
from apps.reasoning.models import ReasoningTrace
from tests.billing.conftest import Call, make_turn
from tests.conftest import api_for
from tests.factories import ClientFactory, MembershipFactory, PlanFactory, UserFactory

pytestmark = pytest.mark.django_db
URL = "/api/v1/billing/usage/"


def days_ago(n: int) -> date:
    return periods.today() - timedelta(days=n)


@pytest.fixture
def acme(prices):
    plan = PlanFactory(slug="pro-plan", ai_mode="adaptive", included_turns=2)
    return ClientFactory(slug="acme", name="Acme", plan=plan)


@pytest.fixture
def globex(prices):
    return ClientFactory(slug="globex", name="Globex", plan=PlanFactory(slug="globex-plan"))


@pytest.fixture
def usage(acme, globex) -> dict[str, Any]:
    """Acme: adaptive turns over several days (simple, context, risky with critique, one call on
    another model), a standard-mode turn, a turn started just before midnight whose call landed
    after it, a usage record whose turn was deleted, and today's turn. Globex: noise."""
    d1, d2 = days_ago(9), days_ago(3)
    make_turn(acme, day=d1, calls=[Call("assess", 500, 80)])
    make_turn(acme, day=d1, calls=[Call("assess", 500, 60), Call("assess", 900, 70)])
    make_turn(
        acme,
        day=d1,
        critique=True,
        calls=[Call("assess", 600, 90), Call("critique", 400, 50, model="gpt-4o")],
    )
    make_turn(acme, day=d2, mode="standard", calls=[Call("respond", 3000, 60)])
    make_turn(acme, day=d2, hour=23, minute=59, call_lag_minutes=2, calls=[Call("assess", 410, 41)])
    orphan = make_turn(acme, day=d2, calls=[Call("assess", 333, 33)])
    ReasoningTrace.objects.unscoped("test checks the database directly").filter(
        pk=orphan.pk
    ).delete()  # its conversation was deleted
    make_turn(acme, day=periods.today(), hour=0, calls=[Call("assess", 450, 70)], critique=True)
    make_turn(globex, day=d1, calls=[Call("assess", 99_999, 9_999)])
    return {"d1": d1, "d2": d2}


def expected(client: Any, start: date, end: date, key: Any = None) -> dict[str, Any]:
    """The same figures computed naively from the records (day = the turn's start)."""
    figures: dict[str, Any] = defaultdict(lambda: defaultdict(int))
    for record in UsageRecord.objects.filter(client=client).select_related("trace"):
        started = record.trace.created_at if record.trace else record.created_at
        day = started.astimezone(periods.day_start(start).tzinfo).date()
        if not start <= day <= end:
            continue
        for bucket in {"total", key(record, day) if key else "total"}:
            row = figures[bucket]
            row["llm_calls"] += 1
            row["prompt_tokens"] += record.prompt_tokens
            row["completion_tokens"] += record.completion_tokens
            row["cost_usd"] += record.cost_usd
            row["billed_usd"] += record.billed_usd
            if record.trace_id:
                row.setdefault("traces", set()).add(record.trace_id)
    return figures


def money(value: Decimal) -> str:
    return f"{value:.8f}"


@pytest.fixture
def api_a(acme):
    return api_for(api_key_issue(client=acme, name="back-office")[1])


def test_totals_equal_the_sum_of_the_usage_records(api_a, acme, usage) -> None:
    start, end = days_ago(30), periods.today()
    response = api_a.get(URL, {"start": start, "end": end})
    assert response.status_code == 200, response.json()
    body = response.json()
    total = expected(acme, start, end)["total"]
    assert body["client"] == "acme"
    assert body["start"] == start.isoformat() and body["end"] == end.isoformat()
    assert body["totals"] == {
        "turns": 6,  # every turn with a call; the orphan record has no turn any more
        "llm_calls": total["llm_calls"],
        "prompt_tokens": total["prompt_tokens"],
        "completion_tokens": total["completion_tokens"],
        "cost_usd": money(total["cost_usd"]),
        "billed_usd": money(total["billed_usd"]),
        "critique_triggered": 2,
        "critique_rate": 0.3333,
        "evaluation_validated": 0,
        "evaluation_questioned": 0,
        "evaluation_improved": 0,
        "evaluation_kept": 0,
        "evaluation_failed": 0,
        "cached_tokens": 0,
        "cached_share": 0.0,
        "deliberated": 0,
        "deliberated_low_confidence": 0,
        "deliberated_complaint": 0,
        "deliberated_critique_escalate": 0,
        "deliberated_evaluation_questioned": 0,
    }
    assert total["llm_calls"] == 9
    assert sum(g["llm_calls"] for g in body["groups"]) == total["llm_calls"]


@pytest.mark.parametrize("group_by", ["mode", "day", "model", "step"])
def test_every_grouping_adds_up_to_the_records(api_a, acme, usage, group_by: str) -> None:
    start, end = days_ago(30), periods.today()
    keys = {
        "mode": lambda r, d: r.mode,
        "day": lambda r, d: d.isoformat(),
        "model": lambda r, d: r.model,
        "step": lambda r, d: r.step,
    }
    want = expected(acme, start, end, keys[group_by])
    body = api_a.get(URL, {"start": start, "end": end, "group_by": group_by}).json()
    assert body["group_by"] == group_by
    got = {g["key"]: g for g in body["groups"]}
    assert set(got) == set(want) - {"total"}
    for key, group in got.items():
        assert group["llm_calls"] == want[key]["llm_calls"]
        assert group["prompt_tokens"] == want[key]["prompt_tokens"]
        assert group["completion_tokens"] == want[key]["completion_tokens"]
        assert group["cost_usd"] == money(want[key]["cost_usd"])
        assert group["billed_usd"] == money(want[key]["billed_usd"])
        if group_by in ("model", "step"):  # distinct turns with a call in the group
            assert group["turns"] == len(want[key].get("traces", ()))
    assert body["groups"] == sorted(body["groups"], key=lambda g: g["key"])


def test_turns_and_critique_rate_per_mode_and_day(api_a, usage) -> None:
    d1, d2 = usage["d1"], usage["d2"]
    body = api_a.get(URL, {"start": d1, "end": periods.today(), "group_by": "mode"}).json()
    by_mode = {g["key"]: g for g in body["groups"]}
    assert (by_mode["adaptive"]["turns"], by_mode["adaptive"]["critique_triggered"]) == (5, 2)
    assert by_mode["adaptive"]["critique_rate"] == 0.4
    assert (by_mode["standard"]["turns"], by_mode["standard"]["critique_rate"]) == (1, 0.0)

    days = {
        g["key"]: g
        for g in api_a.get(URL, {"start": d1, "end": periods.today(), "group_by": "day"}).json()[
            "groups"
        ]
    }
    # the turn started at 23:59 counts on its day, although its call was made after midnight
    assert days[d2.isoformat()]["turns"] == 2
    assert days[d2.isoformat()]["llm_calls"] == 3  # respond, the late assess, the orphan
    assert (d2 + timedelta(days=1)).isoformat() not in days
    assert days[d1.isoformat()]["critique_rate"] == pytest.approx(1 / 3, abs=1e-4)


def test_step_groups_count_a_turn_once_per_step(api_a, usage) -> None:
    body = api_a.get(URL, {"start": usage["d1"], "end": usage["d1"], "group_by": "step"}).json()
    steps = {g["key"]: g for g in body["groups"]}
    assert steps["assess"]["llm_calls"] == 4  # the context turn assessed twice
    assert steps["assess"]["turns"] == 3
    assert (steps["critique"]["turns"], steps["critique"]["critique_rate"]) == (1, 1.0)
    assert body["totals"]["turns"] == 3


def test_csv_has_the_same_numbers(api_a, usage) -> None:
    params = {"start": days_ago(30), "end": periods.today(), "group_by": "model"}
    as_json = api_a.get(URL, params).json()
    response = api_a.get(URL, {**params, "format": "csv"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment; filename=" in response["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    header = rows[0]
    # every figure of the JSON report, in the renderer's order; each is checked against the JSON
    assert header == ["model", *FIGURES]
    for row, group in zip(rows[1:-1], as_json["groups"], strict=True):
        assert row[0] == group["key"]
        for name, value in zip(header[1:], row[1:], strict=True):
            if name in ("critique_rate", "cached_share"):
                assert Decimal(value) == Decimal(str(group[name]))
            else:
                assert value == str(group[name])
    total = rows[-1]
    assert total[0] == "TOTAL"
    assert total[header.index("cost_usd")] == as_json["totals"]["cost_usd"]
    assert total[header.index("billed_usd")] == as_json["totals"]["billed_usd"]
    assert int(total[header.index("llm_calls")]) == as_json["totals"]["llm_calls"]
    assert sum(Decimal(r[header.index("billed_usd")]) for r in rows[1:-1]) == Decimal(
        as_json["totals"]["billed_usd"]
    )


def test_a_group_key_cannot_become_a_spreadsheet_formula(api_a, acme) -> None:
    usage_record_create(
        client=acme,
        mode="adaptive",
        step="assess",
        model="=HYPERLINK(1)",
        prompt_tokens=1,
        completion_tokens=1,
    )
    response = api_a.get(URL, {"group_by": "model", "format": "csv"})
    assert "'=HYPERLINK(1)" in response.content.decode()


def test_defaults_are_this_month_by_mode(api_a) -> None:
    body = api_a.get(URL).json()
    today = periods.today()
    assert (body["start"], body["end"], body["group_by"]) == (
        today.replace(day=1).isoformat(),
        today.isoformat(),
        "mode",
    )
    assert body["groups"] == [] and body["totals"]["turns"] == 0
    assert body["totals"]["critique_rate"] is None


@pytest.mark.parametrize(
    ("params", "field", "text"),
    [
        ({"start": "2026-13-01"}, "start", "Date has wrong format"),
        ({"end": "yesterday"}, "end", "Date has wrong format"),
        ({"start": "2026-03-10", "end": "2026-03-01"}, "start", "is after end"),
        ({"start": "2025-01-01", "end": "2026-01-02"}, "end", "at most 366 days"),
        ({"group_by": "week"}, "group_by", "not a valid choice"),
    ],
)
def test_bad_parameters_are_400_naming_the_field(api_a, params, field, text) -> None:
    for extra in ({}, {"format": "csv"}):  # errors stay JSON when CSV was asked for
        response = api_a.get(URL, {**params, **extra})
        assert response.status_code == 400
        assert response["Content-Type"].startswith("application/json")
        error = response.json()["error"]
        assert error["code"] == "invalid"
        assert field in error["fields"]
        assert text in error["message"] and error["message"].startswith(field)


def test_exactly_366_days_is_allowed(api_a) -> None:
    response = api_a.get(URL, {"start": "2025-01-01", "end": "2026-01-01"})
    assert response.status_code == 200


# -- tenancy ---------------------------------------------------------------------------------


def test_client_b_cannot_see_client_a_usage(acme, globex, usage) -> None:
    api_b = api_for(api_key_issue(client=globex, name="b")[1])
    body = api_b.get(URL, {"start": days_ago(30), "end": periods.today()}).json()
    assert body["client"] == "globex"
    assert body["totals"]["llm_calls"] == 1 and body["totals"]["prompt_tokens"] == 99_999
    # naming A's slug is refused, not silently ignored
    response = api_b.get(URL, {"client": "acme"})
    assert response.status_code == 403
    assert "own client" in response.json()["error"]["message"]
    assert api_b.get(URL, {"client": "globex"}).status_code == 200


def test_platform_superuser_picks_a_client_by_slug(acme, usage, client) -> None:
    client.force_login(UserFactory(is_superuser=True))
    assert client.get(URL).status_code == 403  # no client chosen
    body = client.get(URL, {"client": "acme", "start": days_ago(30)}).json()
    assert body["client"] == "acme" and body["totals"]["llm_calls"] == 9


def test_staff_session_sees_only_its_own_client(acme, globex, usage, client) -> None:
    member = MembershipFactory(client=acme, role=Role.ADMIN)
    client.force_login(member.user)
    assert client.get(URL, {"start": days_ago(30)}).json()["totals"]["llm_calls"] == 9
    assert client.get(URL, {"client": "globex"}).status_code == 403


def test_billing_needs_the_admin_role(acme, client) -> None:
    agent_key = api_key_issue(client=acme, name="agent", role=Role.AGENT)[1]
    assert api_for(agent_key).get(URL).status_code == 403
    viewer = MembershipFactory(client=acme, role=Role.VIEWER)
    client.force_login(viewer.user)
    assert client.get(URL).status_code == 403


def test_no_credentials_is_401(api) -> None:
    assert api.get(URL).status_code in (401, 403)
    assert api.get(URL, HTTP_AUTHORIZATION="Api-Key gd_nope_nope").status_code == 401


def test_the_schema_documents_the_billing_endpoints(api_a) -> None:
    from rest_framework.test import APIClient

    response = APIClient().get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    paths = response.json()["paths"]
    for path in ("/api/v1/billing/usage/", "/api/v1/billing/invoice/", "/api/v1/billing/turns/"):
        assert path in paths
    params = {p["name"] for p in paths["/api/v1/billing/usage/"]["get"]["parameters"]}
    assert {"start", "end", "group_by", "format", "client"} <= params


def test_the_report_runs_a_flat_number_of_queries(api_a, acme, django_assert_max_num_queries):
    def queries_for_report() -> int:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as ctx:
            assert api_a.get(URL, {"start": days_ago(30), "group_by": "step"}).status_code == 200
        return len(ctx.captured_queries)

    make_turn(acme, day=days_ago(2), calls=[Call("assess", 1, 1)])
    queries_for_report()  # the key's last_used_at is written once a minute: not the report's
    few = queries_for_report()
    for n in range(20):
        make_turn(acme, day=days_ago(n % 5), calls=[Call("assess", 1, 1), Call("critique", 1, 1)])
    assert queries_for_report() == few
    with django_assert_max_num_queries(10):
        api_a.get(URL, {"start": days_ago(30), "group_by": "day"})


def test_options_with_csv_format_answers_json_not_500(key_a, client_a):
    from tests.conftest import api_for

    response = api_for(key_a).options("/api/v1/billing/usage/?format=csv")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/api/v1/billing/invoice/?month=0000-01", "month"),
        ("/api/v1/billing/usage/?start=9999-12-31&end=9999-12-31", "start"),
        ("/api/v1/billing/turns/?start=9999-12-31&end=9999-12-31", "start"),
    ],
)
def test_dates_out_of_range_are_a_400_naming_the_field(key_a, client_a, path, field):
    from tests.conftest import api_for

    response = api_for(key_a).get(path)
    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]


def test_unknown_format_falls_back_to_json(key_a, client_a):
    from tests.conftest import api_for

    response = api_for(key_a).get("/api/v1/billing/usage/?format=xml")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")
    csv = api_for(key_a).get("/api/v1/billing/usage/?format=csv")
    assert csv["Content-Type"].startswith("text/csv")


def test_purpose_groups_put_simulations_and_the_playground_on_their_own_lines(
    api_a, acme, usage
) -> None:
    today = periods.today()
    for purpose, step, tokens in (
        ("simulation", "assess", (700, 70)),
        ("simulation", "judge", (300, 30)),
        ("playground", "assess", (500, 50)),
    ):
        usage_record_create(
            client=acme,
            mode="adaptive",
            step=step,
            model="gpt-4o-mini",
            prompt_tokens=tokens[0],
            completion_tokens=tokens[1],
            purpose=purpose,
        )
    start, end = days_ago(30), today
    want = expected(acme, start, end, lambda r, d: r.purpose)
    body = api_a.get(URL, {"start": start, "end": end, "group_by": "purpose"}).json()
    assert body["group_by"] == "purpose"
    got = {g["key"]: g for g in body["groups"]}
    assert set(got) == {"turn", "simulation", "playground"}
    for key, group in got.items():
        assert group["llm_calls"] == want[key]["llm_calls"]
        assert group["prompt_tokens"] == want[key]["prompt_tokens"]
        assert group["cost_usd"] == money(want[key]["cost_usd"])
        assert group["billed_usd"] == money(want[key]["billed_usd"])
    assert got["simulation"]["llm_calls"] == 2 and got["simulation"]["prompt_tokens"] == 1000
    # Only customers' turns are turns: simulations and playground runs never use the plan's
    # included turns or its turn budget.
    assert got["simulation"]["turns"] == got["playground"]["turns"] == 0
    assert got["turn"]["turns"] == body["totals"]["turns"] == 6
    assert sum(g["llm_calls"] for g in body["groups"]) == body["totals"]["llm_calls"]
