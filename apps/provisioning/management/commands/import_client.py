import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.core.exceptions import ApplicationError
from apps.provisioning.files import load_tenant_file
from apps.provisioning.services import tenant_import


def read_tenant_file(path: Path | str) -> Any:
    """The parsed tenant file (JSON; YAML when it is named *.yaml or *.yml) with its article
    directories read in, or a CommandError that says what is wrong with it."""
    try:
        return load_tenant_file(path)
    except ApplicationError as exc:
        named = exc.message.startswith(str(path))
        raise CommandError(exc.message if named else f"{path}: {exc.message}") from None


class Command(BaseCommand):
    help = (
        "Create or update model prices, plans and clients (business info, widget, tools, "
        "knowledge articles and sources, MCP servers) from a "
        'tenant JSON file. Prints {"clients": [{slug, widget_key, api_key, identity_secret}]}; '
        "api_key is a new secret (shown once) when the client had none, else null; "
        "identity_secret likewise, when the file asks identity.generate_secret."
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
