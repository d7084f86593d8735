from __future__ import annotations

import os
import platform
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from devtools.benchmarks.commands import add_run_options, progress_bar
from devtools.benchmarks.deliberative import (
    MODES,
    markdown_tables,
    run_deliberative_benchmark,
)
from devtools.benchmarks.modes import MIX, scenario_counts


class Command(BaseCommand):
    help = (
        "Deliberative vs adaptive: the seed's traffic mix through both modes against a "
        "scripted OpenAI-compatible server, on a throwaway copy of the demo tenant in a "
        "temporary database. Prints calls, tokens, cost, SQL queries and orchestration time "
        "per turn, and the distribution of termination reasons and steps per turn."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--turns", type=int, default=50, help="Turns per mode (default 50).")
        parser.add_argument("--model", default="gpt-4o-mini", help="Model whose price is used.")
        parser.add_argument("--seed", type=int, default=7, help="Seed of the scripted model.")
        add_run_options(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        turns: int = options["turns"]
        if turns < 1:
            raise CommandError("--turns must be at least 1.")
        counts = {s: n for s, n in scenario_counts(turns).items() if s in MIX}
        total = len(MODES) * sum(counts.values())
        with progress_bar(options, "bench_deliberative", "turn", total) as progress:
            result = run_deliberative_benchmark(
                turns=turns,
                model=options["model"],
                seed=options["seed"],
                progress=progress,
                in_current_database=options["in_current_database"],
            )
        load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
        self.stdout.write(
            f"bench_deliberative — {timezone.now():%Y-%m-%d %H:%M} UTC, Python "
            f"{platform.python_version()}, model {result.model} at "
            f"${result.price.input_per_million}/M in, ${result.price.cached_input_price}/M cached, "
            f"${result.price.output_per_million}/M out; "
            f"{sum(counts.values())} turns per mode ("
            + " / ".join(f"{counts[s]} {s}" for s in MIX)
            + f"); load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}\n"
        )
        self.stdout.write(markdown_tables(result))
        problems = [p for t in result.tallies.values() for p in t.unexpected]
        if problems:
            self.stdout.write("\nUnexpected turns:\n" + "\n".join(f"- {p}" for p in problems))
            raise CommandError(f"{len(problems)} turn(s) did not run as scripted")
