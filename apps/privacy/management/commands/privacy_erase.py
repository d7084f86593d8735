"""`manage.py privacy_erase --client SLUG --email ADDRESS [--dry-run]`"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apps.privacy.management.commands._subject import (
    add_subject_arguments,
    counts_lines,
    subject_run,
    unconfirmed_lines,
)
from apps.privacy.services import subject_erase


class Command(BaseCommand):
    help = (
        "Erase everything a client holds about one customer (found by e-mail, conversation id "
        "or visitor id) and record it; usage figures stay for billing. --dry-run shows what "
        "would go and changes nothing (docs/privacy.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_subject_arguments(parser)
        parser.add_argument(
            "--identifier",
            action="append",
            default=[],
            metavar="TEXT",
            help="Also redact this (a name or address the customer typed) wherever it appears. "
            "Repeatable.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        client, result = subject_run(
            subject_erase, "privacy_erase", options, identifiers=options["identifier"]
        )
        verb = "Would erase" if result.request is None else "Erased"
        self.stdout.write(f"{verb} {result.conversations} conversation(s) of {client.slug}:")
        self.stdout.write("\n".join(counts_lines(result.counts)))
        for line in unconfirmed_lines(result.unconfirmed):
            self.stdout.write(line)
        for item in result.not_erased:
            self.stdout.write(
                f"Not erased: {item['where']} ({item['rows']}): {item['what']} — {item['why']}"
            )
        if result.request is None:
            self.stdout.write("Dry run: nothing was changed or recorded.")
        else:
            self.stdout.write(f"Recorded as {result.request.public_id}.")
