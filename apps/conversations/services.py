from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import threading
import uuid
from datetime import timedelta
from enum import StrEnum
from typing import Any

from django.conf import settings
from django.core import signing
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.core.mail import EmailMessage
from django.core.validators import validate_email
from django.db import connection, connections, transaction
from django.db.models.functions import Coalesce
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import gettext

from apps.clients.identity import Identity
from apps.clients.models import Client
from apps.conversations.events import conversation_changed
from apps.conversations.models import (
    Channel,
    Conversation,
    ConversationStatus,
    Kind,
    Message,
    Role,
    Visibility,
)
from apps.core.exceptions import ApplicationError
from apps.core.languages import language_evidence, reply_language
from apps.core.outbound import emit_for_conversation
from apps.core.tenancy import tenant_scope
from apps.core.tenant_sql import sql_insert, sql_rows

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
    emit_for_conversation(
        "conversation.created",
        client_id=client.pk,
        conversation=conversation,
        data={"language": conversation.language},
    )
    return conversation, token


def conversation_token_matches(*, conversation: Conversation, token: str) -> bool:
    """The visitor token issued when the conversation started, or — for a verified
    customer's conversation — the customer token any of their devices gets with a valid
    signature (`conversation_customer_token`)."""
    if conversation.visitor_token_hash and hmac.compare_digest(
        conversation.visitor_token_hash, _hash_token(token)
    ):
        return True
    return conversation.customer_verified and hmac.compare_digest(
        conversation_customer_token(conversation), token
    )


def conversation_customer_token(conversation: Conversation) -> str:
    """The widget token of a verified customer's conversation on every device they sign in
    on: derived (never stored) from the conversation and the customer id, so a second device
    that proves the same identity gets it without logging the first one out."""
    message = f"guidedesk.customer-token:{conversation.public_id}:{conversation.customer_id}"
    digest = hmac.new(settings.SECRET_KEY.encode(), message.encode(), hashlib.sha256)
    return "ct_" + digest.hexdigest()


def conversation_customer_verify(
    *, client: Client, conversation: Conversation, identity: Identity
) -> Conversation:
    """Mark the conversation's customer as verified: only ever called with an `Identity` that
    `apps.clients.identity.identity_verify` returned (a signature made by the business)."""
    if conversation.client_id != client.pk:
        raise ValueError("conversation belongs to another client")
    same_customer = conversation.customer_id == identity.customer_id
    conversation.customer_id = identity.customer_id[:255]
    # An HMAC signs the id alone: resuming with one keeps the e-mail and name a JWT vouched for.
    if identity.email or not same_customer:
        conversation.customer_email = identity.email[:254]
    if identity.name or not same_customer:
        conversation.customer_name = identity.name[:200]
    conversation.customer_verified_via = identity.via
    conversation.customer_verified_at = timezone.now()
    conversation.save(
        update_fields=[
            "customer_id",
            "customer_email",
            "customer_name",
            "customer_verified_via",
            "customer_verified_at",
            "updated_at",
        ]
    )
    return conversation


@transaction.atomic
def conversation_start(
    *,
    client: Client,
    visitor_id: str = "",
    identity: Identity | None = None,
    resume: bool = True,
    language: str = "",
) -> tuple[Conversation, str, bool]:
    """The widget's "start a conversation": returns the conversation, its token and whether
    it was resumed. An anonymous visitor always gets a new conversation. A verified customer
    resumes their open conversation (`customer_open_conversation`: not closed, active within
    the client's "remember the conversation" window) from any device, with the customer token,
    unless `resume` is off ("New chat"); otherwise a new conversation is started and marked
    verified.

    A new conversation starts in `language` (the widget's: the shop's data-language, the page's
    <html lang>, the browser's) when the client serves it, else in the client's default; a
    resumed one keeps its own (docs/languages.md)."""
    if identity is not None and resume:
        found = customer_open_conversation(client=client, customer_id=identity.customer_id)
        if found is not None:
            conversation_customer_verify(client=client, conversation=found, identity=identity)
            return found, conversation_customer_token(found), True
    conversation, token = conversation_create(
        client=client,
        visitor_id=visitor_id,
        language=reply_language(detected=language, client=client),
    )
    if identity is not None:
        conversation_customer_verify(client=client, conversation=conversation, identity=identity)
    return conversation, token, False


def customer_open_conversation(*, client: Client, customer_id: str) -> Conversation | None:
    """The verified customer's conversation a widget should resume: their most recently active
    conversation that is not closed and had activity within the client's "remember the
    conversation" window. None when that is 0: the client keeps a conversation only while its
    tab is open, and a verified customer's is no exception."""
    hours = client.remember_conversation_hours
    if not hours:
        return None
    since = timezone.now() - timedelta(hours=hours)
    return (
        Conversation.objects.for_client(client)
        .filter(customer_id=customer_id, customer_verified_at__isnull=False)
        .exclude(status=ConversationStatus.CLOSED)
        .annotate(active_at=Coalesce("last_message_at", "created_at"))
        .filter(active_at__gte=since)
        .order_by("-active_at", "-pk")
        .first()
    )


def message_language(*, client: Client, text: str) -> str:
    """The language a customer message gives clear evidence of ('' when none: an order number,
    a name, "ok"), for `Message.language`: the language the customer asks for, or the one a
    long enough message is clearly written in (`apps.core.languages.language_evidence`; the
    conversation's language changes only on it). Never raises: a failed detection leaves the
    language unknown and the message is stored all the same."""
    try:
        return language_evidence(text)
    except Exception:
        logger.exception("language detection failed")
        return ""


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
    language: str = "",
    note: bool = False,
) -> Message:
    """Append a message with the next `seq`. The conversation row is locked while the number is
    taken, so concurrent writers (a turn, a staff reply) never collide.

    `note=True`: the caller's transaction changes nothing else the event streams show, so the
    publish after commit carries the message (`message_note`) and a stream that has seen
    everything before it sends it without reading the database (apps/conversations/events.py)."""
    if conversation.client_id != client.pk:
        raise ValueError("conversation belongs to another client")
    # Inside a caller's transaction (a turn's finish, a staff reply) no savepoint of its own:
    # an error here fails the caller's transaction as it would fail this one.
    with transaction.atomic(savepoint=False):
        now = timezone.now()
        seq, status = _take_seq(conversation, now, visible=visibility == Visibility.VISIBLE)
        conversation.last_seq = seq
        conversation.status = status
        message = sql_insert(
            "conversations.message_insert",
            Message(
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
                language=language,
            ),
        )
        if visibility == Visibility.VISIBLE:  # the event streams (after commit)
            conversation_changed(
                conversation.pk, client.pk, note=message_note(message, status) if note else None
            )
    if visibility == Visibility.VISIBLE and role in (Role.USER, Role.STAFF):
        emit_for_conversation(
            "message.created",
            client_id=client.pk,
            conversation=conversation,
            data={
                "seq": seq,
                "role": "customer" if role == Role.USER else "staff",
                "kind": str(kind),
            },
            content={"text": text},
        )
    return message


def message_note(message: Message, status: str) -> dict[str, Any]:
    """What a publish carries of a message just stored (JSON-ready): the `seq` it follows, the
    conversation's status after it, and the fields an event stream sends
    (`apps.widget.streams._StreamCursor.apply`)."""
    return {
        "after": message.seq - 1,
        "seq": message.seq,
        "status": str(status),
        "message": {
            "public_id": str(message.public_id),
            "role": str(message.role),
            "visibility": str(message.visibility),
            "kind": str(message.kind),
            "text": message.text,
            "data": message.data or {},
            "language": message.language or "",
            "created_at": message.created_at.isoformat(),
        },
    }


def typing_note(conversation: Conversation) -> dict[str, Any]:
    """What a turn's start publishes (JSON-ready): the typing line is on, at the conversation's
    `seq` and status (`apps.widget.streams._StreamCursor.apply`)."""
    return {
        "after": conversation.last_seq,
        "seq": conversation.last_seq,
        "status": str(conversation.status),
        "typing": True,
    }


def message_append_notice(
    *, client: Client, conversation: Conversation, text: str, data: dict[str, Any]
) -> Message:
    """A system notice on the staff timeline that the customer never sees (an e-mail that
    bounced, a conversation assigned). Internal messages ring no event stream by themselves;
    a caller whose consoles must refresh calls `conversation_changed` as well."""
    return message_append(
        client=client,
        conversation=conversation,
        role=Role.SYSTEM,
        kind=Kind.NOTICE,
        visibility=Visibility.INTERNAL,
        text=text,
        data=data,
    )


def conversation_lock(*, client: Client, conversation: Conversation) -> Conversation:
    """Lock the conversation's row until the caller's transaction ends and bring the fields a
    new message depends on up to date on `conversation` itself: its status, language and last
    `seq`. One plain statement (every customer message takes it; the ORM's locking `get()` of
    the whole row cost ≈ 1.5 ms of CPU to build). `Conversation.DoesNotExist` when it is gone."""
    if conversation.client_id != client.pk:
        raise ValueError("conversation belongs to another client")
    qn = connection.ops.quote_name
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    rows = sql_rows(
        "conversations.lock",
        f"SELECT {qn('status')}, {qn('language')}, {qn('last_seq')} "  # noqa: S608
        f"FROM {qn(Conversation._meta.db_table)} "
        f"WHERE {qn('id')} = %s AND {qn('client_id')} = %s{lock}",
        [conversation.pk, client.pk],
        client_id=client.pk,
    )
    if not rows:
        raise Conversation.DoesNotExist(f"conversation {conversation.pk} does not exist")
    conversation.status, conversation.language, conversation.last_seq = rows[0]
    return conversation


def _take_seq(conversation: Conversation, now: Any, *, visible: bool) -> tuple[int, str]:
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
    rows = sql_rows(
        "conversations.take_seq",
        f"UPDATE {qn(Conversation._meta.db_table)} SET {sets} "  # noqa: S608
        f"WHERE {qn('id')} = %s AND {qn('client_id')} = %s "
        f"RETURNING {qn('last_seq')}, {qn('status')}",
        [*params, conversation.pk, conversation.client_id],
        client_id=conversation.client_id,
    )
    if not rows:
        raise Conversation.DoesNotExist(f"conversation {conversation.pk} does not exist")
    return int(rows[0][0]), str(rows[0][1])


def validate_customer_text(text: Any) -> str:
    if not isinstance(text, str):
        raise ApplicationError(
            "text must be a string.", {"fields": {"text": gettext("Must be a string.")}}
        )
    if "\x00" in text:
        raise ApplicationError(
            "text must not contain NUL characters.",
            {"fields": {"text": gettext("Must not contain NUL characters.")}},
        )
    cleaned = text.strip()
    if not cleaned:
        raise ApplicationError(
            "text must not be empty.", {"fields": {"text": gettext("Must not be empty.")}}
        )
    if len(cleaned) > MAX_MESSAGE_CHARS:
        raise ApplicationError(
            f"text is longer than {MAX_MESSAGE_CHARS} characters.",
            {
                "fields": {
                    "text": gettext("At most %(count)d characters.") % {"count": MAX_MESSAGE_CHARS}
                }
            },
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
    *, client: Client, conversation: Conversation, email: Any, site: str
) -> Conversation:
    """Store (or, with "", forget) the address staff replies the customer misses are mailed to.
    Validated with Django's e-mail validator; a 400 names the `email` field.

    A new address is not used until the customer confirms it: we e-mail a signed, expiring link
    (`contact_confirmation_link`, on `site`, GuideDesk's own origin). Confirmation e-mails are
    limited per address and per conversation (a 429 names `email`). Saving the address that is
    already confirmed sends nothing."""
    if not isinstance(email, str):
        raise ApplicationError(
            "email must be a string.", {"fields": {"email": gettext("Must be a string.")}}
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
                {"fields": {"email": gettext("Enter a valid e-mail address.")}},
            ) from None
    with transaction.atomic():
        locked = Conversation.objects.for_client(client).select_for_update().get(pk=conversation.pk)
        unchanged = cleaned == locked.contact_email and (
            not cleaned or locked.contact_email_confirmed_at is not None
        )
        if not unchanged:
            if cleaned:
                contact_confirmation_count(conversation=locked, email=cleaned)  # or 429
            locked.contact_email, locked.contact_email_confirmed_at = cleaned, None
            locked.save(update_fields=["contact_email", "contact_email_confirmed_at", "updated_at"])
            if cleaned:
                conversation_id, client_id = locked.pk, client.pk
                transaction.on_commit(
                    lambda: contact_confirmation_queue(
                        conversation_id=conversation_id,
                        email=cleaned,
                        site=site,
                        client_id=client_id,
                    )
                )
    conversation.contact_email = locked.contact_email
    conversation.contact_email_confirmed_at = locked.contact_email_confirmed_at
    return conversation


CONTACT_CONFIRM_SALT = "guidedesk.widget.contact-confirm"
_HOUR = 3600


def contact_confirmation_count(*, conversation: Conversation, email: str) -> None:
    """Count one confirmation e-mail against the address (whichever client's widget asks) and
    the conversation: at most WIDGET_CONTACT_CONFIRMATIONS_PER_HOUR each per hour, so nobody
    can use a widget to flood an inbox. Over the limit: a 429 naming `email`, and nothing is
    counted. Cache-backed, like the widget's throttles (CACHE_URL across processes)."""
    limit = int(settings.WIDGET_CONTACT_CONFIRMATIONS_PER_HOUR)
    address = hashlib.sha256(email.lower().encode()).hexdigest()
    keys = [f"contact-confirm:address:{address}", f"contact-confirm:conversation:{conversation.pk}"]
    now = timezone.now().timestamp()
    for key in keys:
        since = cache.get(f"{key}:since")
        if since is not None and cache.get(key, 0) >= limit:
            wait = max(60, int(_HOUR - (now - since)))
            message = gettext(
                "We have already sent several confirmation e-mails for this address. Please "
                "check your inbox (and spam folder) for the link, or try again in %(minutes)d "
                "minutes."
            ) % {"minutes": -(-wait // 60)}
            raise ApplicationError(
                message,
                {"fields": {"email": message}, "retry_after": wait},
                status=429,
                code="throttled",
            )
    for key in keys:
        if cache.add(f"{key}:since", now, _HOUR):
            cache.set(key, 0, _HOUR)
        try:
            cache.incr(key)
        except ValueError:  # expired between the two calls: a new window
            cache.set(key, 1, _HOUR)


def contact_confirmation_link(*, conversation: Conversation, email: str, site: str) -> str:
    """The one-click link that confirms `email` for this conversation only: signed (SECRET_KEY)
    over the client, the conversation and the address; valid for
    WIDGET_CONTACT_CONFIRM_MAX_AGE_HOURS."""
    token = signing.dumps(
        {"c": conversation.client_id, "v": str(conversation.public_id), "e": email},
        salt=CONTACT_CONFIRM_SALT,
    )
    return site.rstrip("/") + reverse("widget-contact-confirm", args=[token])


def contact_confirmation_queue(
    *, conversation_id: int, email: str, site: str, client_id: int
) -> None:
    """Send the confirmation e-mail from a worker (call after the address commits). Never
    raises: with no broker (the demo) or an unreachable one it is sent in this process."""
    from apps.conversations.tasks import send_contact_confirmation

    try:
        send_contact_confirmation.delay(conversation_id, email, site, client_id=client_id)
    except Exception:
        logger.exception(
            "could not queue the confirmation e-mail; sending it in-process",
            extra={"conversation_id": conversation_id},
        )
        with tenant_scope(client_id):
            contact_confirmation_send(conversation_id=conversation_id, email=email, site=site)


def contact_confirmation_send(*, conversation_id: int, email: str, site: str) -> bool:
    """E-mail the confirmation link (after the address is stored). Never raises: a failure is
    logged, and saving the address again sends a new link."""
    conversation = (
        Conversation.objects.for_current_client()
        .select_related("client")
        .filter(pk=conversation_id, contact_email=email, contact_email_confirmed_at__isnull=True)
        .first()
    )
    if conversation is None:  # changed or confirmed meanwhile
        return False
    client = conversation.client
    link = contact_confirmation_link(conversation=conversation, email=email, site=site)
    hours = int(settings.WIDGET_CONTACT_CONFIRM_MAX_AGE_HOURS)
    with translation.override(conversation.language or client.language or None):
        subject = gettext("%(business)s: confirm your e-mail address") % {"business": client.name}
        body = "\n".join(
            [
                gettext("Hello,"),
                "",
                gettext(
                    "You left this address in the chat with %(business)s. To receive their "
                    "replies by e-mail when you are not in the chat, confirm it:"
                )
                % {"business": client.name},
                "",
                link,
                "",
                gettext("The link works for %(hours)d hours.") % {"hours": hours},
                gettext(
                    "If it was not you, ignore this e-mail: nothing will be sent to this address."
                ),
            ]
        )
    try:
        EmailMessage(
            subject=subject,
            body=body,
            from_email=settings.DEFAULT_FROM_EMAIL,
            to=[email],
        ).send()
    except Exception:
        logger.exception(
            "contact confirmation e-mail failed", extra={"conversation_id": conversation_id}
        )
        return False
    return True


class ContactConfirmation(StrEnum):
    CONFIRMED = "confirmed"
    EXPIRED = "expired"
    INVALID = "invalid"


def contact_confirmation_target(*, token: str) -> tuple[ContactConfirmation, Conversation | None]:
    """What the link's token names, changing nothing (the page a GET shows): INVALID for a
    tampered token or one for an address the conversation no longer has, EXPIRED past
    WIDGET_CONTACT_CONFIRM_MAX_AGE_HOURS (with the conversation, for its language), else
    CONFIRMED with the conversation (whose `contact_email_confirmed_at` says whether it is
    confirmed already)."""
    outcome = ContactConfirmation.CONFIRMED
    try:
        payload = signing.loads(
            token,
            salt=CONTACT_CONFIRM_SALT,
            max_age=int(settings.WIDGET_CONTACT_CONFIRM_MAX_AGE_HOURS) * _HOUR,
        )
    except signing.SignatureExpired:
        # Genuine but too old: read it only to answer in the conversation's language.
        outcome = ContactConfirmation.EXPIRED
        payload = signing.loads(token, salt=CONTACT_CONFIRM_SALT)
    except signing.BadSignature:
        return ContactConfirmation.INVALID, None
    if not isinstance(payload, dict):
        return ContactConfirmation.INVALID, None
    client_id, email = payload.get("c"), payload.get("e")
    if not isinstance(client_id, int) or not isinstance(email, str) or not email:
        return ContactConfirmation.INVALID, None
    client = Client.objects.filter(pk=client_id).first()
    if client is None:
        return ContactConfirmation.INVALID, None
    try:
        public_id = uuid.UUID(str(payload.get("v")))
    except ValueError:
        return ContactConfirmation.INVALID, None
    conversation = (
        Conversation.objects.for_client(client)
        .select_related("client")
        .filter(public_id=public_id, contact_email=email)
        .first()
    )
    if conversation is None:
        return ContactConfirmation.INVALID, None
    return outcome, conversation


def contact_email_confirm(*, token: str) -> tuple[ContactConfirmation, Conversation | None]:
    """The customer pressed the confirmation page's button (a POST: opening the link alone
    confirms nothing, so a mail scanner following it does not): confirm that address for that
    conversation of that client and nothing else. A link for an address the conversation no
    longer has, a tampered or expired link confirm nothing. Confirming twice changes nothing.
    Staff replies already waiting are checked for the e-mail right away."""
    outcome, conversation = contact_confirmation_target(token=token)
    if outcome != ContactConfirmation.CONFIRMED or conversation is None:
        return outcome, conversation
    client = conversation.client
    if conversation.contact_email_confirmed_at is None:
        confirmed = (
            Conversation.objects.for_client(client)
            .filter(
                pk=conversation.pk,
                contact_email=conversation.contact_email,
                contact_email_confirmed_at=None,
            )
            .update(contact_email_confirmed_at=timezone.now())
        )
        if confirmed:
            # Staff may have replied while the address waited for confirmation.
            unseen_replies_email_schedule(conversation_id=conversation.pk, client_id=client.pk)
    return ContactConfirmation.CONFIRMED, conversation


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


def unseen_replies_email_schedule(*, conversation_id: int, client_id: int) -> None:
    """Check, WIDGET_REPLY_EMAIL_DELAY_SECONDS from now, whether the customer saw the staff
    replies (call after the reply commits). Never raises: the reply is stored either way. With
    no broker (the demo) or an unreachable one, a timer in this process runs the check."""
    from apps.conversations.tasks import email_unseen_replies

    delay = float(settings.WIDGET_REPLY_EMAIL_DELAY_SECONDS)
    if not email_unseen_replies.app.conf.task_always_eager:
        try:
            email_unseen_replies.apply_async(
                (conversation_id,), {"client_id": client_id}, countdown=delay
            )
            return
        except Exception:
            logger.exception(
                "could not queue the unseen-reply e-mail; checking in-process",
                extra={"conversation_id": conversation_id},
            )
    timer = threading.Timer(delay, _email_unseen_replies_in_process)
    timer.args = (conversation_id, client_id, timer)
    timer.daemon = True
    with _timers_lock:
        _timers.add(timer)
    timer.start()


# The in-process checks not yet run (`unseen_replies_email_schedule` without a broker), so that
# whoever ends the process's use of the database first can cancel them.
_timers: set[threading.Timer] = set()
_timers_lock = threading.Lock()


def unseen_replies_checks_cancel() -> int:
    """Cancel the in-process unseen-reply checks still waiting (a test whose database is about
    to go, a demo shutting down). Returns how many were cancelled."""
    with _timers_lock:
        waiting = list(_timers)
        _timers.clear()
    for timer in waiting:
        timer.cancel()
    return len(waiting)


def _email_unseen_replies_in_process(
    conversation_id: int, client_id: int, timer: threading.Timer
) -> None:
    with _timers_lock:
        _timers.discard(timer)
    try:
        with tenant_scope(client_id):
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
    conversation = (
        Conversation.objects.for_current_client()
        .select_related("client")
        .filter(pk=conversation_id)
        .first()
    )
    if conversation is None or not conversation.contact_email:
        return 0
    if conversation.channel == Channel.EMAIL:
        return 0  # its staff replies go out in the thread itself (apps/mail/staff_replies.py)
    if conversation.contact_email_confirmed_at is None:
        return 0  # only to an address the customer confirmed (the link we e-mailed)
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
    business = {"business": client.name}
    # In the customer's language, like the confirmation e-mail.
    with translation.override(conversation.language or client.language or None):
        lines = [
            gettext("Hello,"),
            "",
            gettext("%(business)s's support team replied to your chat while you were away:")
            % business,
            "",
        ]
        for reply in replies:
            when = timezone.localtime(reply.created_at).strftime("%Y-%m-%d %H:%M %Z")
            lines += [f"--- {when}", reply.text, ""]
        lines += [
            "---",
            "",
            gettext(
                "The conversation is waiting for you in the chat on our website, where you left "
                "it (in the same browser)."
            ),
        ]
        if reply_to:
            lines.append(
                gettext("You can also answer this e-mail; your answer goes to %(address)s.")
                % {"address": reply_to}
            )
        lines += [
            "",
            (
                gettext(
                    "You receive this e-mail once because you left this address in the chat "
                    "with %(business)s and did not see these replies there."
                )
                if many
                else gettext(
                    "You receive this e-mail once because you left this address in the chat "
                    "with %(business)s and did not see this reply there."
                )
            )
            % business,
        ]
        subject = (
            gettext("%(business)s: new replies to your chat")
            if many
            else gettext("%(business)s: a new reply to your chat")
        ) % business
    return EmailMessage(
        subject=subject,
        body="\n".join(lines),
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[conversation.contact_email],
        reply_to=[reply_to] if reply_to else None,
    )
