"""The arguments privacy_export and privacy_erase share: the client and the customer."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from apps.clients.models import Client
from apps.privacy.models import MatchKind
from apps.privacy.selectors import SubjectMatch


def add_subject_arguments(parser: CommandParser) -> None:
    parser.add_argument("--client", required=True, metavar="SLUG", help="The client (business).")
    found_by = parser.add_mutually_exclusive_group(required=True)
    found_by.add_argument("--email", help="The e-mail address the customer left in the chat.")
    found_by.add_argument("--conversation", metavar="ID", help="A conversation's id.")
    found_by.add_argument("--visitor", metavar="ID", help="The visitor id the site gave.")
    found_by.add_argument(
        "--customer", metavar="ID", help="The verified customer id the site signed."
    )
    parser.add_argument(
        "--include-unconfirmed",
        action="append",
        default=[],
        metavar="CONVERSATION_ID",
        help="With --email: also this conversation whose address was never confirmed (listed "
        "by a first run), once you have checked it is this customer's. Repeatable.",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="Show what would go; change and record nothing."
    )


def subject_from(options: dict[str, Any]) -> tuple[Client, SubjectMatch]:
    client = Client.objects.filter(slug=options["client"]).first()
    if client is None:
        raise CommandError(f"--client: no client with the slug {options['client']!r}.")
    for kind in (MatchKind.EMAIL, MatchKind.CONVERSATION, MatchKind.VISITOR, MatchKind.CUSTOMER):
        if options.get(kind):
            return client, SubjectMatch(kind, options[kind])
    raise CommandError("Give one of --email, --conversation, --visitor or --customer.")


def counts_lines(counts: dict[str, int]) -> list[str]:
    return [f"  {label}: {n}" for label, n in sorted(counts.items())]


def unconfirmed_lines(unconfirmed: list[dict[str, Any]]) -> list[str]:
    """The matches left out because the address was never confirmed, for staff to check."""
    if not unconfirmed:
        return []
    return [
        f"Left out: {len(unconfirmed)} conversation(s) with this address, never confirmed "
        "(add one with --include-unconfirmed ID once you have checked it is this customer's):",
        *(
            f"  {u['id']} started {u['created_at']}, {u['customer_messages']} customer message(s)"
            for u in unconfirmed
        ),
    ]
