"""`manage.py knowledge_sync --client SLUG [--source NAME_OR_ID]` — sync a client's knowledge
sources now, in this process, and print each one's outcome (docs/knowledge.md, "Importing")."""

from __future__ import annotations

import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.clients.models import Client
from apps.knowledge import sources
from apps.knowledge.models import KnowledgeSource
from apps.knowledge.services.sync import source_problem, source_sync


class Command(BaseCommand):
    help = "Import a client's web-page, sitemap and file knowledge sources now."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--client", required=True, help="The client's slug.")
        parser.add_argument(
            "--source", default="", help="Only this source (its name or public id)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        client = Client.objects.filter(slug=options["client"]).first()
        if client is None:
            raise CommandError(f"No client with the slug {options['client']!r}.")
        rows = KnowledgeSource.objects.for_client(client).filter(kind__in=sources.names(syncs=True))
        wanted = options["source"]
        if wanted:
            try:
                rows = rows.filter(public_id=uuid.UUID(wanted))
            except ValueError:
                rows = rows.filter(name=wanted)
        if not rows.exists():
            raise CommandError("No source to sync.")
        failed = 0
        for source in rows.order_by("name", "pk"):
            problem = source_problem(source)
            if problem:
                failed += 1
                self.stdout.write(f"{source.name}: {problem}")
                continue
            progress = source_sync(source=source)
            source.refresh_from_db()
            failed += source.status == "failed"
            self.stdout.write(f"{source.name}: {source.status} — {progress.get('message', '')}")
        if failed:
            raise CommandError(f"{failed} source(s) could not be synced.")
