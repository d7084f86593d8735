"""IMAP polling against a real dovecot the tests start (tests/mail/imap_server.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from django.conf import settings
from django.test import override_settings

from apps.clients.models import Client
from apps.conversations.models import Conversation
from apps.mail.authresults import authentication_results_verified, parse_authentication_results
from apps.mail.imap import imap_channel_poll
from apps.mail.models import Disposition, InboundVia, MailChannel, MailMessage
from apps.mail.tasks import imap_channels_due, imap_poll, imap_poll_channel
from tests.mail.webhook_payloads import make_channel, raw_mail

if TYPE_CHECKING:
    from tests.mail.imap_server import ImapServer

# the dovecot fixtures: `imap_server` (one per test session) and `imap_account`
pytest_plugins = ("tests.mail.imap_server",)
pytestmark = pytest.mark.django_db

TRUSTED = "mx.shop.example"


def imap_channel(
    client: Client, server: ImapServer, account: tuple[str, str], **fields
) -> MailChannel:
    user, password = account
    return make_channel(
        client,
        via=InboundVia.IMAP,
        imap_host=server.host,
        imap_port=server.port,
        imap_ssl=False,
        imap_username=user,
        imap_password=password,
        trusted_authserv_id=TRUSTED,
        **fields,
    )


def fresh(channel: MailChannel) -> MailChannel:
    return MailChannel.objects.for_client(channel.client).get(pk=channel.pk)


def inbound(client: Client) -> list[MailMessage]:
    return list(MailMessage.objects.for_client(client).filter(direction="in").order_by("id"))


def accepted_ids(client: Client) -> list[str]:
    return [m.header_message_id for m in inbound(client) if m.disposition == Disposition.ACCEPTED]


def deliver(server: ImapServer, account: tuple[str, str], **mail) -> str:
    message = raw_mail(**mail)
    server.append(account[0], message.as_bytes())
    return str(message["Message-ID"]).strip("<>")


def test_new_mails_are_received_once_and_flagged_seen(client_a, imap_server, imap_account):
    channel = imap_channel(client_a, imap_server, imap_account)
    first = deliver(imap_server, imap_account, text="Where is order 1001?")
    second = deliver(imap_server, imap_account, sender="bo@other.example", text="Refund please")

    result = imap_channel_poll(channel=channel)

    assert (result.received, result.error) == (2, "")
    assert accepted_ids(client_a) == [first, second]
    assert all(m.received_via == InboundVia.IMAP for m in inbound(client_a))
    assert imap_server.seen_flags(imap_account[0]) == {1: True, 2: True}
    channel = fresh(channel)
    assert channel.imap_last_uid == 2 and channel.last_error == ""
    assert channel.last_polled_at is not None

    again = imap_channel_poll(channel=channel)
    assert again.received == 0
    assert len(inbound(client_a)) == 2


@override_settings(MAIL_IMAP_BATCH=2)
def test_a_poll_stopped_mid_batch_neither_loses_nor_doubles_a_mail(
    client_a, imap_server, imap_account
):
    channel = imap_channel(client_a, imap_server, imap_account)
    ids = [deliver(imap_server, imap_account, text=f"Question {n}") for n in range(3)]

    # a bounded batch: two now, the third waits for the next poll
    first = imap_channel_poll(channel=channel)
    assert (first.received, first.more) == (2, True)
    assert accepted_ids(client_a) == ids[:2]

    # the worker died after mail 2 committed but before the mailbox heard of it: still unread
    with imap_server.mailbox(imap_account[0]) as box:
        box.flag("2", "\\Seen", False)
    # …and a worker that died before its transaction committed left the cursor behind
    MailChannel.objects.for_client(client_a).filter(pk=channel.pk).update(imap_last_uid=1)

    second = imap_channel_poll(channel=fresh(channel))
    assert second.error == ""
    assert accepted_ids(client_a) == ids  # each once
    assert [m.disposition for m in inbound(client_a)].count(Disposition.DUPLICATE) == 1
    assert fresh(channel).imap_last_uid == 3
    assert Conversation.objects.for_client(client_a).count() == 3


def test_a_new_uidvalidity_reads_the_folder_again_without_doubling(
    client_a, imap_server, imap_account
):
    channel = imap_channel(client_a, imap_server, imap_account)
    old = deliver(imap_server, imap_account, text="First question")
    imap_channel_poll(channel=channel)
    validity = fresh(channel).imap_uidvalidity

    imap_server.change_uidvalidity(imap_account[0])
    new = deliver(imap_server, imap_account, text="Second question")
    result = imap_channel_poll(channel=fresh(channel))

    channel = fresh(channel)
    assert result.error == ""
    assert channel.imap_uidvalidity != validity
    assert channel.imap_last_uid == 2
    assert accepted_ids(client_a) == [old, new]


def test_sender_verified_only_by_the_trusted_authentication_results(
    client_a, imap_server, imap_account
):
    channel = imap_channel(client_a, imap_server, imap_account)
    dkim_pass = f"{TRUSTED}; dkim=pass header.d=customer.example header.s=s1; spf=none"
    deliver(imap_server, imap_account, headers=[("Authentication-Results", dkim_pass)])
    # the same words from a server we do not trust
    deliver(
        imap_server,
        imap_account,
        headers=[
            ("Authentication-Results", "mx.attacker.example; dkim=pass header.d=customer.example")
        ],
    )
    # trusted, but the passing domain is not the From address's
    deliver(
        imap_server,
        imap_account,
        headers=[("Authentication-Results", f"{TRUSTED}; dkim=pass header.d=bulk.example")],
    )
    # the receiver's own (topmost) result says fail; a forged pass below it is never read
    deliver(
        imap_server,
        imap_account,
        headers=[
            ("Authentication-Results", f"{TRUSTED}; spf=fail smtp.mailfrom=customer.example"),
            ("Authentication-Results", f"{TRUSTED}; dkim=pass header.d=customer.example"),
        ],
    )

    imap_channel_poll(channel=channel)

    assert [m.sender_verified for m in inbound(client_a)] == [True, False, False, False]


def test_no_trusted_server_verifies_nobody(client_a, imap_server, imap_account):
    channel = imap_channel(client_a, imap_server, imap_account)
    MailChannel.objects.for_client(client_a).filter(pk=channel.pk).update(trusted_authserv_id="")
    deliver(
        imap_server,
        imap_account,
        headers=[("Authentication-Results", f"{TRUSTED}; dkim=pass header.d=customer.example")],
    )

    imap_channel_poll(channel=fresh(channel))

    assert [m.sender_verified for m in inbound(client_a)] == [False]


def test_a_wrong_password_is_recorded_and_does_not_raise(client_a, imap_server, imap_account):
    channel = imap_channel(client_a, imap_server, imap_account)
    deliver(imap_server, imap_account)
    MailChannel.objects.for_client(client_a).filter(pk=channel.pk).update(imap_password="wrong")

    result = imap_channel_poll(channel=fresh(channel))

    channel = fresh(channel)
    assert result.error
    assert channel.last_error and "Login" in channel.last_error
    assert channel.last_polled_at is not None
    assert channel.imap_last_uid == 0
    assert inbound(client_a) == []
    assert imap_server.seen_flags(imap_account[0]) == {1: False}


def test_an_unreachable_server_is_recorded(client_a):
    channel = make_channel(
        client_a,
        via=InboundVia.IMAP,
        imap_host="127.0.0.1",
        imap_port=1,
        imap_ssl=False,
        imap_username="x",
        imap_password="y",
    )

    imap_channel_poll(channel=channel)

    assert "ConnectionRefused" in fresh(channel).last_error


def test_a_channel_poll_never_touches_another_client(client_a, client_b, imap_server):
    imap_server.add_user("tenant-a-box", "pw-a")
    imap_server.add_user("tenant-b-box", "pw-b")
    channel_a = imap_channel(client_a, imap_server, ("tenant-a-box", "pw-a"))
    channel_b = imap_channel(client_b, imap_server, ("tenant-b-box", "pw-b"))
    # the very same mail (same Message-ID) sent to both businesses
    mail = raw_mail(text="Same question to two shops")
    imap_server.append("tenant-a-box", mail.as_bytes())
    imap_server.append("tenant-b-box", mail.as_bytes())
    b_before = Conversation.objects.for_client(client_b).count()

    imap_channel_poll(channel=channel_a)

    assert len(accepted_ids(client_a)) == 1
    assert inbound(client_b) == []
    assert Conversation.objects.for_client(client_b).count() == b_before
    assert fresh(channel_b).imap_last_uid == 0
    assert imap_server.seen_flags("tenant-b-box") == {1: False}

    imap_channel_poll(channel=channel_b)  # B's own copy is B's, not a duplicate of A's
    assert [m.disposition for m in inbound(client_b)] == [Disposition.ACCEPTED]
    assert inbound(client_a)[0].conversation_id != inbound(client_b)[0].conversation_id


# --- the beat ---


def test_the_beat_polls_each_due_channel_on_the_background_queue(
    client_a, imap_server, imap_account
):
    channel = imap_channel(client_a, imap_server, imap_account)
    deliver(imap_server, imap_account)

    assert imap_poll() == 1  # Celery runs eagerly in the tests: the poll ran

    assert len(accepted_ids(client_a)) == 1
    assert fresh(channel).last_polled_at is not None
    routes = settings.CELERY_TASK_ROUTES
    assert routes["mail.imap_poll"]["queue"] == settings.BACKGROUND_QUEUE
    assert routes["mail.imap_poll_channel"]["queue"] == settings.BACKGROUND_QUEUE
    assert (
        settings.CELERY_BEAT_SCHEDULE["mail-imap-poll"]["schedule"]
        == settings.MAIL_IMAP_POLL_SECONDS
    )


@override_settings(MAIL_IMAP_CHANNELS_PER_CLIENT=2)
def test_the_beat_caps_each_client(client_a, client_b):
    for _ in range(4):
        make_channel(client_a, via=InboundVia.IMAP, imap_host="127.0.0.1", imap_port=1)
    make_channel(client_b, via=InboundVia.IMAP, imap_host="127.0.0.1", imap_port=1)
    make_channel(client_b, via=InboundVia.MAILGUN)
    make_channel(client_b, via=InboundVia.IMAP, enabled=False)

    due = imap_channels_due()

    assert sorted(c.client_id for c in due) == sorted([client_a.pk, client_a.pk, client_b.pk])


def test_the_channel_task_skips_a_disabled_or_foreign_channel(client_a, client_b):
    channel = make_channel(client_a, via=InboundVia.IMAP, enabled=False)

    assert (
        imap_poll_channel.apply(kwargs={"client_id": client_a.pk, "channel_id": channel.pk}).get()
        == "gone"
    )
    # another client's id never reaches A's channel
    live = make_channel(client_a, via=InboundVia.IMAP, imap_host="127.0.0.1", imap_port=1)
    assert (
        imap_poll_channel.apply(kwargs={"client_id": client_b.pk, "channel_id": live.pk}).get()
        == "gone"
    )
    assert fresh(live).last_polled_at is None


# --- Authentication-Results (RFC 8601) ---


def test_authentication_results_parsing():
    server, results = parse_authentication_results(
        'mx.shop.example 1; (a comment (nested)) dkim=pass (good sig) header.d="customer.example";'
        " spf=softfail smtp.mailfrom=x@bulk.example; dmarc=none"
    )
    assert server == "mx.shop.example"
    assert results[0] == {"method": "dkim", "result": "pass", "header.d": "customer.example"}
    assert results[1]["method"] == "spf" and results[1]["smtp.mailfrom"] == "x@bulk.example"


@pytest.mark.parametrize(
    ("header", "sender", "verified"),
    [
        (f"{TRUSTED}; dkim=pass header.d=customer.example", "a@customer.example", True),
        (f"{TRUSTED}; dkim=pass header.d=customer.example", "a@mail.customer.example", True),
        (f"{TRUSTED}; spf=pass smtp.mailfrom=bounce@customer.example", "a@customer.example", True),
        (
            f"{TRUSTED}; spf=pass smtp.mailfrom=bounce@customer.example.evil",
            "a@customer.example",
            False,
        ),
        (f"{TRUSTED}; dkim=pass header.d=example", "a@customer.example", False),
        (f"{TRUSTED}; dkim=fail header.d=customer.example", "a@customer.example", False),
        (
            f"{TRUSTED}; dkim=pass header.d=customer.example",
            "a@customer.example, b@x.example",
            False,
        ),
        (f"{TRUSTED}; spf=pass smtp.helo=customer.example", "a@customer.example", False),
        ("MX.SHOP.EXAMPLE; dkim=pass header.d=customer.example", "a@customer.example", True),
    ],
)
def test_authentication_results_alignment(header, sender, verified):
    mail = raw_mail(sender=sender, headers=[("Authentication-Results", header)])
    assert authentication_results_verified(mail, authserv_id=TRUSTED) is verified
