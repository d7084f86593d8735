"""Cached prompt tokens and "deliberate when needed" in the usage reports (API, CSV, rollups,
the admin usage page) and in billing: the cached share, how often turns deliberated and why,
and the multipliers a deliberated turn is billed at."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from apps.accounts.models import Role as StaffRole
from apps.accounts.services import api_key_issue
from apps.billing import periods
from apps.billing.models import DailyUsage, ModelPrice, UsageRecord
from apps.billing.services import usage_record_create, usage_records_rebill
from apps.billing.services.rollups import daily_usage_rollup
from apps.billing.services.visitors import turn_limits_admit
from apps.conversations.models import Role
from apps.conversations.services import message_append
from apps.reasoning.models import ReasoningTrace
from tests.billing.conftest import finished_trace
from tests.conftest import api_for
from tests.factories import (
    ClientFactory,
    MembershipFactory,
    ModelPriceFactory,
    PlanFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db

URL = "/api/v1/billing/usage/"


@pytest.fixture
def when_needed(db):
    ModelPriceFactory(
        model="gpt-4o-mini",
        input_per_million="0.15",
        cached_input_per_million="0.075",
        output_per_million="0.60",
    )
    plan = PlanFactory(
        slug="when-needed",
        ai_mode="as_needed",
        multipliers={"as_needed": "1.5", "deliberative": "2.5"},
    )
    return ClientFactory(slug="wn", name="When Needed", plan=plan)


@pytest.fixture
def other(db):
    plan = PlanFactory(slug="other-plan", ai_mode="as_needed")
    return ClientFactory(slug="other", name="Other", plan=plan)


def turn(
    client: Any,
    *,
    calls: list[tuple[int, int, int]],
    trigger: str = "",
    day_offset: int = 0,
) -> ReasoningTrace:
    """A finished as_needed turn: (prompt, cached, completion) per call; a trigger re-bills it
    as deliberative, as the mode does."""
    conversation, trace = finished_trace(
        client, "hi", mode="as_needed", deliberation_trigger=trigger
    )
    if day_offset:
        started = trace.created_at - timedelta(days=day_offset)
        ReasoningTrace.objects.unscoped("test").filter(pk=trace.pk).update(created_at=started)
    for prompt, cached, completion in calls:
        record = usage_record_create(
            client=client,
            mode="as_needed",
            step="assess",
            model="gpt-4o-mini",
            prompt_tokens=prompt,
            completion_tokens=completion,
            cached_tokens=cached,
            conversation=conversation,
            trace=trace,
            billed_as="deliberative" if trigger else None,
        )
        if day_offset:
            UsageRecord.objects.unscoped("test").filter(pk=record.pk).update(
                created_at=record.created_at - timedelta(days=day_offset)
            )
    return trace


@pytest.fixture
def usage(when_needed, other) -> dict[str, Any]:
    turn(when_needed, calls=[(2000, 1024, 100)])
    turn(when_needed, calls=[(1500, 0, 80)])
    turn(when_needed, calls=[(1200, 0, 50), (3000, 2048, 300)], trigger="low_confidence")
    turn(when_needed, calls=[(1300, 0, 60), (2600, 1280, 200)], trigger="complaint")
    turn(other, calls=[(9999, 9000, 999)], trigger="critique_escalate")
    return {}


def test_records_bill_at_the_multiplier_the_turn_deserves(when_needed, usage):
    records = UsageRecord.objects.for_client(when_needed).select_related("trace")
    for record in records:
        want = Decimal("2.5") if record.trace.deliberation_trigger else Decimal("1.5")
        assert record.multiplier == want
        assert record.billed_usd == (record.cost_usd * want).quantize(Decimal("1e-8"))


def test_cost_prices_cached_tokens_at_the_cached_rate(when_needed, usage):
    record = UsageRecord.objects.for_client(when_needed).get(prompt_tokens=2000)
    want = (976 * Decimal("0.15") + 1024 * Decimal("0.075") + 100 * Decimal("0.60")) / 10**6
    assert record.cost_usd == want.quantize(Decimal("1e-8"))


def test_rebilling_a_turn_moves_every_call_to_the_new_multiplier(when_needed):
    trace = turn(when_needed, calls=[(1000, 0, 100), (1000, 0, 100)])
    before = sum(r.billed_usd for r in UsageRecord.objects.for_client(when_needed))

    delta = usage_records_rebill(client=when_needed, trace=trace, billed_as="deliberative")

    rows = list(UsageRecord.objects.for_client(when_needed))
    assert {r.multiplier for r in rows} == {Decimal("2.500")}
    assert sum(r.billed_usd for r in rows) == before + delta
    assert delta == sum(r.cost_usd for r in rows)  # 2.5 − 1.5 = one more cost


def test_the_api_reports_the_cached_share_and_why_turns_deliberated(when_needed, usage):
    api = api_for(api_key_issue(client=when_needed, name="reports")[1])

    body = api.get(URL).json()

    totals = body["totals"]
    assert totals["turns"] == 4
    assert totals["prompt_tokens"] == 2000 + 1500 + 4200 + 3900
    assert totals["cached_tokens"] == 1024 + 2048 + 1280
    assert totals["cached_share"] == pytest.approx(4352 / 11600, abs=1e-4)
    assert totals["deliberated"] == 2
    assert totals["deliberated_low_confidence"] == 1
    assert totals["deliberated_complaint"] == 1
    assert totals["deliberated_critique_escalate"] == 0  # the other client's turn
    [group] = body["groups"]
    assert (group["key"], group["turns"], group["deliberated"]) == ("as_needed", 4, 2)


def test_the_csv_carries_the_same_figures(when_needed, usage):
    api = api_for(api_key_issue(client=when_needed, name="reports")[1])
    as_json = api.get(URL).json()

    rows = list(csv.DictReader(io.StringIO(api.get(URL, {"format": "csv"}).content.decode())))

    total = rows[-1]
    for name in ("cached_tokens", "deliberated", "deliberated_low_confidence"):
        assert int(total[name]) == as_json["totals"][name]
    assert Decimal(total["cached_share"]) == Decimal(str(as_json["totals"]["cached_share"]))


def test_another_client_cannot_read_these_figures(when_needed, other, usage):
    api_b = api_for(api_key_issue(client=other, name="b")[1])

    body = api_b.get(URL).json()

    assert body["totals"]["turns"] == 1
    assert body["totals"]["deliberated_critique_escalate"] == 1
    assert body["totals"]["deliberated_low_confidence"] == 0
    assert api_b.get(URL, {"client": "wn"}).status_code in (403, 404)


def test_a_rolled_up_day_keeps_cached_tokens_and_deliberation_counts(when_needed):
    turn(when_needed, calls=[(2000, 1024, 100)], day_offset=2)
    turn(when_needed, calls=[(2000, 0, 100)], trigger="evaluation_questioned", day_offset=2)
    day = periods.today() - timedelta(days=2)
    api = api_for(api_key_issue(client=when_needed, name="reports")[1])
    raw = api.get(URL, {"start": day, "end": day}).json()["totals"]

    daily_usage_rollup(day=day)

    assert DailyUsage.objects.for_client(when_needed).filter(day=day).exists()
    rolled = api.get(URL, {"start": day, "end": day}).json()["totals"]
    assert rolled == raw
    assert (rolled["cached_tokens"], rolled["deliberated_evaluation_questioned"]) == (1024, 1)


def test_a_conversation_past_its_hourly_deliberations_runs_adaptive(when_needed):
    plan = when_needed.plan
    plan.deliberative_turns_per_hour = 1
    plan.save()
    first = turn(when_needed, calls=[(100, 0, 10)], trigger="low_confidence")
    message = message_append(
        client=when_needed, conversation=first.conversation, role=Role.USER, text="again"
    )
    trace = ReasoningTrace.objects.create(
        client=when_needed, conversation=first.conversation, user_message=message, mode="as_needed"
    )

    limits = turn_limits_admit(
        client=when_needed, conversation=first.conversation, trace=trace, mode="as_needed"
    )

    assert limits.mode == "adaptive"
    assert limits.capped is not None and limits.capped["reason"] == "hourly_cap"


def usage_page(when_needed: Any) -> str:
    return reverse("admin:billing_client_usage", args=[when_needed.pk])


def test_the_admin_usage_page_shows_the_cached_share_and_why_turns_deliberated(
    client, when_needed, usage
):
    client.force_login(UserFactory(is_superuser=True))

    page = client.get(usage_page(when_needed)).content.decode()

    cached = re.search(r'id="cached-share">([^<]*)<', page)
    assert cached is not None and cached.group(1) == "4,352 (37.5%)"
    table = re.search(r'id="deliberation-table">.*?</table>', page, re.DOTALL)
    assert table is not None
    cells = re.findall(r'<td class="num">([^<]*)</td>', table.group(0))
    # turns, deliberated (share), low confidence, complaint, critique, evaluation
    assert cells == ["4", "2 (50.0%)", "1", "1", "0", "0"]


def test_another_clients_staff_cannot_open_the_page(client, when_needed, other, usage):
    member = MembershipFactory(client=other, role=StaffRole.ADMIN)
    member.user.user_permissions.add(*Permission.objects.filter(codename="view_clientusage"))
    client.force_login(member.user)

    assert client.get(usage_page(when_needed)).status_code == 404


def test_the_model_price_admin_edits_the_cached_price(client, when_needed):
    client.force_login(UserFactory(is_superuser=True))
    price = ModelPrice.objects.get(model="gpt-4o-mini")
    change = reverse("admin:billing_modelprice_change", args=[price.pk])
    assert 'name="cached_input_per_million"' in client.get(change).content.decode()

    response = client.post(
        change,
        {
            "model": "gpt-4o-mini",
            "input_per_million": "0.15",
            "cached_input_per_million": "0.03",
            "output_per_million": "0.60",
            "context_tokens": "",
        },
    )

    assert response.status_code == 302
    price.refresh_from_db()
    assert price.cached_input_per_million == Decimal("0.03")
    listing = client.get(reverse("admin:billing_modelprice_changelist")).content.decode()
    assert "0.030000" in listing


def test_client_staff_cannot_change_model_prices(client, when_needed):
    member = MembershipFactory(client=when_needed, role=StaffRole.OWNER)
    client.force_login(member.user)
    price = ModelPrice.objects.get(model="gpt-4o-mini")
    change = reverse("admin:billing_modelprice_change", args=[price.pk])

    response = client.post(change, {"model": "gpt-4o-mini", "cached_input_per_million": "0"})

    assert response.status_code in (302, 403, 404)
    price.refresh_from_db()
    assert price.cached_input_per_million == Decimal("0.075")


def test_the_plan_admin_explains_the_option_and_edits_its_threshold(client, when_needed):
    client.force_login(UserFactory(is_superuser=True))
    change = reverse("admin:clients_plan_change", args=[when_needed.plan.pk])

    page = client.get(change).content.decode()

    assert "<strong>Deliberate when needed</strong>" in page
    assert 'name="deliberate_below_confidence"' in page
    assert 'value="as_needed"' in page


def test_the_turns_list_says_why_a_turn_deliberated(when_needed, usage):
    api = api_for(api_key_issue(client=when_needed, name="reports")[1])

    rows = api.get("/api/v1/billing/turns/").json()["results"]

    assert sorted(r["deliberation_trigger"] for r in rows) == [
        "",
        "",
        "complaint",
        "low_confidence",
    ]
