from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from devtools.benchmarks.erasure import markdown, run


class Command(BaseCommand):
    help = (
        "Erasing one customer with --conversations conversations of --turns turns each, in a "
        "temporary database: wall time per round, SQL statements and rows (docs/benchmarks.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--conversations", type=int, default=50)
        parser.add_argument("--turns", type=int, default=10)
        parser.add_argument("--rounds", type=int, default=5)

    def handle(self, *args: Any, **options: Any) -> None:
        if min(options["conversations"], options["turns"], options["rounds"]) < 1:
            raise CommandError("--conversations, --turns and --rounds must be at least 1.")
        result = run(
            conversations=options["conversations"],
            turns=options["turns"],
            rounds=options["rounds"],
            progress=lambda text: self.stderr.write(text),
        )
        self.stdout.write(markdown(result))
