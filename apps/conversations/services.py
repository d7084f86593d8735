from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import threading
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import EmailMessage
from django.core.validators import validate_email
from django.db import connection, connections, transaction
from django.utils import timezone

from apps.clients.models import Client
from apps.conversations.events import conversation_changed
from apps.conversations.models import Conversation, Kind, Message, Role, Visibility
from apps.core.exceptions import ApplicationError

logger = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 4000


def _hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@transaction.atomic
def conversation_create(
    *, client: Client, visitor_id: str = "", language: str | None = None
) -> tuple[Conversation, str]:
    """Start a conversation; returns it with the visitor token (shown once, stored hashed)."""
    token = secrets.token_urlsafe(24)
    conversation = Conversation.objects.create(
        client=client,
        visitor_id=visitor_id[:128],
        visitor_token_hash=_hash_token(token),
        language=language or client.language,
    )
    return conversation, token


def conversation_token_matches(*, conversation: Conversation, token: str) -> bool:
    return bool(conversation.visitor_token_hash) and hmac.compare_digest(
        conversation.visitor_token_hash, _hash_token(token)
    )


def message_append(
    *,
    client: Client,
    conversation: Conversation,
    role: str,
    text: str,
    kind: str = Kind.TEXT,
    visibility: str = Visibility.VISIBLE,
    data: dict[str, Any] | None = None,
    trace: Any = None,
    author: Any = None,
) -> Message:
    """Append a message with the next `seq`. The conversation row is locked while the number is
    taken, so concurrent writers (a turn, a staff reply) never collide."""
    if conversation.client_id != client.pk:
        raise ValueError("conversation belongs to another client")
    # Inside a caller's transaction (a turn's finish, a staff reply) no savepoint of its own:
    # an error here fails the caller's transaction as it would fail this one.
    with transaction.atomic(savepoint=False):
        now = timezone.now()
        seq, status = _take_seq(conversation.pk, now, visible=visibility == Visibility.VISIBLE)
        conversation.last_seq = seq
        conversation.status = status
        if visibility == Visibility.VISIBLE:
            conversation_changed(conversation.pk, client.pk)  # the event streams (after commit)
        return Message.objects.create(
            client=client,
            conversation=conversation,
            seq=seq,
            role=Role(role),
            visibility=Visibility(visibility),
            kind=Kind(kind),
            text=text,
            data=data or {},
            trace=trace,
            author=author,
        )


def _take_seq(conversation_id: int, now: Any, *, visible: bool) -> tuple[int, str]:
    """Take the conversation's next `seq` (and read its status) in one statement: the UPDATE
    locks the row until the caller's transaction ends, RETURNING gives what a locking read
    would have (PostgreSQL and SQLite ≥ 3.35 both have it; the ORM's update() cannot return)."""
    qn = connection.ops.quote_name
    stamp = connection.ops.adapt_datetimefield_value(now)
    sets = f"{qn('last_seq')} = {qn('last_seq')} + 1, {qn('updated_at')} = %s"
    params: list[Any] = [stamp]
    if visible:
        sets += f", {qn('last_message_at')} = %s"
        params.append(stamp)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {qn(Conversation._meta.db_table)} SET {sets} WHERE {qn('id')} = %s "  # noqa: S608
            f"RETURNING {qn('last_seq')}, {qn('status')}",
            [*params, conversation_id],
        )
        row = cursor.fetchone()
    if row is None:
        raise Conversation.DoesNotExist(f"conversation {conversation_id} does not exist")
    return int(row[0]), str(row[1])


def validate_customer_text(text: Any) -> str:
    if not isinstance(text, str):
        raise ApplicationError("text must be a string.", {"fields": {"text": "Must be a string."}})
    if "\x00" in text:
        raise ApplicationError(
            "text must not contain NUL characters.",
            {"fields": {"text": "Must not contain NUL characters."}},
        )
    cleaned = text.strip()
    if not cleaned:
        raise ApplicationError(
            "text must not be empty.", {"fields": {"text": "Must not be empty."}}
        )
    if len(cleaned) > MAX_MESSAGE_CHARS:
        raise ApplicationError(
            f"text is longer than {MAX_MESSAGE_CHARS} characters.",
            {"fields": {"text": f"At most {MAX_MESSAGE_CHARS} characters."}},
            status=413,
            code="too_long",
        )
    return cleaned


# --------------------------------------------------------------------------------------------
# Returning customers: the e-mail they leave, what their widget has shown them, and the e-mail
# of staff replies they missed (docs/widget.md "Coming back").
# --------------------------------------------------------------------------------------------

MAX_EMAIL_CHARS = 254


def conversation_contact_set(
    *, client: Client, conversation: Conversation, email: Any
) -> Conversation:
    """Store (or, with "", forget) the address staff replies the customer misses are mailed to.
    Validated with Django's e-mail validator; a 400 names the `email` field."""
    if not isinstance(email, str):
        raise ApplicationError(
            "email must be a string.", {"fields": {"email": "Must be a string."}}
        )
    cleaned = email.strip()
    if cleaned:
        try:
            if len(cleaned) > MAX_EMAIL_CHARS:
                raise ValidationError("too long")
            validate_email(cleaned)
        except ValidationError:
            raise ApplicationError(
                "email is not a valid e-mail address.",
                {"fields": {"email": "Enter a valid e-mail address."}},
            ) from None
    updated = Conversation.objects.for_client(client).filter(pk=conversation.pk)
    updated.update(contact_email=cleaned, updated_at=timezone.now())
    conversation.contact_email = cleaned
    return conversation


def conversation_seen_record(*, client: Client, conversation: Conversation, seq: int) -> bool:
    """The customer's widget has displayed every visible message up to `seq` (it says so by
    asking for the messages after it). Only ever moves forward; one UPDATE, none when nothing
    moved. Returns whether it moved."""
    seq = min(seq, conversation.last_seq)
    if seq <= conversation.customer_seen_seq:
        return False
    now = timezone.now()
    moved = (
        Conversation.objects.for_client(client)
        .filter(pk=conversation.pk, customer_seen_seq__lt=seq)
        .update(customer_seen_seq=seq, customer_seen_at=now)
    )
    if moved:
        conversation.customer_seen_seq, conversation.customer_seen_at = seq, now
    return bool(moved)


def unseen_replies_email_schedule(*, conversation_id: int) -> None:
    """Check, WIDGET_REPLY_EMAIL_DELAY_SECONDS from now, whether the customer saw the staff
    replies (call after the reply commits). Never raises: the reply is stored either way. With
    no broker (the demo) or an unreachable one, a timer in this process runs the check."""
    from apps.conversations.tasks import email_unseen_replies

    delay = float(settings.WIDGET_REPLY_EMAIL_DELAY_SECONDS)
    if not email_unseen_replies.app.conf.task_always_eager:
        try:
            email_unseen_replies.apply_async((conversation_id,), countdown=delay)
            return
        except Exception:
            logger.exception(
                "could not queue the unseen-reply e-mail; checking in-process",
                extra={"conversation_id": conversation_id},
            )
    timer = threading.Timer(delay, _email_unseen_replies_in_process, args=(conversation_id,))
    timer.daemon = True
    timer.start()


def _email_unseen_replies_in_process(conversation_id: int) -> None:
    try:
        unseen_replies_email(conversation_id=conversation_id)
    except Exception:
        logger.exception(
            "unseen-reply e-mail check failed", extra={"conversation_id": conversation_id}
        )
    finally:
        connections.close_all()  # this timer thread's own connections


def unseen_replies_email(*, conversation_id: int) -> int:
    """E-mail the staff replies the customer has not seen (and that were not mailed before) to
    the address they left, in ONE e-mail; returns how many replies it carried (0: nothing sent).
    Safe to run twice or concurrently: the batch is claimed with a compare-and-set on
    `reply_emailed_seq` before sending, and released if sending fails."""
    conversation = Conversation.objects.select_related("client").filter(pk=conversation_id).first()
    if conversation is None or not conversation.contact_email:
        return 0
    client = conversation.client
    since = max(conversation.customer_seen_seq, conversation.reply_emailed_seq)
    replies = list(
        Message.objects.for_client(client)
        .filter(
            conversation=conversation,
            role=Role.STAFF,
            visibility=Visibility.VISIBLE,
            seq__gt=since,
        )
        .order_by("seq")
    )
    if not replies:
        return 0
    through = replies[-1].seq
    claimed = (
        Conversation.objects.for_client(client)
        .filter(
            pk=conversation.pk,
            reply_emailed_seq=conversation.reply_emailed_seq,
            customer_seen_seq__lt=through,
        )
        .update(reply_emailed_seq=through, reply_emailed_at=timezone.now())
    )
    if not claimed:  # another run took this batch, or the customer just saw it
        return 0
    try:
        _unseen_replies_message(conversation=conversation, client=client, replies=replies).send()
    except Exception:
        logger.exception("unseen-reply e-mail failed", extra={"conversation_id": conversation_id})
        Conversation.objects.for_client(client).filter(
            pk=conversation.pk, reply_emailed_seq=through
        ).update(
            reply_emailed_seq=conversation.reply_emailed_seq,
            reply_emailed_at=conversation.reply_emailed_at,
        )
        return 0
    return len(replies)


def client_reply_to_address(client: Client) -> str:
    """Where a customer's answer to our e-mail goes: the contact address the business publishes
    (business_info.contact.email), else its support address."""
    contact = (client.business_info or {}).get("contact") or {}
    published = contact.get("email") if isinstance(contact, dict) else ""
    return (published or "").strip() or client.support_email


def _unseen_replies_message(
    *, conversation: Conversation, client: Client, replies: list[Message]
) -> EmailMessage:
    reply_to = client_reply_to_address(client)
    many = len(replies) > 1
    lines = [
        "Hello,",
        "",
        f"{client.name}'s support team replied to your chat while you were away:",
        "",
    ]
    for reply in replies:
        when = timezone.localtime(reply.created_at).strftime("%Y-%m-%d %H:%M %Z")
        lines += [f"--- {when}", reply.text, ""]
    lines += [
        "---",
        "",
        "The conversation is waiting for you in the chat on our website, where you left it"
        " (in the same browser).",
    ]
    if reply_to:
        lines.append(f"You can also answer this e-mail; your answer goes to {reply_to}.")
    lines += [
        "",
        f"You receive this e-mail once because you left this address in the chat with "
        f"{client.name} and did not see {'these replies' if many else 'this reply'} there.",
    ]
    return EmailMessage(
        subject=f"{client.name}: {'new replies' if many else 'a new reply'} to your chat",
        body="\n".join(lines),
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[conversation.contact_email],
        reply_to=[reply_to] if reply_to else None,
    )
