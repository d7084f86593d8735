from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from devtools.benchmarks.commands import add_run_options, progress_bar
from devtools.benchmarks.retrieval import markdown_report, run_retrieval_benchmark


class Command(BaseCommand):
    help = (
        "Retrieval evaluation: loads the demo help centre (demo/knowledge/*.md) into a fresh "
        "client of a temporary database, runs every question of demo/knowledge/eval.json "
        "through the knowledge search and prints recall@1/@3/@5 and MRR by article, per "
        "language, with the misses."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--embeddings",
            action="store_true",
            help="Rank with embeddings too (needs EMBEDDING_MODEL and a provider).",
        )
        parser.add_argument(
            "--questions", type=int, default=None, help="Only this many questions, spread evenly."
        )
        add_run_options(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        if options["questions"] is not None and options["questions"] < 1:
            raise CommandError("--questions must be at least 1.")
        with progress_bar(options, "bench_retrieval", "question") as progress:
            result = run_retrieval_benchmark(
                embeddings=options["embeddings"],
                questions=options["questions"],
                in_current_database=options["in_current_database"],
                progress=progress,
            )
        self.stdout.write(markdown_report(result))
