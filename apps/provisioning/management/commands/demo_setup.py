from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.accounts.models import Membership, Role, User
from apps.billing.models import ModelPrice
from apps.clients.models import Client, Plan
from apps.core.exceptions import ApplicationError
from apps.provisioning.importer import parse_tenant_file
from apps.provisioning.management.commands.import_client import read_tenant_file
from apps.provisioning.services import ImportedClient, tenant_import
from apps.simulations.cases import cases_import
from apps.simulations.models import SimCase

DEMO_EMAIL = "admin@guidedesk.example"
DEMO_PASSWORD = "guidedesk-demo"  # noqa: S105 - the local demo's published credential
# Addresses a server listens on that no browser can open: print the loopback name instead.
WILDCARD_HOSTS = {"", "0.0.0.0", "::", "[::]"}  # noqa: S104 - compared, never bound


# The sign-in page demo/tenant.json names: the demo shop on the default host and port.
DEFAULT_SIGNIN_URL = "http://127.0.0.1:8000/"


def absent_part(data: dict[str, Any]) -> dict[str, Any]:
    """The part of a (validated) tenant file that is not in the database yet: its model prices,
    plans and clients that do not exist. What exists — and whatever staff changed in it since
    (a plan's mode and budgets, a tool's approval rule, an article) — is left as it is."""
    prices = {p.model for p in ModelPrice.objects.all()}
    plans = set(Plan.objects.values_list("slug", flat=True))
    clients = set(Client.objects.values_list("slug", flat=True))
    return {
        **data,
        "model_prices": [p for p in data.get("model_prices", []) if p.get("model") not in prices],
        "plans": [p for p in data.get("plans", []) if p.get("slug") not in plans],
        "clients": [c for c in data.get("clients", []) if c.get("slug") not in clients],
    }


def base_url(host: str, port: int) -> str:
    """The address to open in a browser for a server bound to `host:port`."""
    if host in WILDCARD_HOSTS:
        host = "127.0.0.1"
    elif ":" in host and not host.startswith("["):
        host = f"[{host}]"  # a bare IPv6 address
    return f"http://{host}:{port}/"


class Command(BaseCommand):
    help = (
        "The local demo (`make demo`, `make simulate`): optionally create the clients, plans and "
        "model prices of a tenant file that do not exist yet (what exists is never overwritten: "
        "staff's changes stay; --overwrite, as `make demo-reset` does, imports the whole file), "
        "create the demo superuser (idempotent) and print one block with the addresses (for the "
        "host and port the demo is served on), the sign-in and the widget and API keys. Local "
        "demo only."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--tenant",
            metavar="FILE",
            help="Import this tenant file first (as `import_client` does) and print its keys.",
        )
        parser.add_argument(
            "--simulations",
            metavar="FILE",
            help='Then import the simulation test cases of this file ({"client": slug, "tests": '
            "[cases]}, e.g. demo/simulations/demo.json) into that client; each suite of the file "
            "becomes exactly the file's cases (`manage.py simulate --suite demo` runs them).",
        )
        parser.add_argument(
            "--overwrite",
            action="store_true",
            help="Import the whole tenant file and the simulations file over what is there "
            "(`make demo-reset`), instead of creating only what is absent.",
        )
        parser.add_argument("--host", default="127.0.0.1", help="The host the demo is served on.")
        parser.add_argument(
            "--port", type=int, default=8000, help="The port the demo is served on."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        imported: list[ImportedClient] = []
        created: set[str] = set()
        overwrite = bool(options["overwrite"])
        if options["tenant"]:
            imported, created = self.import_tenant(options["tenant"], overwrite=overwrite)
        served = base_url(options["host"], options["port"])
        # The demo shop is its own sign-in page: point the tenant file's default at the address
        # the demo is served on (PORT=8011 make demo).
        for done in imported:
            Client.objects.filter(slug=done.slug, signin_url=DEFAULT_SIGNIN_URL).exclude(
                signin_url=served
            ).update(signin_url=served)
        simulations = (
            self.import_cases(options["simulations"], overwrite=overwrite, created=created)
            if options["simulations"]
            else ""
        )
        user = User.objects.filter(email=DEMO_EMAIL).first()
        if user is None:
            user = User.objects.create_superuser(DEMO_EMAIL, DEMO_PASSWORD)
        for client in Client.objects.all():
            Membership.objects.get_or_create(
                client=client, user=user, defaults={"role": Role.OWNER}
            )
        self.stdout.write(self.summary(imported, served))
        if simulations:
            self.stdout.write(simulations)

    def import_tenant(self, path: str, *, overwrite: bool) -> tuple[list[ImportedClient], set[str]]:
        """Import the tenant file (all of it with `overwrite`, else only what is absent); the
        file's clients with their keys, and the slugs of the clients created now."""
        data = read_tenant_file(path)
        try:
            parse_tenant_file(data)  # a broken file fails here, whatever exists
            before = set(Client.objects.values_list("slug", flat=True))
            part = data if overwrite else absent_part(data)
            anything = part["clients"] or part["plans"] or part["model_prices"]
            done = {c.slug: c for c in tenant_import(data=part)} if anything else {}
        except ApplicationError as exc:
            raise CommandError(f"{path}: {exc.message}\nNothing was changed.") from None
        imported = []
        for entry in data.get("clients", []):
            slug = entry["slug"]
            found = done.get(slug)
            if found is None:  # there already, kept as staff left it
                client = Client.objects.get(slug=slug)
                found = ImportedClient(slug=slug, widget_key=client.widget_key, api_key=None)
            imported.append(found)
        return imported, {c.slug for c in imported} - before

    def import_cases(self, path: str, *, overwrite: bool, created: set[str]) -> str:
        """Import a simulations file's cases into its client — only when the client was created
        now or has no cases yet, unless `overwrite`; one line saying what changed."""
        data = read_tenant_file(path)
        slug = data.get("client") if isinstance(data, dict) else None
        client = Client.objects.filter(slug=slug).first() if isinstance(slug, str) else None
        if client is None:
            raise CommandError(
                f'{path}: names no imported client ("client": {slug!r}); import its tenant '
                "file first.\nNothing was changed."
            )
        kept = SimCase.objects.for_client(client).count()
        if kept and not overwrite and client.slug not in created:
            return (
                f"  Simulations: {kept} test case(s) for {client.slug}, kept as they are "
                "(`make demo-reset` restores the shipped ones); run them with `make simulate`.\n"
            )
        try:
            counts = cases_import(client=client, data=data.get("tests", []), replace_suite=True)
        except ApplicationError as exc:
            raise CommandError(f"{path}: {exc.message}\nNothing was changed.") from None
        total = sum(counts[k] for k in ("created", "updated", "unchanged"))
        return (
            f"  Simulations: {total} test case(s) for {client.slug} from {path} "
            f"({counts['created']} new, {counts['updated']} updated, {counts['deleted']} "
            "removed); run them with `make simulate`.\n"
        )

    def summary(self, imported: list[ImportedClient], url: str) -> str:
        model = (
            f"{settings.LLM_MODEL} (OPENAI_API_KEY is set)"
            if settings.OPENAI_API_KEY
            else "the OFFLINE DEMO MODEL (set OPENAI_API_KEY for a real model)"
        )
        shop = Client.objects.filter(is_active=True).order_by("pk").first()
        lines = [
            "",
            "GuideDesk demo is ready.",
            f"  Demo shop:   {url}" + (f"  ({shop.name}, with the chat widget)" if shop else ""),
            f"  Admin:       {url}admin/",
            f"  Sign in:     {DEMO_EMAIL} / {DEMO_PASSWORD}",
            f"  Console:     {url}console/",
            f"  API docs:    {url}api/docs/",
        ]
        several = len(imported) > 1
        for client in imported:
            label = f" ({client.slug})" if several else ""
            lines.append(f"  Widget key{label}:  {client.widget_key}")
            if client.api_key:
                lines.append(
                    f"  API key{label}:     {client.api_key}  (new: shown only now, keep it)"
                )
            else:
                lines.append(
                    f"  API key{label}:     issued earlier (stored hashed, not shown again; "
                    "issue another in the admin under API keys)"
                )
        lines += [f"  Assistant:   {model}", ""]
        return "\n".join(lines)
