"""A client's e-mail channels as staff configure them: the settings' rules, create, update and
delete, and the inbound webhook URL to give the provider (docs/email.md "Staff side").

The admin form, the staff API (`/api/v1/mail-channels/`) and the tenant file
(`clients[].mail_channels`) all come here, so their rules cannot drift. Secrets (the webhook
secret, the IMAP password) are write-only: an empty or absent one keeps the saved one, and none
is ever read back — only whether one is set."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.utils.translation import gettext

from apps.clients.models import Client
from apps.core.exceptions import ApplicationError
from apps.core.links import absolute_url
from apps.core.settings_checks import column_defaults, raise_field_problems, settings_applied
from apps.mail.models import InboundVia, MailChannel, MailMessage

# The columns a person sets (admin, API, tenant file), in the order forms show them.
CHANNEL_FIELDS = (
    "address",
    "display_name",
    "inbound_via",
    "webhook_secret",
    "imap_host",
    "imap_port",
    "imap_ssl",
    "imap_username",
    "imap_password",
    "imap_folder",
    "trusted_authserv_id",
    "max_replies_per_thread_hour",
    "max_replies_per_sender_hour",
    "max_attachment_bytes",
    "enabled",
)
SECRET_FIELDS = ("webhook_secret", "imap_password")
IMAP_NEEDS = ("imap_host", "imap_username", "imap_password")
# Providers whose inbound webhook is signed with a key of their own (Mailgun's webhook signing
# key, MailerSend's and Mandrill's webhook secret); the others post with basic auth
# ("user:password" in the secret). Either way the webhook is refused without a secret.
MAX_ATTACHMENT_BYTES = 25 * 1024 * 1024  # the largest any of the providers delivers
MAX_REPLIES_PER_HOUR = 100
INBOUND_PATH = "/mail/inbound/{token}/"


def channel_inbound_url(channel: MailChannel) -> str:
    """The address to give the provider for this channel's inbound webhook ("" for IMAP)."""
    if channel.inbound_via == InboundVia.IMAP or not channel.inbound_token:
        return ""
    return absolute_url(INBOUND_PATH.format(token=channel.inbound_token))


def channel_defaults() -> dict[str, Any]:
    return column_defaults(MailChannel, CHANNEL_FIELDS)


def mail_channel_rule_problems(
    data: Mapping[str, Any],
    *,
    client: Client | None = None,
    channel: MailChannel | None = None,
) -> list[tuple[str, str]]:
    """Every rule of a channel's settings `data` (all its columns), as (field, message)."""
    problems: list[tuple[str, str]] = []
    address = str(data.get("address") or "").strip()
    try:
        validate_email(address)
    except ValidationError:
        problems.append(("address", gettext("An e-mail address, e.g. support@shop.example.")))
    else:
        if client is not None:
            others = MailChannel.objects.for_client(client).filter(address__iexact=address)
            if channel is not None:
                others = others.exclude(pk=channel.pk)
            if others.exists():
                problems.append(
                    ("address", gettext("This client already has an e-mail channel for it."))
                )
    via = data.get("inbound_via")
    if via not in InboundVia.values:
        choices = ", ".join(InboundVia.values)
        problems.append(
            ("inbound_via", gettext("Choose one of: %(choices)s.") % {"choices": choices})
        )
    elif via == InboundVia.IMAP:
        message = gettext("Needed to read the mailbox over IMAP.")
        problems += [(name, message) for name in IMAP_NEEDS if not data.get(name)]
        port = data.get("imap_port")
        if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
            problems.append(("imap_port", gettext("A port number from 1 to 65535.")))
    elif not data.get("webhook_secret"):
        problems.append(
            (
                "webhook_secret",
                gettext(
                    "Needed to check that inbound mail really comes from the provider: its "
                    "webhook signing key, or the user:password it posts with."
                ),
            )
        )
    for name in ("max_replies_per_thread_hour", "max_replies_per_sender_hour"):
        value = data.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 100:
            problems.append((name, gettext("From 0 (never answer) to 100 replies an hour.")))
    size = data.get("max_attachment_bytes")
    if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= MAX_ATTACHMENT_BYTES:
        problems.append(
            ("max_attachment_bytes", gettext("From 0 (keep no files) to 26214400 bytes (25 MB)."))
        )
    return problems


def mail_channel_problems(values: Mapping[str, Any], *, needs: bool = False) -> dict[str, str]:
    """What is wrong with these column values (column -> the first message); {} when nothing.
    Only the columns in `values` are judged (the tenant file checks a field at a time); with
    `needs`, also what the chosen `inbound_via` needs (pass the stored secret for one the
    caller keeps)."""
    data = {**channel_defaults(), **values}
    given = set(values)
    if "address" not in values:
        data["address"] = "judged@elsewhere.invalid"
    problems: dict[str, str] = {}
    for column, message in mail_channel_rule_problems(data):
        needed = needs and column in (*IMAP_NEEDS, "webhook_secret")
        if (column in given or needed) and column not in problems:
            problems[column] = message
    return problems


def mail_channel_clean(
    *, client: Client | None, values: Mapping[str, Any], channel: MailChannel | None = None
) -> dict[str, Any]:
    """The channel's settings once `values` are applied (to `channel`, or to a new one),
    checked. An empty or absent secret keeps the saved one. Raises ApplicationError naming every
    bad field (`{"fields": {field: [message]}}`)."""
    data = settings_applied(
        MailChannel, CHANNEL_FIELDS, saved=channel, values=values, secrets=SECRET_FIELDS
    )
    data["address"] = str(data.get("address") or "").strip()
    for name in (
        "display_name",
        "imap_host",
        "imap_username",
        "imap_folder",
        "trusted_authserv_id",
    ):
        data[name] = str(data.get(name) or "").strip()
    data["imap_folder"] = data["imap_folder"] or "INBOX"
    raise_field_problems(mail_channel_rule_problems(data, client=client, channel=channel))
    data["enabled"] = bool(data.get("enabled"))
    data["imap_ssl"] = bool(data.get("imap_ssl"))
    return data


def _address_taken() -> ApplicationError:
    message = gettext("This client already has an e-mail channel for it.")
    return ApplicationError(f"address: {message}", {"fields": {"address": [message]}})


def new_inbound_token() -> str:
    return secrets.token_urlsafe(32)


def mail_channel_create(*, client: Client, **values: Any) -> MailChannel:
    """A new e-mail channel of the client's, checked by `mail_channel_clean`, with a fresh
    random token for its inbound webhook URL."""
    data = mail_channel_clean(client=client, values=values)
    try:
        with transaction.atomic():
            return MailChannel.objects.create(
                client=client, inbound_token=new_inbound_token(), **data
            )
    except IntegrityError:  # the same address, saved between the check and the insert
        raise _address_taken() from None


def mail_channel_update(*, client: Client, channel: MailChannel, **values: Any) -> MailChannel:
    """Change the given settings (checked by `mail_channel_clean`; an empty secret keeps the
    saved one). Moving the mailbox (host, user or folder) starts reading it afresh."""
    if channel.client_id != client.pk:
        raise ValueError("channel belongs to another client")
    try:
        with transaction.atomic():
            locked = MailChannel.objects.for_client(client).select_for_update().get(pk=channel.pk)
            data = mail_channel_clean(client=client, values=values, channel=locked)
            moved = any(
                data[name] != getattr(locked, name)
                for name in ("imap_host", "imap_username", "imap_folder")
            )
            for name, value in data.items():
                setattr(locked, name, value)
            if moved:
                locked.imap_last_uid, locked.imap_uidvalidity = 0, 0
            locked.save()
    except IntegrityError:
        raise _address_taken() from None
    return locked


def mail_channel_delete(*, client: Client, channel: MailChannel) -> None:
    """Delete a channel that never received nor sent mail. One with mail keeps it for its
    conversations (409): disable it instead."""
    with transaction.atomic():
        locked = MailChannel.objects.for_client(client).select_for_update().get(pk=channel.pk)
        if MailMessage.objects.for_client(client).filter(channel=locked).exists():
            message = gettext(
                "This channel's e-mails belong to conversations and are kept: disable the "
                "channel instead."
            )
            raise ApplicationError(message, status=409, code="in_use")
        locked.delete()
