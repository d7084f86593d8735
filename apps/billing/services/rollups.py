"""Daily usage rollups: the closed days of every client aggregated into DailyUsage rows, so
reports over long ranges read a few rows per day instead of every usage record."""

from __future__ import annotations

from datetime import date, timedelta

from django.db import IntegrityError, transaction
from django.db.models import Min
from django.utils import timezone

from apps.billing import periods
from apps.billing.models import DailyUsage, UsageRecord, UsageRollupDay
from apps.billing.selectors import CELL_FIELDS, usage_cells_raw

DEFAULT_MAX_DAYS = 31
DEFAULT_REFRESH_DAYS = 2


class DayNotClosed(ValueError):
    pass


def daily_usage_rollup(*, day: date) -> int:
    """(Re)aggregate one closed day for every client and mark it rolled up; returns the number
    of rows. One transaction per day: the day's rows are deleted and inserted again, so running
    it twice gives identical rows, and reports never see a half-written day. Two workers on the
    same day queue on the day's marker row."""
    if day > periods.last_closed_day():
        raise DayNotClosed(f"{day} is not closed yet; turns may still add to it")
    with transaction.atomic():
        marker = UsageRollupDay.objects.select_for_update().filter(day=day).first()
        if marker is None:
            try:
                with transaction.atomic():
                    UsageRollupDay.objects.create(day=day, rolled_up_at=timezone.now())
            except IntegrityError:
                pass  # another worker is rolling this day up: wait for it below, then redo
            marker = UsageRollupDay.objects.select_for_update().get(day=day)
        cells = usage_cells_raw(client=None, first=day, last=day)
        DailyUsage.objects.unscoped("the rollup rebuilds a day for every client").filter(
            day=day
        ).delete()
        DailyUsage.objects.bulk_create(
            DailyUsage(**{name: getattr(cell, name) for name in CELL_FIELDS}) for cell in cells
        )
        marker.rolled_up_at = timezone.now()
        marker.rows = len(cells)
        marker.save(update_fields=["rolled_up_at", "rows", "updated_at"])
    return len(cells)


def daily_usage_days_pending(
    *, max_days: int = DEFAULT_MAX_DAYS, refresh_days: int = DEFAULT_REFRESH_DAYS
) -> list[date]:
    """Closed days to (re)aggregate, oldest first, at most `max_days`: every day since the
    first usage that was never rolled up, and the last `refresh_days` closed days again (a
    turn taken over after its worker died can still add to the day it started on)."""
    last = periods.last_closed_day()
    # A record counts on the day its turn started (see selectors): the earliest of both.
    earliest = UsageRecord.objects.unscoped("the earliest usage of any client").aggregate(
        record=Min("created_at"), turn=Min("trace__created_at")
    )
    firsts = [earliest["record"], earliest["turn"]]
    known = [timezone.localtime(moment).date() for moment in firsts if moment is not None]
    if not known:
        return []
    first = min(known)
    if first > last:
        return []
    done = set(
        UsageRollupDay.objects.filter(day__gte=first, day__lte=last).values_list("day", flat=True)
    )
    refresh = sorted(last - timedelta(days=n) for n in range(refresh_days))
    refresh = [day for day in refresh if day >= first]
    # The backlog of never-rolled days (oldest first, bounded per run), then the refresh.
    missing = [day for day in periods.days(first, last) if day not in done and day not in refresh]
    return missing[:max_days] + refresh


def daily_usage_rollup_pending(
    *, max_days: int = DEFAULT_MAX_DAYS, refresh_days: int = DEFAULT_REFRESH_DAYS
) -> list[date]:
    """Roll up the pending days (see `daily_usage_days_pending`); returns them."""
    pending = daily_usage_days_pending(max_days=max_days, refresh_days=refresh_days)
    for day in pending:
        daily_usage_rollup(day=day)
    return pending
