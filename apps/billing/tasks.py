from __future__ import annotations

from datetime import date

from celery import shared_task

from apps.billing.services.budgets import usage_counters_reconcile
from apps.billing.services.rollups import daily_usage_rollup, daily_usage_rollup_pending


@shared_task(name="billing.rollup_daily_usage", acks_late=True, ignore_result=True)
def rollup_daily_usage(day: str | None = None) -> list[str]:
    """Aggregate closed days into DailyUsage (scheduled hourly). Without `day`: every closed
    day never rolled up (a bounded backlog per run) plus the last two closed days again.
    Idempotent: a day is deleted and re-inserted in one transaction."""
    if day is not None:
        daily_usage_rollup(day=date.fromisoformat(day))
        return [day]
    return [done.isoformat() for done in daily_usage_rollup_pending()]


@shared_task(name="billing.reconcile_usage_counters", acks_late=True, ignore_result=True)
def reconcile_usage_counters() -> int:
    """Recount this month's budget counters from the usage records (repairs drift, e.g. from
    turns that ran while a plan had no budget). Safe at any time."""
    return usage_counters_reconcile()
