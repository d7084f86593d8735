"""`manage.py retention_run [--client SLUG] [--limit N] [--dry-run]` — the daily task by hand."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.clients.models import Client
from apps.privacy.services import retention_apply


class Command(BaseCommand):
    help = (
        "Erase the conversations idle longer than their plan's retention_days, as the daily "
        "task privacy.apply_retention does: at most --limit (PRIVACY_RETENTION_BATCH) per run, "
        "one progress line per client. --dry-run counts and changes nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--client", metavar="SLUG", help="Only this client.")
        parser.add_argument("--limit", type=int, help="Conversations to erase at most.")
        parser.add_argument(
            "--dry-run", action="store_true", help="Count what would go; change nothing."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        client = None
        if options["client"]:
            client = Client.objects.filter(slug=options["client"]).select_related("plan").first()
            if client is None:
                raise CommandError(f"--client: no client with the slug {options['client']!r}.")
        if options["limit"] is not None and options["limit"] < 0:
            raise CommandError("--limit must be 0 or more.")
        report = retention_apply(client=client, limit=options["limit"], dry_run=options["dry_run"])
        verb = "Would erase" if options["dry_run"] else "Erased"
        for slug, n in sorted(report.clients.items()):
            self.stdout.write(f"{slug}: {verb.lower()} {n} conversation(s)")
        self.stdout.write(
            f"{verb} {report.erased} conversation(s); {report.remaining} left for the next run; "
            f"{report.records_purged} expired record(s) removed."
        )
