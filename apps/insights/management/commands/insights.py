"""`manage.py insights --client SLUG [--days 7] [--dry-run]` — run the insights job for one
client now and print its proposals (docs/operations.md)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.clients.models import Client
from apps.core.exceptions import ApplicationError
from apps.insights.models import ProposalKind
from apps.insights.services import generate_insights, insight_window


class Command(BaseCommand):
    help = (
        "Group one client's recent escalations, low-confidence and questioned answers and "
        "FAILURE notes by topic and propose FAQ entries and notes (pending staff review)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--client", required=True, help="The client's slug.")
        parser.add_argument(
            "--days",
            type=int,
            default=None,
            help="Whole days before today to read (default: the INSIGHTS_DAYS setting).",
        )
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="Call the model and print the proposals without storing any.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        client = Client.objects.select_related("plan").filter(slug=options["client"]).first()
        if client is None:
            raise CommandError(f"No client with the slug {options['client']!r}.")
        days = options["days"] if options["days"] is not None else int(settings.INSIGHTS_DAYS)
        try:
            since, until = insight_window(days=days)
            result = generate_insights(
                client=client, since=since, until=until, dry_run=options["dry_run"]
            )
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        run = result.run
        out = self.stdout
        found = ", ".join(f"{n} {kind}" for kind, n in sorted(run.found.items())) or "nothing"
        out.write(
            f"Insights for {client.slug}, {since:%Y-%m-%d %H:%M} – {until:%Y-%m-%d %H:%M}"
            f"{' (dry run: nothing stored)' if options['dry_run'] else ''}"
        )
        if result.repeated:
            out.write("This window was analysed before; showing its proposals (no model call).")
        out.write(
            f"Read: {found}; sent {run.items_sent}, left out {run.items_left_out} (token bound)."
        )
        out.write(
            f"Model calls: {run.llm_calls} ({run.model or '-'}), tokens "
            f"{run.prompt_tokens}+{run.completion_tokens}; status {run.status}."
        )
        if run.error:
            out.write(self.style.ERROR(f"Error: {run.error}"))
        if not result.proposals:
            out.write("No proposals.")
        for proposal in result.proposals:
            out.write("")
            out.write(
                f"[{proposal.get_status_display()}] {proposal.get_kind_display()}: "
                f"{proposal.title} — {proposal.count} conversation(s)"
            )
            if proposal.kind == ProposalKind.FAQ:
                out.write(f"  Q: {proposal.question}")
                out.write(f"  A: {proposal.answer}")
            else:
                out.write(f"  {proposal.note_type}: {proposal.content}")
            for public_id in proposal.conversation_ids[:5]:
                out.write(f"  e.g. conversation {public_id}")
        if run.status == "failed":
            raise CommandError(f"The insights run failed: {run.error}")
