"""An e-mail in: loops, bounces and lists set aside; caps; the thread it joins; the customer's
new text (quoted history and signature stripped); the same turn pipeline as the widget
(docs/email.md "How an e-mail is answered")."""

from __future__ import annotations

import hashlib
import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext

from apps.conversations.models import (
    Channel,
    Conversation,
    ConversationStatus,
    CustomerVerification,
)
from apps.conversations.services import (
    MAX_MESSAGE_CHARS,
    conversation_create,
    message_append_notice,
)
from apps.escalations.models import EscalationReason
from apps.escalations.services import escalation_create
from apps.mail.models import Direction, Disposition, MailChannel, MailMessage
from apps.mail.selectors import (
    answered_from_sender_since,
    answered_in_thread_since,
    mail_is_ours,
    mail_seen,
    thread_customer_address,
    thread_mail,
)
from apps.mail.services.classify import (
    bounced_message_ids,
    first_address,
    header,
    message_ids,
    never_answer,
)
from apps.mail.services.content import AttachmentSeen, attachments_store, new_text
from apps.reasoning.services import handle_turn

if TYPE_CHECKING:
    from anymail.inbound import AnymailInboundMessage

    from apps.clients.models import Client
    from apps.mail.models import InboundVia

logger = logging.getLogger(__name__)

CAP_WINDOW = timedelta(hours=1)
MAX_HEADERS = 200  # headers kept per e-mail (a crafted mail may carry thousands)
MAX_HEADER_CHARS = 8000


def _fields(mail: AnymailInboundMessage) -> dict[str, Any]:
    """The e-mail as it was, in MailMessage's fields."""
    name, address = first_address(header(mail, "From"))
    if mail.from_email is not None:
        name, address = mail.from_email.display_name, mail.from_email.addr_spec
    msgid = next(iter(message_ids(header(mail, "Message-ID"))), "")
    if not msgid:
        # No Message-ID: one derived from the content, so a redelivery is still a duplicate.
        digest = hashlib.sha256(mail.as_bytes()).hexdigest()[:40]
        msgid = f"no-id-{digest}@guidedesk.invalid"
    return {
        "header_message_id": msgid[:998],
        "in_reply_to": " ".join(message_ids(header(mail, "In-Reply-To")))[:998],
        "references": " ".join(message_ids(header(mail, "References"))),
        "from_address": (address or "")[:320].lower(),
        "from_name": (name or "")[:200],
        "to_addresses": [a.addr_spec for a in mail.to][:50],
        "subject": (mail.subject or "")[:998],
        "headers": [[k, str(v)[:MAX_HEADER_CHARS]] for k, v in list(mail.items())[:MAX_HEADERS]],
        "text": mail.text or "",
        "html": mail.html or "",
    }


def _record(
    *,
    channel: MailChannel,
    fields: dict[str, Any],
    disposition: str,
    conversation: Conversation | None,
    sender_verified: bool,
    via: str,
) -> MailMessage:
    return MailMessage.objects.create(
        client_id=channel.client_id,
        channel=channel,
        conversation=conversation,
        direction=Direction.INBOUND,
        disposition=disposition,
        sender_verified=sender_verified,
        received_via=via,
        **fields,
    )


def mail_receive(
    *,
    channel: MailChannel,
    mail: AnymailInboundMessage,
    sender_verified: bool,
    via: InboundVia | str,
) -> MailMessage:
    """Record one inbound e-mail for `channel` and, when it is a customer's mail that may be
    answered, append it to its conversation and schedule its turn (`handle_turn`).

    Every transport (the providers' signed webhooks, IMAP polling, the demo's local SMTP
    server) parses what it received into an `AnymailInboundMessage` and decides
    `sender_verified` (DKIM or SPF passed for the From address, as the provider or the trusted
    Authentication-Results header reports it), then calls this. Safe to call twice for the same
    Message-ID (the second is recorded as a duplicate)."""
    client = channel.client
    fields = _fields(mail)
    record: dict[str, Any] = {
        "channel": channel,
        "fields": fields,
        "sender_verified": sender_verified,
        "via": via,
    }
    with transaction.atomic():
        # One e-mail of a channel at a time: two deliveries of the same mail never both pass
        # the duplicate check (providers retry; IMAP may be polled twice).
        MailChannel.objects.for_client(client).select_for_update().filter(pk=channel.pk).exists()
        original = mail_seen(client=client, header_message_id=fields["header_message_id"])
        if original is not None:
            return _record(
                **record, disposition=Disposition.DUPLICATE, conversation=original.conversation
            )
        ours = mail_is_ours(client=client, header_message_id=fields["header_message_id"])
        why = never_answer(
            mail, from_address=fields["from_address"], channel_address=channel.address, ours=ours
        )
        if why == Disposition.BOUNCE:
            return _bounce(client=client, mail=mail, record=record)
        thread = thread_mail(
            client=client,
            message_ids=[*fields["in_reply_to"].split(), *reversed(fields["references"].split())],
        )
        if why is not None:
            conversation = thread.conversation if thread is not None else None
            return _record(**record, disposition=why, conversation=conversation)
        return _accept(channel=channel, mail=mail, record=record, thread=thread)


def _bounce(*, client: Client, mail: AnymailInboundMessage, record: dict[str, Any]) -> MailMessage:
    """A bounce: never answered. When it is about one of our replies, it joins that reply's
    conversation with an internal note, so staff know the customer did not get it."""
    ids = bounced_message_ids(mail)
    ours = (
        MailMessage.objects.for_client(client)
        .filter(header_message_id__in=ids[:50], direction=Direction.OUTBOUND)
        .exclude(conversation=None)
        .select_related("conversation")
        .order_by("-id")
        .first()
    )
    conversation = ours.conversation if ours is not None else None
    row = _record(**record, disposition=Disposition.BOUNCE, conversation=conversation)
    if ours is not None and conversation is not None:
        message_append_notice(
            client=client,
            conversation=conversation,
            text=gettext(
                "Our e-mail reply to %(address)s could not be delivered (a bounce came back): "
                "the customer has not read it."
            )
            % {"address": ", ".join(ours.to_addresses) or "?"},
            data={"mail_bounce": str(row.public_id), "mail": str(ours.public_id)},
        )
    return row


def _thread_conversation(
    *, client: Client, thread: MailMessage | None, sender: str
) -> Conversation | None:
    """The conversation the e-mail joins: its thread's, when the thread is this sender's.
    Another address replying into someone's thread starts its own conversation: it never
    inherits that customer's identity or history."""
    if thread is not None and thread.conversation is not None:
        owner = thread_customer_address(client=client, conversation=thread.conversation)
        if owner == sender:
            return thread.conversation
    return None


def _new_conversation(*, client: Client, sender: str) -> Conversation:
    conversation, _token = conversation_create(client=client, visitor_id=f"email:{sender}"[:128])
    conversation.channel = Channel.EMAIL
    conversation.save(update_fields=["channel", "updated_at"])
    return conversation


def _customer_text(*, text: str, attachments: list[AttachmentSeen]) -> tuple[str, bool]:
    """The customer message: the new words, then one line per attachment (its name, type and
    size — never its content), within the widget's length limit; True when cut."""
    labels = "\n".join(a.label() for a in attachments)
    room = MAX_MESSAGE_CHARS - (len(labels) + 2 if labels else 0)
    cut = len(text) > room
    body = text[: max(room, 0)].rstrip() if cut else text
    full = "\n\n".join(part for part in (body, labels) if part)
    return full[:MAX_MESSAGE_CHARS], cut


def _verify_sender(*, conversation: Conversation, sender: str, verified: bool) -> None:
    """A sender the provider vouched for (DKIM or SPF passed for it) is the conversation's
    verified customer, by address. A later e-mail that is not vouched for takes that back:
    the one-time code flow applies again (docs/email.md "Identity")."""
    via = conversation.customer_verified_via
    if verified:
        if via and via != CustomerVerification.EMAIL_SENDER:
            return  # verified another way (a one-time code): that stands
        values: dict[str, Any] = {
            "customer_id": sender[:255],
            "customer_email": sender[:254],
            "customer_verified_via": CustomerVerification.EMAIL_SENDER,
            "customer_verified_at": timezone.now(),
        }
    elif via == CustomerVerification.EMAIL_SENDER:
        values = {
            "customer_id": "",
            "customer_email": "",
            "customer_verified_via": "",
            "customer_verified_at": None,
        }
    else:
        return
    for name, value in values.items():
        setattr(conversation, name, value)
    conversation.save(update_fields=[*values, "updated_at"])


def _over_cap(
    *, channel: MailChannel, conversation: Conversation, sender: str, new: bool
) -> Disposition | None:
    """Whether answering would pass the channel's hourly caps: replies per thread, then per
    sender (two indexed counts — bounded work however many mails come)."""
    client = channel.client
    since = timezone.now() - CAP_WINDOW
    if not new and (
        answered_in_thread_since(client=client, conversation=conversation, since=since)
        >= channel.max_replies_per_thread_hour
    ):
        return Disposition.THREAD_CAPPED
    if (
        answered_from_sender_since(client=client, address=sender, since=since)
        >= channel.max_replies_per_sender_hour
    ):
        return Disposition.SENDER_CAPPED
    return None


def _hand_over_capped(
    *, channel: MailChannel, conversation: Conversation, cap: Disposition, sender: str
) -> None:
    """Over a cap: the conversation goes to staff (no automatic reply). Staff are e-mailed
    about the first capped mail of a sender in the hour only — a flood must not become one."""
    client = channel.client
    first_of_hour = not (
        MailMessage.objects.for_client(client)
        .filter(
            from_address=sender,
            direction=Direction.INBOUND,
            disposition__in=[Disposition.THREAD_CAPPED, Disposition.SENDER_CAPPED],
            created_at__gte=timezone.now() - CAP_WINDOW,
        )
        .exists()
    )
    detail = (
        "E-mail thread over its hourly reply cap"
        if cap == Disposition.THREAD_CAPPED
        else "E-mail sender over the hourly reply cap"
    )
    escalation_create(
        client=client,
        conversation=conversation,
        reason=EscalationReason.POLICY,
        detail=f"{detail} ({sender})",
        notify=first_of_hour,
    )


def _accept(
    *,
    channel: MailChannel,
    mail: AnymailInboundMessage,
    record: dict[str, Any],
    thread: MailMessage | None,
) -> MailMessage:
    client, fields = channel.client, record["fields"]
    sender = fields["from_address"]
    text = new_text(text=fields["text"], html=fields["html"])
    joined = _thread_conversation(client=client, thread=thread, sender=sender)
    new = joined is None
    subject = fields["subject"].strip()
    if new and subject and subject.lower() not in text.lower():
        # A first e-mail often says it all in its subject ("Cancel order TH-12345").
        text = f"{subject}\n\n{text}".strip()
    if not text and joined is None:
        row = _record(**record, disposition=Disposition.EMPTY, conversation=None)
        attachments_store(channel=channel, mail_row=row, mail=mail)
        return row  # nothing to answer and no thread: kept for staff as it was
    conversation = joined or _new_conversation(client=client, sender=sender)
    cap = None
    if text and conversation.status == ConversationStatus.OPEN:
        cap = _over_cap(channel=channel, conversation=conversation, sender=sender, new=new)
    disposition = cap or (Disposition.ACCEPTED if text else Disposition.EMPTY)
    row = _record(**record, disposition=disposition, conversation=conversation)
    attachments = attachments_store(channel=channel, mail_row=row, mail=mail)
    if not text:
        return row  # nothing new to answer (kept, attachments included, for staff)
    _verify_sender(conversation=conversation, sender=sender, verified=record["sender_verified"])
    if cap is not None:
        _hand_over_capped(channel=channel, conversation=conversation, cap=cap, sender=sender)
    body, cut = _customer_text(text=text, attachments=attachments)
    message = handle_turn(client=client, conversation=conversation, text=body)
    if cut:
        message_append_notice(
            client=client,
            conversation=conversation,
            text=gettext(
                "This e-mail was longer than %(count)d characters: the assistant read its "
                "beginning only. The full text is kept with the e-mail."
            )
            % {"count": MAX_MESSAGE_CHARS},
            data={"mail": str(row.public_id)},
        )
    row.message = message
    row.save(update_fields=["message", "updated_at"])
    return row
