import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.core.exceptions import ApplicationError
from apps.provisioning.services import tenant_import


def read_tenant_file(path: Path | str) -> Any:
    """The parsed tenant file (JSON; YAML when it is named *.yaml or *.yml), or a CommandError
    that says what is wrong with it."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CommandError(f"{path}: no such file") from None
    if path.suffix.lower() in {".yaml", ".yml"}:
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
            problem = getattr(exc, "problem", None) or str(exc)
            raise CommandError(f"{path}: not valid YAML{where}: {problem}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(
            f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None


class Command(BaseCommand):
    help = (
        "Create or update model prices, plans and clients (business info, widget, tools) from a "
        'tenant JSON file. Prints {"clients": [{slug, widget_key, api_key}]}; api_key is a new '
        "secret (shown once) when the client had none, else null."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path, help="Tenant file (docs/tenant-import.md)")

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["file"]
        data = read_tenant_file(path)
        try:
            imported = tenant_import(data=data)
        except ApplicationError as exc:
            raise CommandError(f"{path}: {exc.message}\nNothing was changed.") from None
        self.stdout.write(json.dumps({"clients": [asdict(c) for c in imported]}, indent=2))
