"""Daily rollups: closed days aggregated idempotently; reports read rollups for rolled-up days
and raw records for the rest, and both give the same numbers."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import call_command

from apps.billing import periods
from apps.billing.models import DailyUsage, UsageRollupDay
from apps.billing.selectors import GROUP_BYS, usage_report
from apps.billing.services.rollups import (
    DayNotClosed,
    daily_usage_days_pending,
    daily_usage_rollup,
)
from apps.billing.tasks import rollup_daily_usage
from apps.reasoning.models import ReasoningTrace
from tests.billing.conftest import Call, make_turn
from tests.factories import ClientFactory, PlanFactory

pytestmark = pytest.mark.django_db
FIELDS = (
    "client_id",
    "day",
    "grain",
    "mode",
    "model",
    "step",
    "turns",
    "critique_triggered",
    "llm_calls",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "billed_usd",
)


def closed(n: int):
    return periods.last_closed_day() - timedelta(days=n)


@pytest.fixture
def acme(prices):
    return ClientFactory(slug="acme", plan=PlanFactory(slug="pro-plan", ai_mode="adaptive"))


@pytest.fixture
def globex(prices):
    return ClientFactory(slug="globex", plan=PlanFactory(slug="g-plan", ai_mode="standard"))


@pytest.fixture
def history(acme, globex):
    for n in (2, 4):
        day = closed(n)
        make_turn(acme, day=day, calls=[Call("assess", 500, 80)])
        make_turn(
            acme,
            day=day,
            critique=True,
            calls=[Call("assess", 600, 90), Call("assess", 700, 20), Call("critique", 300, 40)],
        )
        make_turn(acme, day=day, mode="standard", calls=[Call("respond", 2500, 60, "gpt-4o")])
        make_turn(globex, day=day, calls=[Call("respond", 3000, 50)])
    make_turn(acme, day=closed(4), hour=23, minute=58, call_lag_minutes=3, calls=[Call("x", 1, 1)])
    orphan = make_turn(acme, day=closed(2), calls=[Call("assess", 111, 11)])
    ReasoningTrace.objects.unscoped("test checks the database directly").filter(
        pk=orphan.pk
    ).delete()
    make_turn(acme, day=periods.today(), hour=0, calls=[Call("assess", 450, 70)])


def rows() -> list[tuple]:
    return list(
        DailyUsage.objects.unscoped("test checks the database directly")
        .order_by(*FIELDS[:6])
        .values_list(*FIELDS)
    )


def test_rolling_a_day_up_twice_gives_identical_rows(history) -> None:
    day = closed(2)
    count = daily_usage_rollup(day=day)
    first = rows()
    assert count == len(first) > 0
    assert daily_usage_rollup(day=day) == count
    assert rows() == first
    assert {r[1] for r in first} == {day}
    assert UsageRollupDay.objects.get(day=day).rows == count


def test_the_task_rolls_up_closed_days_only_and_can_run_twice(history) -> None:
    rollup_daily_usage()
    done = set(UsageRollupDay.objects.values_list("day", flat=True))
    assert {closed(2), closed(4)} <= done
    assert periods.today() not in done
    assert max(done) == periods.last_closed_day()
    before = rows()
    rollup_daily_usage()
    assert rows() == before


@pytest.mark.parametrize("group_by", GROUP_BYS)
def test_reports_from_rollups_equal_reports_from_raw_records(acme, history, group_by) -> None:
    start, end = closed(6), periods.today()
    raw = usage_report(client=acme, start=start, end=end, group_by=group_by)
    assert not UsageRollupDay.objects.exists()
    rollup_daily_usage()
    assert UsageRollupDay.objects.filter(day__gte=start).count() >= 2
    rolled = usage_report(client=acme, start=start, end=end, group_by=group_by)
    assert rolled.totals == raw.totals
    assert rolled.groups == raw.groups
    assert raw.totals.llm_calls == 13  # 2 × (1 + 3 + 1), the late call, the orphan, today


def test_reports_read_rollups_for_rolled_up_days(acme, history) -> None:
    day = closed(2)
    daily_usage_rollup(day=day)
    before = usage_report(client=acme, start=day, end=day, group_by="mode")
    make_turn(acme, day=day, calls=[Call("assess", 10**6, 0)])  # e.g. a late takeover
    assert usage_report(client=acme, start=day, end=day, group_by="mode").totals == before.totals
    daily_usage_rollup(day=day)  # the next run picks it up
    after = usage_report(client=acme, start=day, end=day, group_by="mode")
    assert after.totals.prompt_tokens == before.totals.prompt_tokens + 10**6


def test_rollups_are_per_client(acme, globex, history) -> None:
    rollup_daily_usage()
    day = closed(2)
    a = usage_report(client=acme, start=day, end=day, group_by="mode")
    g = usage_report(client=globex, start=day, end=day, group_by="mode")
    assert (a.totals.turns, g.totals.turns) == (3, 1)
    assert g.totals.prompt_tokens == 3000


def test_today_is_never_rolled_up(history) -> None:
    with pytest.raises(DayNotClosed):
        daily_usage_rollup(day=periods.today())


def test_pending_days_are_the_backlog_then_the_last_two_closed_days(history) -> None:
    pending = daily_usage_days_pending(max_days=31, refresh_days=2)
    assert pending[-2:] == [closed(1), closed(0)]
    assert pending[0] == closed(4)  # the first day with usage
    rollup_daily_usage()
    assert daily_usage_days_pending() == [closed(1), closed(0)]  # refreshed on every run
    assert daily_usage_days_pending(max_days=1, refresh_days=0) == []


def test_the_backlog_is_bounded_per_run(acme) -> None:
    make_turn(acme, day=closed(40), calls=[Call("assess", 1, 1)])
    pending = daily_usage_days_pending(max_days=5, refresh_days=2)
    assert pending == [closed(40 - n) for n in range(5)] + [closed(1), closed(0)]


def test_nothing_to_do_without_usage() -> None:
    assert daily_usage_days_pending() == []
    assert rollup_daily_usage() == []


def test_the_task_is_registered_under_its_scheduled_name() -> None:
    from config.celery import app

    name = settings.CELERY_BEAT_SCHEDULE["billing-rollup-daily-usage"]["task"]
    assert name == "billing.rollup_daily_usage"
    assert name in app.tasks


def test_the_management_command(history) -> None:
    out = StringIO()
    call_command("rollup_usage", "--day", closed(2).isoformat(), stdout=out)
    assert "Rolled up 1 day(s)" in out.getvalue()
    assert UsageRollupDay.objects.filter(day=closed(2)).exists()
    call_command("rollup_usage", stdout=out)
    assert UsageRollupDay.objects.filter(day=closed(4)).exists()
