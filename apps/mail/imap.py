"""IMAP polling of a plain mailbox (docs/email-inbound.md, "IMAP"), with imap-tools.

One poll of one channel reads the mails whose UID is above the channel's `imap_last_uid` (all of
them again from 1 when the folder's UIDVALIDITY changed), at most MAIL_IMAP_BATCH, oldest
first. Each mail is parsed by anymail, recorded by `mail_receive`, and the channel's
`imap_last_uid` advanced *in the same transaction*: a crash mid-batch neither loses a mail (its
UID was not passed) nor doubles one (the row and the UID commit together; the service also
dedups by Message-ID). Only then is it flagged \\Seen in the mailbox.

`sender_verified` comes only from the `Authentication-Results` header of the channel's
`trusted_authserv_id` (apps/mail/authresults.py); none trusted → never verified.

A poll never raises for what the mail server does (refused login, timeout, a folder that is
gone): it writes `last_error` and `last_polled_at` and returns."""

from __future__ import annotations

import imaplib
import logging
import re
import ssl
from dataclasses import dataclass

from anymail.inbound import AnymailInboundMessage
from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone
from imap_tools import MailBox, MailBoxStartTls, MailBoxUnencrypted, MailMessageFlags
from imap_tools.errors import ImapToolsError
from imap_tools.mailbox import BaseMailBox

from apps.core.tenancy import tenant_scope
from apps.mail.authresults import authentication_results_verified
from apps.mail.models import InboundVia, MailChannel
from apps.mail.services.inbound import mail_receive

logger = logging.getLogger(__name__)

_LOOPBACK = {"127.0.0.1", "::1", "localhost"}
_SIZE = re.compile(rb"RFC822\.SIZE (\d+)")


@dataclass
class PollResult:
    received: int = 0
    skipped: int = 0
    more: bool = False  # the batch was full: mails are left for the next poll
    error: str = ""


def _mailbox(channel: MailChannel) -> BaseMailBox:
    """TLS on connect (993), else STARTTLS; a plain connection only to this host itself (a
    local mail server; the tests' dovecot), never a password in clear over a network."""
    timeout = float(settings.MAIL_IMAP_TIMEOUT_SECONDS)
    if channel.imap_ssl:
        return MailBox(channel.imap_host, port=channel.imap_port, timeout=timeout)
    if channel.imap_host in _LOOPBACK:
        return MailBoxUnencrypted(channel.imap_host, port=channel.imap_port, timeout=timeout)
    return MailBoxStartTls(channel.imap_host, port=channel.imap_port, timeout=timeout)


def _record(channel: MailChannel, *, error: str) -> None:
    MailChannel.objects.filter(client_id=channel.client_id).filter(pk=channel.pk).update(
        last_polled_at=timezone.now(), last_error=error[:500]
    )


def imap_channel_poll(*, channel: MailChannel) -> PollResult:
    """Poll one IMAP channel once (see the module docstring)."""
    result = PollResult()
    if channel.inbound_via != InboundVia.IMAP or not channel.enabled:
        return result
    try:
        with _mailbox(channel) as box:
            box.login(channel.imap_username, channel.imap_password, initial_folder=None)
            box.folder.set(channel.imap_folder, readonly=False)
            _poll_folder(box, channel, result)
    except (
        TimeoutError,
        ImapToolsError,
        imaplib.IMAP4.error,
        OSError,
        ssl.SSLError,
        KeyError,
        ValueError,
    ) as exc:
        # OSError covers refused connections, DNS failures and timeouts; KeyError and
        # ValueError a server answer that cannot be read (a STATUS without UIDVALIDITY).
        result.error = f"{type(exc).__name__}: {exc}"
        logger.warning("mail: IMAP poll of channel %s failed: %s", channel.pk, result.error)
    except DatabaseError as exc:
        result.error = f"{type(exc).__name__}: {exc}"
        logger.exception("mail: IMAP poll of channel %s stopped by the database", channel.pk)
    _record(channel, error=result.error)
    return result


def _poll_folder(box: BaseMailBox, channel: MailChannel, result: PollResult) -> None:
    status = box.folder.status(channel.imap_folder, ["UIDVALIDITY"])
    uidvalidity = int(status["UIDVALIDITY"])
    if uidvalidity != channel.imap_uidvalidity:
        # A new folder (or a rebuilt one): its UIDs mean nothing next to the old ones, so the
        # whole folder is read again; mails already received are recorded as duplicates.
        MailChannel.objects.filter(client_id=channel.client_id).filter(pk=channel.pk).update(
            imap_uidvalidity=uidvalidity, imap_last_uid=0
        )
        channel.imap_uidvalidity, channel.imap_last_uid = uidvalidity, 0
    after = int(channel.imap_last_uid)
    # "n:*" always names the folder's last mail, even when its UID is below n: filter again.
    found = sorted(int(uid) for uid in box.uids(f"UID {after + 1}:*") if int(uid) > after)
    batch = int(settings.MAIL_IMAP_BATCH)
    result.more = len(found) > batch
    for uid in found[:batch]:
        _receive_one(box, channel, uid, result)


def _receive_one(box: BaseMailBox, channel: MailChannel, uid: int, result: PollResult) -> None:
    raw, problem = _fetch(box, uid)
    if raw is not None:
        try:
            with tenant_scope(channel.client_id), transaction.atomic():
                if not _claim_uid(channel, uid):
                    return  # another poll of this channel took it
                message = AnymailInboundMessage.parse_raw_mime_bytes(raw)
                mail_receive(
                    channel=channel,
                    mail=message,
                    sender_verified=authentication_results_verified(
                        message, authserv_id=channel.trusted_authserv_id
                    ),
                    via=InboundVia.IMAP,
                )
        except DatabaseError:
            raise  # nothing was claimed: the next poll reads this mail again
        except Exception as exc:  # a mail the service cannot take must not block the folder
            logger.exception("mail: IMAP mail UID %s of channel %s not received", uid, channel.pk)
            problem = f"UID {uid}: {type(exc).__name__}: {exc}"
        else:
            channel.imap_last_uid = uid
            result.received += 1
            box.flag(str(uid), MailMessageFlags.SEEN, True)
            return
    # Too large or unreadable: passed over and left unread in the mailbox for a person.
    with tenant_scope(channel.client_id), transaction.atomic():
        _claim_uid(channel, uid)
    channel.imap_last_uid = uid
    result.skipped += 1
    result.error = problem[:500]


def _claim_uid(channel: MailChannel, uid: int) -> bool:
    """Advance the channel's last UID to `uid` under a row lock, unless it is already there."""
    current = (
        MailChannel.objects.filter(client_id=channel.client_id)
        .select_for_update()
        .filter(pk=channel.pk, imap_uidvalidity=channel.imap_uidvalidity)
        .values_list("imap_last_uid", flat=True)
        .first()
    )
    if current is None or current >= uid:
        return False
    MailChannel.objects.filter(client_id=channel.client_id).filter(pk=channel.pk).update(
        imap_last_uid=uid
    )
    return True


def _fetch(box: BaseMailBox, uid: int) -> tuple[bytes | None, str]:
    """The mail's bytes without setting \\Seen (BODY.PEEK), or None and why not."""
    limit = int(settings.MAIL_INBOUND_MAX_BYTES)
    typ, data = box.client.uid("FETCH", str(uid), "(RFC822.SIZE)")
    found = (_SIZE.search(item) for item in data if isinstance(item, bytes))
    sizes = [int(match.group(1)) for match in found if match]
    if typ != "OK" or not sizes:
        return None, f"UID {uid}: the server did not return the mail"
    if sizes[0] > limit:
        return None, f"UID {uid}: {sizes[0]} bytes, over MAIL_INBOUND_MAX_BYTES ({limit})"
    typ, data = box.client.uid("FETCH", str(uid), "(BODY.PEEK[])")
    for item in data:
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], bytes):
            return item[1], ""
    return None, f"UID {uid}: the server did not return the mail"
