"""`manage.py privacy_export --client SLUG --email ADDRESS [--format html] [--output FILE]`"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apps.privacy.downloads import export_text
from apps.privacy.management.commands._subject import (
    add_subject_arguments,
    counts_lines,
    subject_run,
    unconfirmed_lines,
)
from apps.privacy.services import subject_export


class Command(BaseCommand):
    help = (
        "Export everything a client holds about one customer (found by e-mail, conversation id "
        "or visitor id) as one JSON file, or a readable HTML page, and record the export. "
        "--dry-run only counts (docs/privacy.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_subject_arguments(parser)
        parser.add_argument("--format", choices=["json", "html"], default="json")
        parser.add_argument(
            "--output", metavar="FILE", help="Write the export here (default: standard output)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        _client, result = subject_run(subject_export, "privacy_export", options)
        if result.request is None:
            self.stdout.write("Would export (dry run: nothing was recorded):")
            self.stdout.write("\n".join(counts_lines(result.counts)))
            self.stdout.write("\n".join(unconfirmed_lines(result.unconfirmed)))
            return
        text = export_text(result.document, options["format"])
        for line in unconfirmed_lines(result.unconfirmed):
            self.stderr.write(line)
        if options["output"]:
            Path(options["output"]).write_text(text, encoding="utf-8")
            self.stderr.write(
                f"Exported {result.counts['conversations']} conversation(s) to "
                f"{options['output']} (record {result.request.public_id})."
            )
        else:
            self.stdout.write(text)
