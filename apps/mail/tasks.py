"""The e-mail channel's background tasks: IMAP polling (apps/mail/imap.py). Both run on the
`background` queue (config/settings/parts/mail_inbound.py), never on a thread a live turn
needs; the turns the polled mails start go to the turn queue as usual."""

from __future__ import annotations

from collections import Counter

from celery import shared_task
from django.conf import settings
from django.core.cache import cache
from django.db.models import F

from apps.core.tasks import TenantTask
from apps.mail.imap import imap_channel_poll
from apps.mail.models import InboundVia, MailChannel

# A poll ends by its batch and its connection timeout; the limits leave room beyond both.
_SOFT_LIMIT = int(settings.MAIL_IMAP_BATCH * settings.MAIL_IMAP_TIMEOUT_SECONDS) + 60
_HARD_LIMIT = _SOFT_LIMIT + 30


def imap_channels_due() -> list[MailChannel]:
    """Every enabled IMAP channel of an active client, least recently polled first, at most
    MAIL_IMAP_CHANNELS_PER_CLIENT per client (the rest come first in a later run)."""
    per_client = int(settings.MAIL_IMAP_CHANNELS_PER_CLIENT)
    taken: Counter[int] = Counter()
    due = []
    channels = (
        MailChannel.objects.unscoped("the beat polls every client's IMAP mailboxes")
        .filter(inbound_via=InboundVia.IMAP, enabled=True, client__is_active=True)
        .order_by(F("last_polled_at").asc(nulls_first=True), "pk")
        .only("pk", "client_id")
    )
    for channel in channels.iterator():
        if taken[channel.client_id] >= per_client:
            continue
        taken[channel.client_id] += 1
        due.append(channel)
    return due


@shared_task(name="mail.imap_poll", acks_late=True, ignore_result=True)
def imap_poll() -> int:
    """The beat: one `mail.imap_poll_channel` per due channel; returns how many."""
    due = imap_channels_due()
    for channel in due:
        imap_poll_channel.apply_async(
            kwargs={"client_id": channel.client_id, "channel_id": channel.pk}
        )
    return len(due)


@shared_task(
    name="mail.imap_poll_channel",
    base=TenantTask,
    tenant_from=("mail.MailChannel", "channel_id"),
    acks_late=True,
    ignore_result=True,
    soft_time_limit=_SOFT_LIMIT,
    time_limit=_HARD_LIMIT,
)
def imap_poll_channel(channel_id: int) -> str:
    """Poll one channel, unless a poll of it is already running (the lock expires with the
    task's hard limit, so a killed worker does not stop the channel for long)."""
    channel = (
        MailChannel.objects.for_current_client()
        .select_related("client")
        .filter(pk=channel_id, inbound_via=InboundVia.IMAP, enabled=True)
        .first()
    )
    if channel is None:
        return "gone"
    lock = f"mail:imap-poll:{channel.pk}"
    if not cache.add(lock, 1, timeout=_HARD_LIMIT):
        return "running"
    try:
        result = imap_channel_poll(channel=channel)
    finally:
        cache.delete(lock)
    if result.error:
        return "error"
    return f"received {result.received}"
