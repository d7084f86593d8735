from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from devtools.benchmarks.inbox import markdown, run


class Command(BaseCommand):
    help = (
        "The console inbox at scale, in the configured database: seeds a client with N "
        "conversations (kept for re-runs), then times the inbox's first page, its searches "
        "and, with Redis, a live update reaching an open inbox (docs/benchmarks.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--conversations", type=int, default=10_000)
        parser.add_argument("--rounds", type=int, default=50, help="Requests per figure.")
        parser.add_argument("--live-rounds", type=int, default=20)
        parser.add_argument("--fresh", action="store_true", help="Re-seed the client.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["conversations"] < 1 or options["rounds"] < 1:
            raise CommandError("--conversations and --rounds must be at least 1.")
        figures = run(
            conversations=options["conversations"],
            rounds=options["rounds"],
            fresh=options["fresh"],
            live_rounds=options["live_rounds"],
        )
        self.stdout.write(markdown(figures))
