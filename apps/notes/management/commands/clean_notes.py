"""`manage.py clean_notes --older-than 30d` — the seed's `-clean-notes=30d`."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.clients.models import Client
from apps.core.exceptions import ApplicationError
from apps.notes.maintenance import notes_clear, parse_duration
from apps.notes.models import NoteType


class Command(BaseCommand):
    help = (
        "Delete notes older than a duration (30d, 12h, 2w), optionally only of one type, "
        "language or client, and print what was removed per client and type. --dry-run only "
        "counts. The nightly task notes.apply_retention does the same with each plan's "
        "notes_retention_days."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than",
            required=True,
            metavar="DURATION",
            help="Age of the notes to remove: a number and h, d or w (e.g. 30d, 12h, 2w).",
        )
        parser.add_argument("--type", choices=NoteType.values, help="Only notes of this type.")
        parser.add_argument(
            "--language",
            help="Only notes for this language code ('' for the notes for any language).",
        )
        parser.add_argument("--client", metavar="SLUG", help="Only this client's notes.")
        parser.add_argument(
            "--dry-run", action="store_true", help="Count what would be removed; change nothing."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            older_than = parse_duration(options["older_than"])
        except ValueError as exc:
            raise CommandError(f"--older-than: {exc}") from None
        client = None
        if options["client"] is not None:
            client = Client.objects.filter(slug=options["client"]).first()
            if client is None:
                raise CommandError(f"--client: no client with the slug {options['client']!r}.")
        language = options["language"]
        if language is not None:
            language = language.strip().lower()
            if len(language) > 16:
                raise CommandError("--language: a language code has at most 16 characters.")
        try:
            report = notes_clear(
                older_than=older_than,
                type=options["type"],
                language=language,
                client=client,
                dry_run=options["dry_run"],
            )
        except ApplicationError as exc:
            raise CommandError(exc.message) from None

        verb = "Would remove" if report.dry_run else "Removed"
        cutoff = report.cutoff.strftime("%Y-%m-%d %H:%M UTC")
        if not report.total:
            self.stdout.write(f"No notes created before {cutoff} match; nothing removed.")
            return
        for slug, by_type in sorted(report.removed.items()):
            counts = ", ".join(f"{n} {t}" for t, n in sorted(by_type.items()))
            self.stdout.write(f"{verb} {sum(by_type.values())} note(s) of {slug}: {counts}")
        summary = f"{verb} {report.total} note(s) created before {cutoff}"
        if report.dry_run:
            summary += " (dry run: nothing was changed)"
        self.stdout.write(summary + ".")
