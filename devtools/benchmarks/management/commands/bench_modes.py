from __future__ import annotations

import platform
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from apps.clients.models import AIMode
from devtools.benchmarks.commands import add_run_options, progress_bar
from devtools.benchmarks.modes import (
    EXTRA_SCENARIOS,
    FIRST_CALL_CASE,
    MIX,
    MODES,
    markdown_table,
    run_benchmark,
    scenario_counts,
    text_table,
)


class Command(BaseCommand):
    help = (
        "Cost benchmark: the seed's traffic mix (60 % simple, 20 % extra context, 20 % risky "
        "actions) through standard and adaptive mode against a scripted OpenAI-compatible "
        "server, on a throwaway copy of the demo tenant in a temporary database (the "
        "configured database is not written to). Prints calls, tokens, cost, SQL queries and "
        "orchestration time per turn."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--turns", type=int, default=100, help="Turns per mode (default 100).")
        parser.add_argument(
            "--model", default="gpt-4o-mini", help="Model whose ModelPrice prices the calls."
        )
        parser.add_argument("--markdown", action="store_true", help="Print a Markdown table.")
        add_run_options(
            parser,
            "Work in the configured database (deleting the benchmark clients afterwards) "
            "instead of a temporary one; meant for the test suite.",
        )
        parser.add_argument(
            "--evaluation",
            action="store_true",
            help="Turn the evaluation layer on for both plans (an `evaluate` call after each "
            "knowledge answer over 100 characters, scripted to validate it).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        turns: int = options["turns"]
        if turns < 1:
            raise CommandError("--turns must be at least 1.")
        in_current = options["in_current_database"]
        if in_current:
            executor = MigrationExecutor(connection)
            if executor.migration_plan(executor.loader.graph.leaf_nodes()):
                raise CommandError("The database has unapplied migrations: run `migrate`.")
        counts = scenario_counts(turns)
        total = len(MODES) * sum(counts.values())
        with progress_bar(options, "bench_modes", "turn", total) as progress:
            result = run_benchmark(
                turns=turns,
                model=options["model"],
                progress=progress,
                in_current_database=in_current,
                evaluation=options["evaluation"],
            )

        price = result.price
        mix = " / ".join(f"{counts[s]} {s}" for s in MIX)
        extra = ", ".join(f"{counts[s]} {s}" for s in EXTRA_SCENARIOS)
        self.stdout.write(
            f"GuideDesk bench_modes · {timezone.now():%Y-%m-%d %H:%M} UTC · "
            f"{platform.python_implementation()} {platform.python_version()} · "
            f"{platform.machine()}\n"
            f"model {result.model} at ${price.input_per_million}/M in "
            f"(${price.cached_input_price}/M cached), "
            f"${price.output_per_million}/M out · per mode: {mix} (+ {extra}, informational)"
            f" · evaluation {'on' if result.evaluation else 'off'}\n"
        )
        self.stdout.write(markdown_table(result) if options["markdown"] else text_table(result))
        ratio = result.ratio()
        if ratio is not None:
            verdict = "cheaper" if ratio < 1 else "more expensive"
            self.stdout.write(
                f"\nWeighted provider cost, adaptive ÷ standard: {ratio:.3f} — adaptive is "
                f"{abs(1 - ratio) * 100:.1f}% {verdict} per turn."
            )
        uncached = result.uncached_ratio()
        if uncached is not None:
            prompts = result.weighted("adaptive", "prompt_tokens") / result.weighted(
                "standard", "prompt_tokens"
            )
            self.stdout.write(
                f"Weighted provider cost without prompt caching, adaptive ÷ standard: "
                f"{uncached:.3f} (prompt tokens {prompts:.3f})."
            )
        first = result.first_call_ratio()
        if first is not None:
            self.stdout.write(
                f"First call on {FIRST_CALL_CASE.text!r}, adaptive ÷ standard prompt tokens: "
                f"{result.first_call['adaptive']:,} ÷ {result.first_call['standard']:,} = "
                f"{first:.3f} (notes included)."
            )
        versus = result.versus_adaptive(AIMode.AS_NEEDED)
        if versus is not None:
            deliberated, mixed = result.deliberated()
            self.stdout.write(
                f"Weighted provider cost, deliberate when needed ÷ adaptive: {versus:.3f} "
                f"({deliberated} of {mixed} turns of the mix deliberated)."
            )
        match = "=" if round(result.reported_usd, 2) == round(result.provider_usd, 2) else "≠"
        self.stdout.write(
            f"Usage reports' provider cost ${result.reported_usd:.8f} {match} the scripted "
            f"provider's own invoice ${result.provider_usd:.8f} (to the cent, cached tokens at "
            "the cached rate)."
        )
        if result.evaluation:
            for mode in MODES:
                evaluated, mixed = result.evaluated(mode)
                self.stdout.write(
                    f"Evaluation triggered in {mode}: {evaluated} of {mixed} turns of the mix "
                    f"({evaluated / mixed * 100 if mixed else 0:.0f} %)."
                )
        problems = [p for tally in result.tallies.values() for p in tally.unexpected]
        if problems:
            self.stderr.write(f"{len(problems)} turn(s) did not run as scripted:")
            for problem in problems[:10]:
                self.stderr.write(f"  {problem}")
            raise CommandError("the benchmark's script and the pipeline disagree (see above)")
