"""A reply out: the conversation's visible assistant or staff message e-mailed to the thread's
customer with threading headers, `Auto-Submitted: auto-replied`, a plain-text part and a safe
HTML part.

Each reply is recorded (an outbound MailMessage, queued → sent | send_failed) before it is sent;
a failed send is retried on a back-off by the beat (`mails_send_due`) and never raises into the
turn. The conversation's `reply_emailed_seq` says which messages were already put in an e-mail,
so the same messages are never sent twice, however often a task runs."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from email.utils import formataddr, make_msgid
from typing import TYPE_CHECKING

from celery import current_app
from django.conf import settings
from django.core.mail import EmailMultiAlternatives, get_connection
from django.db import transaction
from django.db.models import F
from django.utils import timezone, translation
from django.utils.html import escape
from django.utils.translation import gettext

from apps.conversations.models import (
    Channel,
    Conversation,
    Kind,
    Message,
    Role,
    Visibility,
)
from apps.conversations.rendering import reply_html
from apps.conversations.services import message_append_notice
from apps.core.outbound import TURN_REPLIED, OutboundEvent
from apps.core.tenancy import tenant_scope
from apps.mail.models import Direction, Disposition, MailChannel, MailMessage
from apps.mail.selectors import last_inbound
from apps.mail.services.wording import confirmation_text, reply_subject

if TYPE_CHECKING:
    from apps.clients.models import Client

logger = logging.getLogger(__name__)

# The tasks' stable names (apps/mail/outbound_tasks.py); queued by name, never imported here.
REPLY_SEND_TASK = "mail.reply_send"
DELIVER_TASK = "mail.deliver"
# Back-off between attempts to send one reply; after the last, staff get a note.
RETRY_DELAYS = (
    timedelta(minutes=1),
    timedelta(minutes=5),
    timedelta(minutes=15),
    timedelta(hours=1),
    timedelta(hours=3),
)
# A queued reply whose first send never ran (a worker died) is picked up by the beat then.
FIRST_SEND_GRACE = timedelta(minutes=2)
# How long one claimed attempt may take before another worker may try again.
ATTEMPT_LEASE = timedelta(minutes=10)
SEND_DUE_BATCH = 100
MAX_REFERENCES = 20
REPLIED_ROLES = (Role.ASSISTANT, Role.STAFF, Role.SYSTEM)


# --- the trigger: a turn ended with replies --------------------------------------------------


def turn_replied_receive(event: OutboundEvent) -> None:
    """The outbound hook's receiver (after the turn committed): an e-mail conversation's turn
    posted replies → queue their e-mail (the `background` queue). Never raises."""
    if event.type != TURN_REPLIED or event.data.get("channel") != Channel.EMAIL:
        return
    kwargs = {
        "conversation_id": event.data["conversation_id"],
        "trace_id": event.data["trace_id"],
        "client_id": event.client_id,
    }
    try:
        current_app.tasks[REPLY_SEND_TASK].apply_async(kwargs=kwargs)
    except Exception:
        # The broker refused it: send from here rather than leave the customer unanswered.
        logger.exception("could not queue the e-mail reply; sending it in-process")
        with tenant_scope(event.client_id):
            turn_reply_send(**kwargs)


def turn_reply_send(*, conversation_id: int, trace_id: int, client_id: int) -> MailMessage | None:
    """E-mail the visible messages one turn posted (its reply, confirmation question, hand-off
    notice). Safe to run twice."""
    conversation = (
        Conversation.objects.for_current_client()
        .select_related("client")
        .filter(pk=conversation_id, client_id=client_id)
        .first()
    )
    if conversation is None:
        return None
    messages = list(
        Message.objects.for_client(conversation.client)
        .filter(
            conversation=conversation,
            trace_id=trace_id,
            visibility=Visibility.VISIBLE,
            role__in=REPLIED_ROLES,
        )
        .order_by("seq")
    )
    return mail_reply_send(client=conversation.client, conversation=conversation, messages=messages)


# --- composing and recording a reply ---------------------------------------------------------


def _part_text(client: Client, message: Message) -> str:
    if message.kind == Kind.CONFIRMATION_REQUEST:
        return confirmation_text(client=client, message=message)
    options = (message.data or {}).get("options") if message.kind == Kind.CLARIFICATION else None
    if isinstance(options, list) and options:
        # The widget's quick replies, as lines the customer can answer with.
        listed = "\n".join(f"- {option}" for option in options[:10] if isinstance(option, str))
        return f"{message.text}\n\n{listed}" if listed else message.text
    return message.text


def _html(texts: list[str], signature: str) -> str:
    """A safe HTML part: each reply's Markdown rendered with raw HTML off and links checked
    (apps/conversations/rendering.py); everything else escaped."""
    blocks = "\n".join(f"<div>{reply_html(text)}</div>" for text in texts if text.strip())
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>'
        f"{blocks}\n<p>{escape(signature)}</p></body></html>"
    )


def _claim_messages(
    *, client: Client, conversation: Conversation, messages: list[Message]
) -> list[Message]:
    """The replies not e-mailed yet, up to the last of `messages`; moves the conversation's
    mark past them (the row is locked: two runs never both take the same message).

    Every unsent reply below that mark goes with them, in order: a staff reply sent before an
    earlier turn's reply task ran must not leave that turn's reply behind the mark, unsent."""
    candidates = [m for m in messages if m.visibility == Visibility.VISIBLE]
    if not candidates:
        return []
    seen = (
        Conversation.objects.for_client(client)
        .select_for_update()
        .values_list("reply_emailed_seq", flat=True)
        .get(pk=conversation.pk)
    )
    upto = max(m.seq for m in candidates)
    if upto <= seen:
        return []
    fresh = [
        m
        for m in Message.objects.for_client(client)
        .filter(
            conversation=conversation,
            seq__gt=seen,
            seq__lte=upto,
            visibility=Visibility.VISIBLE,
            role__in=REPLIED_ROLES,
        )
        .order_by("seq")
        if m.text.strip()
    ]
    Conversation.objects.for_client(client).filter(pk=conversation.pk).update(
        reply_emailed_seq=upto, reply_emailed_at=timezone.now()
    )
    return fresh


def mail_reply_send(
    *, client: Client, conversation: Conversation, messages: list[Message]
) -> MailMessage | None:
    """E-mail `messages` (visible assistant or staff messages of an e-mail conversation, in
    order) as one reply in the conversation's thread; record it as an outbound MailMessage.
    None when the conversation is not an e-mail thread or nothing is left to send."""
    if conversation.client_id != client.pk or conversation.channel != Channel.EMAIL:
        return None
    with transaction.atomic():
        answered = last_inbound(client=client, conversation=conversation)
        if answered is None:
            return None
        fresh = _claim_messages(client=client, conversation=conversation, messages=messages)
        if not fresh:
            return None
        row = _compose(client=client, conversation=conversation, answered=answered, fresh=fresh)
    mail_deliver(client=client, mail_id=row.pk, first=True)
    row.refresh_from_db()
    return row


def _compose(
    *, client: Client, conversation: Conversation, answered: MailMessage, fresh: list[Message]
) -> MailMessage:
    channel: MailChannel = answered.channel
    domain = channel.address.rsplit("@", 1)[-1] or "guidedesk.invalid"
    message_id = make_msgid(domain=domain)[1:-1]
    # RFC 5322: the parent's References (or In-Reply-To), then the parent's own id.
    parents = answered.references.split() or answered.in_reply_to.split()
    chain = [*parents, answered.header_message_id][-MAX_REFERENCES:]
    with translation.override(conversation.language or client.language):
        texts = [_part_text(client, m) for m in fresh]
        subject = reply_subject(answered.subject, client=client)
        signature = channel.display_name or client.name
    text = "\n\n".join(texts) + f"\n\n-- \n{signature}\n"
    sender_name = channel.display_name or client.name
    headers = [
        ["Message-ID", f"<{message_id}>"],
        ["In-Reply-To", f"<{answered.header_message_id}>"],
        ["References", " ".join(f"<{i}>" for i in chain)],
        ["Auto-Submitted", "auto-replied"],
        ["X-Auto-Response-Suppress", "All"],
    ]
    return MailMessage.objects.create(
        client=client,
        channel=channel,
        conversation=conversation,
        message=fresh[-1],
        direction=Direction.OUTBOUND,
        disposition=Disposition.QUEUED,
        header_message_id=message_id,
        in_reply_to=answered.header_message_id,
        references=" ".join(chain),
        from_address=channel.address,
        from_name=sender_name[:200],
        to_addresses=[answered.from_address],
        subject=subject,
        headers=headers,
        text=text,
        html=_html(texts, signature),
        next_attempt_at=timezone.now() + FIRST_SEND_GRACE,
    )


# --- sending, and trying again ---------------------------------------------------------------


def _email(row: MailMessage) -> EmailMultiAlternatives:
    email = EmailMultiAlternatives(
        subject=row.subject,
        body=row.text,
        from_email=formataddr((row.from_name, row.from_address)),
        to=list(row.to_addresses),
        headers=dict(row.headers),
    )
    email.attach_alternative(row.html, "text/html")
    return email


def _claim_attempt(row: MailMessage, now: datetime, *, first: bool) -> bool:
    """Take the next attempt at sending `row` (a conditional update: two workers never both
    send it). The beat only takes a due one."""
    pending = MailMessage.objects.for_client(row.client).filter(
        pk=row.pk,
        direction=Direction.OUTBOUND,
        disposition__in=[Disposition.QUEUED, Disposition.SEND_FAILED],
        next_attempt_at=row.next_attempt_at,
    )
    if not first:
        pending = pending.filter(next_attempt_at__lte=now)
    return bool(
        pending.update(send_attempts=F("send_attempts") + 1, next_attempt_at=now + ATTEMPT_LEASE)
    )


def mail_deliver(
    *, client: Client, mail_id: int, first: bool = False, now: datetime | None = None
) -> str:
    """Send one queued (or failed, now due) reply: "sent", "failed" (a retry is scheduled, or
    staff are told after the last) or "skipped" (sent already, not due, another worker on it).
    Never raises for a mail server's failure."""
    now = now or timezone.now()
    row = (
        MailMessage.objects.for_client(client)
        .select_related("client", "conversation")
        .filter(pk=mail_id, direction=Direction.OUTBOUND, next_attempt_at__isnull=False)
        .first()
    )
    if row is None or not _claim_attempt(row, now, first=first):
        return "skipped"
    try:
        connection = get_connection(timeout=settings.MAIL_SEND_TIMEOUT_SECONDS)
        connection.send_messages([_email(row)])
    except Exception as exc:
        _failed(row, exc, now)
        return "failed"
    MailMessage.objects.for_client(client).filter(pk=row.pk).update(
        disposition=Disposition.SENT, error="", next_attempt_at=None, updated_at=timezone.now()
    )
    return "sent"


def _failed(row: MailMessage, exc: Exception, now: datetime) -> None:
    attempts = row.send_attempts + 1
    delay = RETRY_DELAYS[attempts - 1] if attempts <= len(RETRY_DELAYS) else None
    logger.warning("e-mail reply not sent", extra={"mail": row.pk, "attempt": attempts})
    with transaction.atomic():
        MailMessage.objects.for_client(row.client).filter(pk=row.pk).update(
            disposition=Disposition.SEND_FAILED,
            error=repr(exc)[:500],
            next_attempt_at=now + delay if delay is not None else None,
            updated_at=timezone.now(),
        )
        if delay is None and row.conversation is not None:
            message_append_notice(
                client=row.client,
                conversation=row.conversation,
                text=gettext(
                    "An e-mail reply to %(address)s could not be sent after %(count)d tries: "
                    "the customer has not received it."
                )
                % {"address": ", ".join(row.to_addresses), "count": attempts},
                data={"mail": str(row.public_id)},
            )


def mails_send_due(*, now: datetime | None = None, limit: int = SEND_DUE_BATCH) -> int:
    """Beat: queue the replies whose next attempt is due (retries, and first sends a lost task
    left behind). Returns how many were queued."""
    now = now or timezone.now()
    due = list(
        MailMessage.objects.unscoped("the beat's retries span every client")
        .filter(
            direction=Direction.OUTBOUND,
            disposition__in=[Disposition.QUEUED, Disposition.SEND_FAILED],
            next_attempt_at__lte=now,
        )
        .order_by("next_attempt_at")
        .values_list("pk", "client_id")[:limit]
    )
    for mail_id, client_id in due:
        current_app.tasks[DELIVER_TASK].apply_async(
            kwargs={"mail_id": mail_id, "client_id": client_id, "now": now.isoformat()}
        )
    return len(due)
