import json
from typing import Any

import yaml
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.clients.models import Client
from apps.provisioning.services import client_export


class Command(BaseCommand):
    help = (
        "Print a client as a tenant file (docs/tenant-import.md): settings, business_info with "
        "its FAQs, knowledge articles and sources, and MCP servers (without their secrets). "
        "Tools are left out (their secrets are write-only). Importing the output again changes "
        "nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="The client's slug.")
        parser.add_argument(
            "--format", choices=["json", "yaml"], default="json", help="Output format."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        client = Client.objects.select_related("plan").filter(slug=options["slug"]).first()
        if client is None:
            raise CommandError(f"No client with slug {options['slug']!r}.")
        data = {"clients": [client_export(client=client)]}
        if options["format"] == "yaml":
            self.stdout.write(yaml.safe_dump(data, allow_unicode=True, sort_keys=False))
        else:
            self.stdout.write(json.dumps(data, indent=2, ensure_ascii=False))
