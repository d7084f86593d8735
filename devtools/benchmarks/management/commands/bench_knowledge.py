from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from devtools.benchmarks.knowledge import markdown, run


class Command(BaseCommand):
    help = (
        "Knowledge retrieval benchmark in a temporary database: search p50/p95 at ~10,000 "
        "chunks, SQL of an adaptive turn with no fetch, and adaptive's first prompt ÷ "
        "standard's with 100 articles loaded (docs/benchmarks.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--chunks", type=int, default=10_000)
        parser.add_argument("--queries", type=int, default=300)
        parser.add_argument("--articles", type=int, default=100)
        parser.add_argument("--rounds", type=int, default=3, help="The quietest round counts.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["chunks"] < 1 or options["queries"] < 1:
            raise CommandError("--chunks and --queries must be at least 1.")
        result = run(
            chunks=options["chunks"],
            queries=options["queries"],
            articles=options["articles"],
            rounds=max(1, options["rounds"]),
            progress=lambda text: self.stderr.write(text),
        )
        self.stdout.write(markdown(result))
