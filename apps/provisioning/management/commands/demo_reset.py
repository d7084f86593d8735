from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.core.exceptions import ApplicationError
from apps.provisioning.management.commands.import_client import read_tenant_file
from apps.provisioning.services import demo_reset

DEFAULT_TENANT = "demo/tenant.json"


class Command(BaseCommand):
    help = (
        "Put the local demo shop back as `make demo` first made it, so the README's flows (the "
        "cancellation of order TH-12345 …) work again: deletes the demo shop's conversations, "
        "tool runs and notes, and imports the tenant file again. Only clients whose tools run "
        "the built-in demo handlers are reset. Local demo only."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--tenant",
            metavar="FILE",
            default=DEFAULT_TENANT,
            help=f"The demo's tenant file (default {DEFAULT_TENANT}).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        data = read_tenant_file(options["tenant"])
        try:
            results = demo_reset(data=data)
        except ApplicationError as exc:
            raise CommandError(
                f"{options['tenant']}: {exc.message}\nNothing was changed."
            ) from None
        for result in results:
            self.stdout.write(
                f"{result.slug}: removed {result.conversations} conversation(s), "
                f"{result.tool_runs} tool run(s) and {result.notes} note(s); "
                "orders, plan and settings are as shipped."
            )
        if not results:
            self.stdout.write("Nothing to reset: the demo shop was imported fresh.")
