"""What privacy_export and privacy_erase share: the arguments naming the client and the
customer, the call of the service for them, and the report lines."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.management.base import CommandError, CommandParser

from apps.clients.models import Client
from apps.core.exceptions import ApplicationError
from apps.privacy.models import MatchKind, RequestChannel
from apps.privacy.selectors import SubjectMatch
from apps.privacy.services import UnconfirmedOnly


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


def subject_run(
    service: Callable[..., Any], command: str, options: dict[str, Any], **extra: Any
) -> tuple[Client, Any]:
    """The client and what `service` (subject_export, subject_erase) returns for the customer
    the options name, asked through this command; a refusal becomes the command's error."""
    client, match = subject_from(options)
    try:
        result = service(
            client=client,
            match=match,
            channel=RequestChannel.COMMAND,
            requested_by_label=f"manage.py {command}",
            dry_run=options["dry_run"],
            include_unconfirmed=options["include_unconfirmed"],
            **extra,
        )
    except UnconfirmedOnly as exc:
        raise CommandError("\n".join([exc.message, *unconfirmed_lines(exc.unconfirmed)])) from None
    except ApplicationError as exc:
        raise CommandError(exc.message) from None
    return client, result
