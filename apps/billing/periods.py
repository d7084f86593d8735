"""Days and months in the project's time zone (settings.TIME_ZONE): what "today", "a closed day"
and "this month" mean for budgets, reports and rollups."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime, time, timedelta

from django.conf import settings
from django.utils import timezone


def today() -> date:
    return timezone.localdate()


def month_start(day: date) -> date:
    return day.replace(day=1)


def next_month(month: date) -> date:
    return (month.replace(day=28) + timedelta(days=4)).replace(day=1)


def month_end(month: date) -> date:
    """Last day of the month that starts on `month`."""
    return next_month(month) - timedelta(days=1)


def day_start(day: date) -> datetime:
    """Midnight at the start of `day`, as an aware datetime in the current time zone."""
    return datetime.combine(day, time.min, tzinfo=timezone.get_current_timezone())


def days(start: date, end: date) -> Iterator[date]:
    """Every day from `start` to `end`, both included."""
    for offset in range((end - start).days + 1):
        yield start + timedelta(days=offset)


def day_runs(wanted: list[date]) -> list[tuple[date, date]]:
    """Sorted days grouped into contiguous (first, last) runs: one range query per run."""
    runs: list[tuple[date, date]] = []
    for day in sorted(set(wanted)):
        if runs and runs[-1][1] + timedelta(days=1) == day:
            runs[-1] = (runs[-1][0], day)
        else:
            runs.append((day, day))
    return runs


def rollup_grace() -> timedelta:
    """How long after midnight a day still changes: a turn that started just before midnight
    may run for up to the task time limit, and its calls count on the day it started."""
    return timedelta(seconds=int(settings.BILLING_ROLLUP_GRACE_SECONDS))


def last_closed_day(now: datetime | None = None) -> date:
    """The latest day no turn can still add to."""
    moment = timezone.localtime(now or timezone.now()) - rollup_grace()
    return moment.date() - timedelta(days=1)
