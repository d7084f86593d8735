from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from devtools.benchmarks.languages import TARGET, detection_figures, markdown_table


class Command(BaseCommand):
    help = (
        "Language detection on the shipped set of short customer messages "
        "(devtools/benchmarks/data/language_detection.json): per language, how many are detected "
        "right, left unsure or detected wrong, and the mean time per detection. Exit 1 when a "
        f"language is below the target ({TARGET:.0%} correct)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--candidates",
            default="",
            help="The client's allowed languages, comma-separated (default: every shipped one).",
        )
        parser.add_argument("--repeat", type=int, default=20, help="Timing rounds (default 20).")

    def handle(self, *args: Any, **options: Any) -> None:
        candidates = [c for c in options["candidates"].split(",") if c.strip()] or None
        figures = detection_figures(candidates=candidates, repeat=max(1, options["repeat"]))
        self.stdout.write(markdown_table(figures))
        for f in figures:
            for text, found in f.wrong:
                self.stdout.write(f"wrong ({f.code} → {found}): {text}")
        below = [f.code for f in figures if f.rate < TARGET]
        if below:
            self.stderr.write(f"below the {TARGET:.0%} target: {', '.join(below)}")
            raise SystemExit(1)
