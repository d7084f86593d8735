from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import gettext, gettext_noop

from apps.accounts.models import Membership
from apps.accounts.models import Role as StaffRole
from apps.clients.models import Client
from apps.conversations.events import conversation_changed
from apps.conversations.models import (
    Conversation,
    ConversationStatus,
    Kind,
    Message,
    Role,
    Visibility,
)
from apps.conversations.services import (
    message_append,
    message_append_notice,
    unseen_replies_email_schedule,
    validate_customer_text,
)
from apps.core.exceptions import ApplicationError
from apps.core.links import absolute_url
from apps.core.outbound import emit_for_conversation
from apps.escalations.availability import availability_text, handoff_availability
from apps.escalations.models import Escalation, EscalationReason, EscalationStatus
from apps.escalations.reply_templates import reply_check_filled
from apps.tools.pending import pending_expire_open

logger = logging.getLogger(__name__)

# Customer-facing msgids, rendered in the customer's language when the message is written
# (`_customer_text`): a hand-off text passed in by a caller is translated the same way.
HANDOFF_TEXT = gettext_noop(
    "I've passed your conversation to our support team — a person will reply here as soon as "
    "possible."
)
HANDBACK_TEXT = gettext_noop("Our team has finished here; the assistant is back to help you.")


def _customer_text(msgid: str, conversation: Conversation) -> str:
    """`msgid` in the conversation's language (the default language when it is not known);
    text that is no msgid (already translated) comes back unchanged."""
    with translation.override(conversation.language or settings.LANGUAGE_CODE):
        return gettext(msgid)


@transaction.atomic
def escalation_create(
    *,
    client: Client,
    conversation: Conversation,
    reason: str,
    detail: str = "",
    trace: Any = None,
    handoff_text: str = HANDOFF_TEXT,
    notify: bool = True,
) -> Escalation:
    """Hand the conversation to a human: an open Escalation, status escalated (no LLM runs from
    now on), a visible hand-off message, and an e-mail to the client's support address."""
    locked = Conversation.objects.select_for_update().get(pk=conversation.pk, client=client)
    existing = (
        Escalation.objects.for_client(client)
        .filter(conversation=locked, status=EscalationStatus.OPEN)
        .first()
    )
    if existing is not None:
        return existing
    escalation = Escalation.objects.create(
        client=client,
        conversation=locked,
        reason=EscalationReason(reason),
        detail=detail[:2000],
        trace=trace,
    )
    locked.status = ConversationStatus.ESCALATED
    locked.save(update_fields=["status", "updated_at"])
    emit_for_conversation(
        "conversation.handed_off",
        client_id=client.pk,
        conversation=locked,
        data={"escalation": str(escalation.public_id), "reason": reason},
        content={"detail": escalation.detail},
    )
    conversation.status = locked.status
    # A person owns the conversation now: an open confirmation question must not be settled by
    # a later stray "ok" after hand-back.
    pending_expire_open(client=client, conversation=locked)
    message_append(
        client=client,
        conversation=conversation,
        role=Role.SYSTEM,
        kind=Kind.ESCALATION,
        visibility=Visibility.INTERNAL,
        text=f"Escalated ({escalation.get_reason_display()}): {detail}".strip(),
        data={"escalation_id": str(escalation.public_id), "reason": reason},
        trace=trace,
    )
    text = _customer_text(handoff_text, locked)
    data: dict[str, Any] = {"escalation_id": str(escalation.public_id)}
    if (  # a staff take-over: a person is already here; no hours: nothing to say
        escalation.reason != EscalationReason.STAFF_TAKEOVER and client.business_hours
    ):
        # When a person answers, from the client's business hours (nothing without them). The
        # hand-off itself must never fail for it: a problem leaves the text as it was.
        try:
            with transaction.atomic():
                availability = handoff_availability(client=client)
                if availability is not None:
                    said = availability_text(availability=availability, conversation=locked)
                    text = f"{text} {said}" if said else text
                    data["availability"] = availability.data()
        except Exception:
            logger.exception("hand-off availability failed", extra={"client": client.pk})
    message_append(
        client=client,
        conversation=conversation,
        role=Role.SYSTEM,
        kind=Kind.HANDOFF,
        text=text,
        data=data,
        trace=trace,
    )
    escalation_id = escalation.pk
    if notify:
        client_id = client.pk
        transaction.on_commit(
            lambda: escalation_notify(escalation_id=escalation_id, client_id=client_id)
        )
    return escalation


def escalation_notify(*, escalation_id: int, client_id: int) -> None:
    """E-mail the client's support address. Failure to send is logged, never raised: the
    escalation itself is already safely stored and visible in the queue."""
    escalation = (
        Escalation.objects.select_related("client", "conversation")
        .filter(pk=escalation_id, client_id=client_id, notified_at__isnull=True)
        .first()
    )
    if escalation is None or not escalation.client.support_email:
        return
    conversation = escalation.conversation
    last = (
        conversation.messages.filter(role=Role.USER).order_by("-seq").values_list("text", flat=True)
    ).first()
    body = "\n".join(
        [
            f"A conversation needs a person ({escalation.get_reason_display()}).",
            "",
            f"Conversation: {conversation.public_id}",
            f"Reason: {escalation.detail or escalation.get_reason_display()}",
            f"Customer's last message: {last or '-'}",
            "",
            gettext("Open the conversation in the staff console to reply:"),
            console_conversation_link(conversation),
        ]
    )
    try:
        send_mail(
            subject=f"[GuideDesk] {escalation.client.name}: conversation needs a person",
            message=body,
            from_email=settings.DEFAULT_FROM_EMAIL,
            recipient_list=[escalation.client.support_email],
        )
    except Exception:
        logger.exception("escalation e-mail failed", extra={"escalation": escalation_id})
        return
    Escalation.objects.filter(pk=escalation_id, client_id=client_id).update(
        notified_at=timezone.now()
    )


def console_conversation_link(conversation: Conversation) -> str:
    """The absolute link to the conversation's console page, its client selected."""
    path = reverse("console-conversation", args=[conversation.public_id])
    return absolute_url(path + "?" + urlencode({"client": conversation.client.slug}))


STAFF_JOINED_TEXT = gettext_noop("A member of our team has joined the conversation.")


@transaction.atomic
def staff_reply(
    *, client: Client, conversation: Conversation, text: str, author: Any = None
) -> Message:
    """A staff member answers the customer. Replying takes ownership: if the assistant still
    owned the conversation, it is escalated (reason staff_takeover) so no LLM answers over them.
    A text that still holds a reply template's variable (`{order_id}` …) is refused, naming it.
    """
    cleaned = validate_customer_text(text)
    reply_check_filled(cleaned)  # no "Hi {customer_name}" reaches a customer (400, named)
    locked = Conversation.objects.select_for_update().get(pk=conversation.pk, client=client)
    if locked.status != ConversationStatus.ESCALATED:
        escalation_create(
            client=client,
            conversation=locked,
            reason=EscalationReason.STAFF_TAKEOVER,
            detail=f"Reply by {author}" if author else "Staff reply",
            handoff_text=STAFF_JOINED_TEXT,
            notify=False,
        )
    open_escalation = (
        Escalation.objects.for_client(client)
        .filter(conversation=locked, status=EscalationStatus.OPEN)
        .first()
    )
    if open_escalation is not None and open_escalation.assigned_to_id is None and author:
        open_escalation.assigned_to = author
        open_escalation.save(update_fields=["assigned_to", "updated_at"])
    if locked.assignee_id is None and getattr(author, "pk", None):
        # The first to reply owns it in the inbox too ("with a teammate").
        locked.assignee = author
        locked.save(update_fields=["assignee", "updated_at"])
    message = message_append(
        client=client,
        conversation=locked,
        role=Role.STAFF,
        text=cleaned,
        author=author,
        data={"author": str(author) if author else None},
    )
    conversation.status, conversation.last_seq = locked.status, locked.last_seq
    if locked.contact_email and locked.contact_email_confirmed_at is not None:
        # Not seen in the widget within the delay → e-mailed to the address the customer
        # confirmed (docs/widget.md "Coming back"). An address confirmed later checks then.
        conversation_id, client_id = locked.pk, client.pk
        transaction.on_commit(
            lambda: unseen_replies_email_schedule(
                conversation_id=conversation_id, client_id=client_id
            )
        )
    return message


@transaction.atomic
def escalation_resolve(*, client: Client, escalation: Escalation, actor: Any = None) -> Escalation:
    """Hand the conversation back to the AI."""
    locked = Escalation.objects.select_for_update().get(pk=escalation.pk, client=client)
    if locked.status == EscalationStatus.RESOLVED:
        return locked
    locked.status = EscalationStatus.RESOLVED
    locked.resolved_at = timezone.now()
    locked.resolved_by = actor if getattr(actor, "pk", None) else None
    locked.save(update_fields=["status", "resolved_at", "resolved_by", "updated_at"])
    conversation = (
        Conversation.objects.for_client(client).select_for_update().get(pk=locked.conversation_id)
    )
    emit_for_conversation(
        "conversation.handed_back",
        client_id=client.pk,
        conversation=conversation,
        data={"escalation": str(locked.public_id), "by": _name(locked.resolved_by) or None},
    )
    if conversation.status == ConversationStatus.ESCALATED:
        conversation.status = ConversationStatus.OPEN
        conversation.assignee = None  # the assistant's again: nobody's in the inbox
        conversation.save(update_fields=["status", "assignee", "updated_at"])
    message_append(
        client=client,
        conversation=conversation,
        role=Role.SYSTEM,
        kind=Kind.NOTICE,
        text=_customer_text(HANDBACK_TEXT, conversation),
        data={"escalation_id": str(locked.public_id), "resolved": True},
    )
    return locked


# ---------------------------------------------------------------------------------------------
# The inbox: step in, assign / claim, staff notes (the console and the staff API call these;
# hand-back is apps.reasoning.handback.conversation_hand_back, which may queue a turn)
# ---------------------------------------------------------------------------------------------

MAX_NOTE_CHARS = 4000


def _name(user: Any) -> str:
    return str(getattr(user, "email", "") or user) if user is not None else ""


@transaction.atomic
def conversation_takeover(
    *, client: Client, conversation: Conversation, actor: Any = None
) -> Escalation:
    """A staff member steps into a conversation: from this commit on no assistant reply is
    posted (an in-flight turn re-reads the status under the same row lock before posting and is
    suppressed), the customer sees that a person joined, and the actor owns it in the inbox.
    Taking over a conversation that is already with staff claims it (no second hand-off)."""
    locked = Conversation.objects.select_for_update().get(pk=conversation.pk, client=client)
    escalation = escalation_create(
        client=client,
        conversation=locked,
        reason=EscalationReason.STAFF_TAKEOVER,
        detail=f"Taken over by {_name(actor)}" if actor else "Taken over by staff",
        handoff_text=STAFF_JOINED_TEXT,
        notify=False,
    )
    if getattr(actor, "pk", None):
        conversation_assign(client=client, conversation=locked, assignee=actor, actor=actor)
        escalation.refresh_from_db()
    conversation.status, conversation.last_seq = locked.status, locked.last_seq
    conversation.assignee_id = locked.assignee_id
    return escalation


def assignable_member(*, client: Client, email: str) -> Any:
    """The client's staff member (agent or above) with this e-mail; an ApplicationError naming
    the field otherwise — an address of another client's staff answers the same."""
    membership = (
        Membership.objects.for_client(client)
        .select_related("user")
        .filter(user__email__iexact=email.strip(), user__is_active=True)
        .exclude(role=StaffRole.VIEWER)
        .first()
    )
    if membership is None:
        message = gettext("No teammate of this client (agent or above) has this e-mail address.")
        raise ApplicationError(message, {"fields": {"assignee": [message]}})
    return membership.user


@transaction.atomic
def conversation_assign(
    *, client: Client, conversation: Conversation, assignee: Any, actor: Any = None
) -> Conversation:
    """Give the conversation to a teammate (`assignee`, a member of the client — see
    `assignable_member`), or to nobody (None). The open escalation, if any, follows. Assigning
    does not take over: a conversation the assistant handles stays the assistant's until
    someone steps in."""
    locked = Conversation.objects.select_for_update().get(pk=conversation.pk, client=client)
    new_id = getattr(assignee, "pk", None)
    if locked.assignee_id == new_id:
        return locked
    locked.assignee = assignee
    locked.save(update_fields=["assignee", "updated_at"])
    Escalation.objects.for_client(client).filter(
        conversation=locked, status=EscalationStatus.OPEN
    ).update(assigned_to=assignee, updated_at=timezone.now())
    if assignee is None:
        text = f"Unassigned by {_name(actor) or 'staff'}"
    elif new_id == getattr(actor, "pk", None):
        text = f"Claimed by {_name(actor)}"
    else:
        text = f"Assigned to {_name(assignee)} by {_name(actor) or 'staff'}"
    message_append_notice(
        client=client,
        conversation=locked,
        text=text,
        data={"assignee": _name(assignee) or None, "by": _name(actor) or None},
    )
    conversation_changed(locked.pk, client.pk)  # internal lines ring no stream by themselves
    conversation.assignee_id = locked.assignee_id
    return locked


@transaction.atomic
def conversation_note_add(
    *, client: Client, conversation: Conversation, text: Any, author: Any = None
) -> Message:
    """A staff note: internal (the widget, the customer's e-mails and the model's history read
    visible messages only), on the conversation's timeline for the team."""
    if not isinstance(text, str) or not text.strip():
        message = gettext("Write the note first.")
        raise ApplicationError(message, {"fields": {"text": [message]}})
    cleaned = text.strip()
    if len(cleaned) > MAX_NOTE_CHARS:
        message = gettext("A note holds at most %(n)d characters.") % {"n": MAX_NOTE_CHARS}
        raise ApplicationError(message, {"fields": {"text": [message]}})
    locked = Conversation.objects.select_for_update().get(pk=conversation.pk, client=client)
    note = message_append(
        client=client,
        conversation=locked,
        role=Role.STAFF,
        kind=Kind.STAFF_NOTE,
        visibility=Visibility.INTERNAL,
        text=cleaned,
        author=author if getattr(author, "pk", None) else None,
        data={"author": _name(author) or None},
    )
    conversation_changed(locked.pk, client.pk)
    return note
