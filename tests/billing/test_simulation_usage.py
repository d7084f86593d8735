"""Simulations' calls are reported on their own line everywhere — the REST usage report (JSON
and CSV), the admin usage page, the daily rollups and the invoice — never in the row of the
mode their sandboxed turns ran; and the live budget's counter never counts them."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta

import pytest
from django.urls import reverse

from apps.accounts.services import api_key_issue
from apps.billing import periods
from apps.billing.models import DailyUsage, RollupGrain, UsagePurpose
from apps.billing.selectors import invoice_for_month
from apps.billing.services import usage_record_create
from apps.billing.services.budgets import usage_counter_reconcile
from apps.billing.services.rollups import daily_usage_rollup
from tests.billing.conftest import Call, at, make_turn
from tests.conftest import api_for
from tests.factories import ClientFactory, PlanFactory, UserFactory

pytestmark = pytest.mark.django_db
URL = "/api/v1/billing/usage/"
UNSCOPED = "test checks the database directly"


@pytest.fixture
def acme(prices):
    plan = PlanFactory(slug="deep-plan", ai_mode="deliberative", monthly_token_budget=10**9)
    return ClientFactory(slug="acme", name="Acme", plan=plan)


def simulate_calls(client, *, n: int, when=None) -> None:
    """`n` deliberative calls a simulation made (what the sandbox's meter records)."""
    for _ in range(n):
        record = usage_record_create(
            client=client,
            purpose=UsagePurpose.SIMULATION,
            mode="deliberative",
            step="deliberate",
            model="gpt-4o-mini",
            prompt_tokens=1000,
            completion_tokens=100,
        )
        if when is not None:
            type(record).objects.unscoped(UNSCOPED).filter(pk=record.pk).update(created_at=when)


@pytest.fixture
def usage(acme):
    today = periods.today()
    make_turn(acme, day=today, hour=0, calls=[Call("deliberate", 500, 50)] * 2)
    simulate_calls(acme, n=5)
    return acme


def test_the_rest_report_has_a_simulation_line_apart_from_the_modes(usage) -> None:
    api = api_for(api_key_issue(client=usage, name="back-office")[1])
    body = api.get(URL, {"group_by": "mode"}).json()
    groups = {g["key"]: g for g in body["groups"]}
    assert groups["deliberative"]["llm_calls"] == 2  # the customer's turn only
    assert groups["deliberative"]["turns"] == 1
    assert groups["simulation"]["llm_calls"] == 5
    assert groups["simulation"]["turns"] == 0
    assert groups["simulation"]["prompt_tokens"] == 5000
    assert body["simulations"]["llm_calls"] == 5
    assert body["totals"]["llm_calls"] == 7  # the totals still add everything up
    # Any grouping says what simulations used.
    by_day = api.get(URL, {"group_by": "day"}).json()
    assert by_day["simulations"]["completion_tokens"] == 500


def test_the_csv_export_has_the_simulation_line(usage) -> None:
    api = api_for(api_key_issue(client=usage, name="back-office")[1])
    response = api.get(URL, {"group_by": "mode", "format": "csv"})
    assert response.status_code == 200
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    head = rows[0]
    calls = head.index("llm_calls")
    by_key = {row[0]: row for row in rows[1:]}
    assert by_key["deliberative"][calls] == "2"
    assert by_key["simulation"][calls] == "5"
    assert by_key["SIMULATIONS"][calls] == "5"
    assert by_key["TOTAL"][calls] == "7"


def test_the_admin_usage_page_shows_simulations_on_their_own_line(client, usage) -> None:
    client.force_login(UserFactory(is_superuser=True))
    page = client.get(reverse("admin:billing_client_usage", args=[usage.pk])).content.decode()

    def calls(key: str) -> int:
        row = re.search(
            rf'{key}</td>\s*<td class="num">\d+</td>\s*<td class="num">(\d+)</td>', page
        )
        assert row is not None, key
        return int(row.group(1))

    assert calls("deliberative") == 2  # the customer's turn only
    assert calls("simulation") == 5
    assert 'id="simulation-budget"' in page
    assert "5,500 of 2,000,000 tokens" in page  # the simulations' own budget this month


def test_rollups_and_invoices_keep_simulations_apart(acme) -> None:
    yesterday = periods.today() - timedelta(days=1)
    make_turn(acme, day=yesterday, calls=[Call("deliberate", 500, 50)])
    simulate_calls(acme, n=3, when=at(yesterday, 13))
    daily_usage_rollup(day=yesterday)
    rows = DailyUsage.objects.unscoped(UNSCOPED).filter(
        client=acme, day=yesterday, grain=RollupGrain.CALLS
    )
    calls = {row.mode: row.llm_calls for row in rows}
    assert calls == {"deliberative": 1, "simulation": 3}
    acme.plan.included_turns = 0
    acme.plan.save(update_fields=["included_turns"])
    invoice = invoice_for_month(client=acme, month=yesterday)
    lines = [line.description for line in invoice.lines]
    assert any(line.endswith("deliberative mode") for line in lines)
    assert any(line.endswith("simulations") for line in lines)


def test_the_live_budget_counter_never_counts_simulations(usage) -> None:
    counter = usage_counter_reconcile(client=usage, month=periods.month_start(periods.today()))
    assert counter.tokens_used == 2 * 550  # the customer's turn; not the 5,500 simulated
