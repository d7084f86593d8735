from __future__ import annotations

from datetime import date
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.billing import periods
from apps.billing.services.rollups import (
    DayNotClosed,
    daily_usage_rollup,
    daily_usage_rollup_pending,
)


class Command(BaseCommand):
    help = (
        "Aggregate closed days into daily usage rollups (what the hourly task "
        "billing.rollup_daily_usage does). Idempotent. Without options: the pending days."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--day", type=date.fromisoformat, help="One day, YYYY-MM-DD.")
        parser.add_argument("--since", type=date.fromisoformat, help="Every day from YYYY-MM-DD.")
        parser.add_argument(
            "--max-days", type=int, default=31, help="Backlog days per run (default 31)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["day"] and options["since"]:
            raise CommandError("Use --day or --since, not both.")
        try:
            if options["day"] or options["since"]:
                first = options["day"] or options["since"]
                last = options["day"] or periods.last_closed_day()
                days = list(periods.days(first, last))
                for day in days:
                    daily_usage_rollup(day=day)
            else:
                days = daily_usage_rollup_pending(max_days=options["max_days"])
        except DayNotClosed as exc:
            raise CommandError(str(exc)) from None
        listed = ", ".join(day.isoformat() for day in days) or "nothing pending"
        self.stdout.write(f"Rolled up {len(days)} day(s): {listed}")
