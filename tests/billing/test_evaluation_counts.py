"""How often the evaluation layer validated, questioned, improved, kept or failed answers, per
client and per day: in the usage report (JSON and CSV), from rollups exactly as from the raw
records, and on the admin usage page — each client sees only its own."""

from __future__ import annotations

import csv
import io
from collections import Counter
from datetime import date, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from apps.accounts.models import Role
from apps.accounts.services import api_key_issue
from apps.billing import periods
from apps.billing.selectors import EVALUATION_OUTCOMES, usage_report
from apps.billing.services.rollups import daily_usage_rollup
from apps.reasoning.models import ReasoningTrace
from tests.billing.conftest import Call, make_turn
from tests.conftest import api_for
from tests.factories import ClientFactory, MembershipFactory, PlanFactory, UserFactory

pytestmark = pytest.mark.django_db
URL = "/api/v1/billing/usage/"


def evaluated(client: Any, day: Any, outcome: str, mode: str = "adaptive") -> ReasoningTrace:
    calls = [Call("assess", 500, 50)]
    if outcome:
        calls.append(Call("evaluate", 900, 40))
    trace = make_turn(client, day=day, mode=mode, calls=calls)
    ReasoningTrace.objects.unscoped("test checks the database directly").filter(pk=trace.pk).update(
        evaluation_outcome=outcome
    )
    return trace


@pytest.fixture
def acme(prices):
    return ClientFactory(slug="acme", name="Acme", plan=PlanFactory(slug="eval-plan"))


@pytest.fixture
def globex(prices):
    return ClientFactory(slug="globex", name="Globex", plan=PlanFactory(slug="g-plan"))


@pytest.fixture
def history(acme, globex) -> dict[str, Any]:
    today = periods.today()
    d1, d2 = today - timedelta(days=3), today - timedelta(days=2)
    plan = {
        d1: ["validated", "validated", "questioned", "improved", ""],
        d2: ["failed", "kept", "validated", ""],
        today: ["questioned"],
    }
    for day, outcomes in plan.items():
        for outcome in outcomes:
            evaluated(acme, day, outcome)
    evaluated(acme, d2, "validated", mode="standard")
    evaluated(globex, d1, "failed")  # another client's: never in Acme's figures
    return {"d1": d1, "d2": d2, "today": today}


def raw_counts(client: Any, day: Any = None) -> Counter[str]:
    """The same counts, naively from the traces."""
    traces = ReasoningTrace.objects.filter(client=client).exclude(evaluation_outcome="")
    return Counter(
        t.evaluation_outcome
        for t in traces
        if day is None
        or periods.day_start(day) <= t.created_at < periods.day_start(day) + timedelta(days=1)
    )


def counts(figures: Any) -> Counter[str]:
    get = figures.get if isinstance(figures, dict) else lambda k: getattr(figures, k)
    return Counter(
        {o: get(f"evaluation_{o}") for o in EVALUATION_OUTCOMES if get(f"evaluation_{o}")}
    )


def test_the_report_counts_outcomes_per_day_equal_to_the_raw_records(acme, history) -> None:
    api = api_for(api_key_issue(client=acme, name="bo")[1])
    start, end = history["d1"], history["today"]
    body = api.get(URL, {"start": start, "end": end, "group_by": "day"}).json()

    assert counts(body["totals"]) == raw_counts(acme)
    assert counts(body["totals"]) == Counter(
        validated=4, questioned=2, improved=1, failed=1, kept=1
    )
    for group in body["groups"]:
        assert counts(group) == raw_counts(acme, date.fromisoformat(group["key"])), group["key"]

    csv_rows = list(
        csv.reader(
            io.StringIO(
                api.get(URL, {"start": start, "end": end, "format": "csv"}).content.decode()
            )
        )
    )
    header, total = csv_rows[0], csv_rows[-1]
    assert total[header.index("evaluation_validated")] == "4"
    assert total[header.index("evaluation_failed")] == "1"


@pytest.mark.parametrize("group_by", ["mode", "day", "model", "step"])
def test_rollups_give_the_same_counts_as_the_raw_records(acme, history, group_by) -> None:
    start, end = history["d1"], history["today"]
    before = usage_report(client=acme, start=start, end=end, group_by=group_by)
    for day in (history["d1"], history["d2"]):
        daily_usage_rollup(day=day)
    after = usage_report(client=acme, start=start, end=end, group_by=group_by)

    assert counts(after.totals) == counts(before.totals) == raw_counts(acme)
    assert [(g.key, counts(g)) for g in after.groups] == [(g.key, counts(g)) for g in before.groups]


def test_the_evaluate_step_shows_in_group_by_step(acme, history) -> None:
    report = usage_report(client=acme, start=history["d1"], end=history["today"], group_by="step")
    steps = {g.key: g for g in report.groups}
    assert steps["evaluate"].llm_calls == 9 and steps["evaluate"].billed_usd > 0


def staff_of(client, *codenames: str):
    member = MembershipFactory(client=client, role=Role.ADMIN)
    member.user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return member.user


def test_the_admin_usage_page_shows_outcomes_by_day_for_own_clients_only(
    client, acme, globex, history
) -> None:
    client.force_login(staff_of(acme, "view_clientusage"))
    page = client.get(reverse("admin:billing_client_usage", args=[acme.pk])).content.decode()
    table = page.split('id="evaluation-table"')[1].split("</table>")[0]
    d1_row = table.split(history["d1"].isoformat())[1].split("</tr>")[0]
    cells = [c.split("<")[0] for c in d1_row.split('class="num">')[1:]]
    # turns, evaluated, validated, questioned, improved, kept, failed
    assert cells == ["5", "4", "2", "1", "1", "0", "0"]
    assert client.get(reverse("admin:billing_client_usage", args=[globex.pk])).status_code == 404


def test_a_plan_without_evaluation_says_so(client, globex) -> None:
    client.force_login(UserFactory(is_superuser=True))
    page = client.get(reverse("admin:billing_client_usage", args=[globex.pk])).content.decode()
    assert "has the evaluation step off" in page
