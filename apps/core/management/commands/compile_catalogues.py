"""`manage.py compile_catalogues [--check]`: every locale/*/LC_MESSAGES/*.po → its .mo with
babel (no GNU gettext needed). `--check` changes nothing and fails when a .mo is out of date."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.core.catalogues import catalogue_compile, catalogue_files


class Command(BaseCommand):
    help = "Compile the translation catalogues (.po → .mo) with babel."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--check", action="store_true", help="Only report .mo files that are out of date."
        )

    def handle(self, *args: Any, check: bool = False, **options: Any) -> None:
        entries = catalogue_files()
        if not entries:
            raise CommandError("no catalogues under LOCALE_PATHS")
        stale = [entry for entry in entries if catalogue_compile(entry, check=check)]
        for entry in stale:
            verb = "out of date" if check else "compiled"
            self.stdout.write(f"{entry.mo}: {verb}")
        if check and stale:
            raise CommandError(f"{len(stale)} .mo file(s) out of date: run `make messages`")
        self.stdout.write(f"{len(entries)} catalogue(s), {len(stale)} changed")
