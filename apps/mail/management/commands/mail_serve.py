"""`manage.py mail_serve` — a local SMTP server that answers e-mail (docs/email.md "The demo"):
mail to a channel's support address (the demo's support@demo.localhost) goes through the same
pipeline as a provider's webhook; the replies go out through Django's e-mail backend (the
demo's prints them here)."""

from __future__ import annotations

import threading
from typing import Any

from aiosmtpd.controller import Controller
from django.core.management.base import BaseCommand

from apps.mail.local_smtp import MAX_MESSAGE_BYTES, LocalMailHandler
from apps.mail.models import MailChannel


class Command(BaseCommand):
    help = (
        "Receive SMTP on a local port for the e-mail channels' addresses and answer it like "
        "any inbound e-mail. Senders are not verified unless --trusted-relay says a mail "
        "server that checked DKIM/SPF relays to it."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="Address to listen on.")
        parser.add_argument("--port", type=int, default=2525, help="Port to listen on.")
        parser.add_argument(
            "--trusted-relay",
            action="store_true",
            help="Treat senders as verified (only behind a relay that checked DKIM/SPF).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        handler = LocalMailHandler(trusted_relay=options["trusted_relay"])
        controller = Controller(
            handler,
            hostname=options["host"],
            port=options["port"],
            data_size_limit=MAX_MESSAGE_BYTES,
        )
        addresses = sorted(
            MailChannel.objects.unscoped("the command lists every address it answers")
            .filter(enabled=True)
            .values_list("address", flat=True)
        )
        controller.start()
        self.stdout.write(
            f"Answering e-mail on smtp://{options['host']}:{options['port']} for: "
            + (", ".join(addresses) or "no enabled e-mail channel yet")
        )
        if options["trusted_relay"]:
            self.stdout.write("Senders count as verified (--trusted-relay).")
        self.stdout.write("Replies go out through Django's e-mail backend. Ctrl-C stops.")
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
        finally:
            controller.stop()
