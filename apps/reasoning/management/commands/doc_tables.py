"""`python manage.py doc_tables [--check]`: rewrite the docs tables generated from the step, mode
and executor registries (apps/reasoning/doc_tables.py)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.reasoning import doc_tables


class Command(BaseCommand):
    help = "Rewrite the docs tables generated from the step, mode and executor registries."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--check",
            action="store_true",
            help="Change nothing; exit non-zero when a file differs from what would be written.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["check"]:
            stale = doc_tables.stale_files()
            if stale:
                raise CommandError(
                    f"out of date: {', '.join(stale)} — run python manage.py doc_tables"
                )
            self.stdout.write("The generated docs tables are up to date.")
            return
        changed = doc_tables.write_files()
        self.stdout.write(f"Rewrote {', '.join(changed)}." if changed else "Nothing to change.")
