"""The tenant file's `mail_channels` (docs/tenant-import.md, docs/email.md): channels are
upserted by address with their secrets, a secret left out keeps the stored one, a bad entry
fails the file naming the place (the admin's and the API's rules, apps/mail/channels.py) and
changes nothing, and the export holds the channels without a secret or inbound token and
imports again without a change."""

from __future__ import annotations

from typing import Any

import pytest

from apps.clients.models import Client
from apps.core.exceptions import ApplicationError
from apps.mail.models import MailChannel
from apps.provisioning.services import client_export, tenant_import

pytestmark = pytest.mark.django_db

SECRET = "mailgun-signing-key-51f0c2"
PASSWORD = "imap-password-9d2e77"
PLACE = "clients[0].mail_channels[0]"


def mailgun(**changes: Any) -> dict[str, Any]:
    return {
        "address": "support@mailshop.example",
        "display_name": "Mail Shop support",
        "inbound_via": "mailgun",
        "webhook_secret": SECRET,
        **changes,
    }


def imap(**changes: Any) -> dict[str, Any]:
    return {
        "address": "help@mailshop.example",
        "inbound_via": "imap",
        "imap_host": "imap.mailshop.example",
        "imap_username": "help",
        "imap_password": PASSWORD,
        "trusted_authserv_id": "mx.mailshop.example",
        "max_replies_per_thread_hour": 3,
        **changes,
    }


def tenant(channels: list[dict[str, Any]], slug: str = "mail-shop") -> dict[str, Any]:
    return {
        "plans": [{"slug": "mail", "name": "Mail"}],
        "clients": [{"slug": slug, "name": "Mail Shop", "plan": "mail", "mail_channels": channels}],
    }


def channels_of(slug: str = "mail-shop") -> dict[str, MailChannel]:
    client = Client.objects.get(slug=slug)
    return {c.address: c for c in MailChannel.objects.for_client(client)}


def test_channels_are_stored_with_their_secrets_and_their_own_inbound_token():
    tenant_import(data=tenant([mailgun(), imap()]))
    rows = channels_of()
    webhook, mailbox = rows["support@mailshop.example"], rows["help@mailshop.example"]
    assert (webhook.inbound_via, webhook.webhook_secret, webhook.display_name) == (
        "mailgun",
        SECRET,
        "Mail Shop support",
    )
    assert (mailbox.imap_host, mailbox.imap_username, mailbox.imap_password) == (
        "imap.mailshop.example",
        "help",
        PASSWORD,
    )
    assert (mailbox.imap_port, mailbox.trusted_authserv_id) == (993, "mx.mailshop.example")
    assert mailbox.max_replies_per_thread_hour == 3
    assert len({webhook.inbound_token, mailbox.inbound_token}) == 2
    assert all(len(c.inbound_token) >= 40 for c in rows.values())


def test_a_reimport_without_secrets_keeps_them_and_changes_what_it_says():
    tenant_import(data=tenant([mailgun(), imap()]))
    before = channels_of()
    tokens = {a: c.inbound_token for a, c in before.items()}
    tenant_import(data=tenant([mailgun(webhook_secret="", enabled=False), imap(imap_password="")]))
    after = channels_of()
    assert after["support@mailshop.example"].webhook_secret == SECRET
    assert after["support@mailshop.example"].enabled is False
    assert after["help@mailshop.example"].imap_password == PASSWORD
    assert {a: c.inbound_token for a, c in after.items()} == tokens


@pytest.mark.parametrize(
    ("channels", "where", "says"),
    [
        ([mailgun(address="not-an-address")], f"{PLACE}.address", "An e-mail address"),
        ([mailgun(inbound_via="pigeon")], f"{PLACE}.inbound_via", "Choose one of"),
        ([mailgun(webhook_secret="")], f"{PLACE}.webhook_secret", "Needed to check"),
        ([imap(imap_password="")], f"{PLACE}.imap_password", "Needed to read the mailbox"),
        ([imap(imap_host="")], f"{PLACE}.imap_host", "Needed to read the mailbox"),
        ([imap(imap_port=70000)], f"{PLACE}.imap_port", "A port number"),
        ([mailgun(max_replies_per_sender_hour=101)], f"{PLACE}.max_replies_per_sender_hour", "100"),
        ([mailgun(max_attachment_bytes=10**9)], f"{PLACE}.max_attachment_bytes", "25 MB"),
        ([mailgun(inbound_token="mine")], f"{PLACE}.inbound_token", "Extra inputs"),
        (
            [mailgun(), mailgun(address="SUPPORT@mailshop.example")],
            "clients[0]",
            "mail_channels: address used twice",
        ),
    ],
)
def test_a_bad_channel_fails_the_file_naming_the_place(channels, where, says):
    with pytest.raises(ApplicationError) as refused:
        tenant_import(data=tenant(channels))
    fields = refused.value.extra["fields"]
    assert where in fields, fields
    assert says in fields[where]
    assert SECRET not in str(refused.value) and PASSWORD not in str(refused.value)
    assert not Client.objects.filter(slug="mail-shop").exists()  # nothing was changed


def test_the_export_has_no_secret_and_imports_again_unchanged():
    tenant_import(data=tenant([mailgun(), imap()]))
    shop = Client.objects.get(slug="mail-shop")
    exported = client_export(client=shop)
    text = repr(exported)
    assert SECRET not in text and PASSWORD not in text
    for channel in channels_of().values():
        assert channel.inbound_token not in text
    assert [c["address"] for c in exported["mail_channels"]] == [
        "help@mailshop.example",
        "support@mailshop.example",
    ]
    assert "webhook_secret" not in exported["mail_channels"][1]
    before = {
        a: (c.updated_at, c.webhook_secret, c.imap_password) for a, c in channels_of().items()
    }
    tenant_import(data={"clients": [exported]})
    after = {a: (c.updated_at, c.webhook_secret, c.imap_password) for a, c in channels_of().items()}
    assert after == before
    # … into another client: the channels arrive without the secrets they need, named.
    copy = {**exported, "slug": "mail-copy", "name": "Copy"}
    with pytest.raises(ApplicationError) as refused:
        tenant_import(data={"clients": [copy]})
    fields = refused.value.extra["fields"]
    assert "clients[0].mail_channels[0].imap_password" in fields
    assert "clients[0].mail_channels[1].webhook_secret" in fields
