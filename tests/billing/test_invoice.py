"""GET /api/v1/billing/invoice/?month=YYYY-MM — the plan fee covers the month's first
`included_turns` turns; later turns are billed at their billed usage, one line per mode.
GET /api/v1/billing/turns/ — per-turn usage summaries."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from apps.accounts.services import api_key_issue
from apps.billing import periods
from apps.reasoning.models import ReasoningTrace
from tests.billing.conftest import Call, make_turn
from tests.conftest import api_for
from tests.factories import ClientFactory, PlanFactory

pytestmark = pytest.mark.django_db
URL = "/api/v1/billing/invoice/"
LAST_MONTH = periods.month_start(periods.month_start(periods.today()) - timedelta(days=1))


@pytest.fixture
def acme(prices):
    plan = PlanFactory(
        slug="pro-plan",
        name="Pro",
        ai_mode="adaptive",
        monthly_fee=Decimal("99.00"),
        included_turns=2,
    )
    return ClientFactory(slug="acme", name="Acme", plan=plan)


@pytest.fixture
def api_a(acme):
    return api_for(api_key_issue(client=acme, name="a")[1])


def big(step: str = "assess") -> Call:
    # gpt-4o: 100,000 × $2.50/M + 10,000 × $10/M = $0.35
    return Call(step, 100_000, 10_000, model="gpt-4o")


def test_turns_beyond_the_included_ones_are_billed_per_mode(api_a, acme) -> None:
    day = LAST_MONTH
    make_turn(acme, day=day, hour=9, calls=[big()])  # included
    make_turn(acme, day=day + timedelta(days=1), hour=9, calls=[big(), big("critique")])  # incl.
    make_turn(acme, day=day + timedelta(days=2), mode="standard", calls=[big("respond")])
    make_turn(acme, day=day + timedelta(days=3), calls=[big()])
    body = api_a.get(URL, {"month": f"{LAST_MONTH:%Y-%m}"}).json()
    assert body["client"] == "acme" and body["month"] == f"{LAST_MONTH:%Y-%m}"
    assert body["status"] == "final" and body["currency"] == "USD"
    assert (body["turns"], body["included_turns"], body["turns_beyond_included"]) == (4, 2, 2)
    assert body["plan"] == {
        "slug": "pro-plan",
        "name": "Pro",
        "monthly_fee": "99.00",
        "included_turns": 2,
    }
    # 5 calls at $0.35: four adaptive (× 1.5 = 0.525), one standard (× 1.0)
    assert body["usage_billed_usd"] == "2.45000000"
    assert body["overage_usd"] == "0.87500000"  # turns 3 and 4 only
    assert body["lines"] == [
        {
            "description": "Pro plan — monthly fee (includes 2 turns)",
            "quantity": 1,
            "amount_usd": "99.00",
            "exact_usd": "99.00000000",
        },
        {
            "description": "AI usage beyond the included turns — adaptive mode",
            "quantity": 1,
            "amount_usd": "0.53",  # 0.525 rounds half up
            "exact_usd": "0.52500000",
        },
        {
            "description": "AI usage beyond the included turns — standard mode",
            "quantity": 1,
            "amount_usd": "0.35",
            "exact_usd": "0.35000000",
        },
    ]
    assert body["total_usd"] == "99.88"


def test_turns_starting_at_the_same_moment_are_ordered_by_id(api_a, acme) -> None:
    first = make_turn(acme, day=LAST_MONTH, calls=[Call("assess", 1000, 0)])
    make_turn(acme, day=LAST_MONTH, calls=[Call("assess", 2000, 0)])
    third = make_turn(acme, day=LAST_MONTH, calls=[big()])
    assert first.created_at == third.created_at
    body = api_a.get(URL, {"month": f"{LAST_MONTH:%Y-%m}"}).json()
    assert body["overage_usd"] == "0.52500000"  # the third, by id


def test_within_the_allowance_the_fee_is_the_invoice(api_a, acme) -> None:
    make_turn(acme, day=LAST_MONTH, calls=[big()])
    body = api_a.get(URL, {"month": f"{LAST_MONTH:%Y-%m}"}).json()
    assert body["overage_usd"] == "0.00000000" and body["total_usd"] == "99.00"
    assert len(body["lines"]) == 1
    assert body["usage_billed_usd"] == "0.52500000"


def test_usage_of_a_deleted_turn_is_billed(api_a, acme) -> None:
    orphan = make_turn(acme, day=LAST_MONTH, calls=[big()])
    ReasoningTrace.objects.unscoped("test checks the database directly").filter(
        pk=orphan.pk
    ).delete()
    body = api_a.get(URL, {"month": f"{LAST_MONTH:%Y-%m}"}).json()
    assert (body["turns"], body["overage_usd"]) == (0, "0.52500000")
    assert body["lines"][1]["quantity"] == 0


def test_the_current_month_is_open_and_the_default(api_a, acme) -> None:
    body = api_a.get(URL).json()
    assert body["month"] == f"{periods.today():%Y-%m}" and body["status"] == "open"


@pytest.mark.parametrize("month", ["2026-1", "2026-13", "November", "2999-01"])
def test_bad_months_are_400_naming_the_field(api_a, month) -> None:
    response = api_a.get(URL, {"month": month})
    assert response.status_code == 400
    assert "month" in response.json()["error"]["fields"]


def test_client_b_cannot_see_client_a_invoice(acme) -> None:
    make_turn(acme, day=LAST_MONTH, calls=[big()] * 3)
    globex = ClientFactory(slug="globex", plan=PlanFactory(slug="g", included_turns=0))
    api_b = api_for(api_key_issue(client=globex, name="b")[1])
    body = api_b.get(URL, {"month": f"{LAST_MONTH:%Y-%m}"}).json()
    assert body["client"] == "globex"
    assert (body["turns"], body["usage_billed_usd"]) == (0, "0.00000000")
    assert api_b.get(URL, {"client": "acme"}).status_code == 403


# -- per-turn summaries ----------------------------------------------------------------------


def test_turn_summaries_show_what_each_turn_did_and_cost(api_a, acme) -> None:
    today = periods.today()
    trace = make_turn(acme, day=today, hour=0, critique=True, calls=[big(), big("critique")])
    ReasoningTrace.objects.unscoped("test checks the database directly").filter(pk=trace.pk).update(
        context_fetched=["policies.returns"], critique_reasons=["destructive_tool"], escalated=True
    )
    make_turn(acme, day=today, hour=0, calls=[Call("assess", 10, 1)])
    body = api_a.get("/api/v1/billing/turns/").json()
    assert len(body["results"]) == 2
    turn = next(t for t in body["results"] if t["id"] == trace.pk)
    assert turn["conversation"] == str(trace.conversation.public_id)
    assert (turn["mode"], turn["llm_calls"], turn["prompt_tokens"]) == ("adaptive", 2, 200_000)
    assert (turn["cost_usd"], turn["billed_usd"]) == ("0.70000000", "1.05000000")
    assert turn["critique_triggered"] and turn["critique_reasons"] == ["destructive_tool"]
    assert turn["context_fetched"] == ["policies.returns"] and turn["escalated"]
    assert turn["evaluation_outcome"] == ""  # not evaluated
    only = api_a.get(
        "/api/v1/billing/turns/", {"conversation": str(trace.conversation.public_id)}
    ).json()
    assert [t["id"] for t in only["results"]] == [trace.pk]


def test_turn_summaries_are_scoped_to_the_client(acme) -> None:
    make_turn(acme, day=periods.today(), hour=0, calls=[big()])
    globex = ClientFactory(slug="globex", plan=PlanFactory(slug="g"))
    api_b = api_for(api_key_issue(client=globex, name="b")[1])
    assert api_b.get("/api/v1/billing/turns/").json()["results"] == []
