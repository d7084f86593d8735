"""Reads of the privacy app: which conversations a data-subject request is about, which ones the
retention task is due to erase, and the register of requests (docs/privacy.md)."""

from __future__ import annotations

import hashlib
import hmac
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db.models import Q, QuerySet
from django.db.models.functions import Coalesce

from apps.clients.models import Client
from apps.conversations.models import Conversation
from apps.privacy.models import DataSubjectRequest, ErasedConversation, MatchKind


@dataclass(frozen=True)
class SubjectMatch:
    """How the customer is identified: by the e-mail address they left, one conversation's
    public id, the visitor id the business's site gave the widget, or the verified customer id
    its backend signed."""

    kind: str  # MatchKind.EMAIL | CONVERSATION | VISITOR | CUSTOMER
    value: str

    def normalized(self) -> str:
        value = self.value.strip()
        return value.lower() if self.kind in (MatchKind.EMAIL, MatchKind.CONVERSATION) else value

    def digest(self) -> str:
        """A keyed digest of the match for the register: the same customer, the same digest;
        the register never holds the address itself."""
        key = f"guidedesk.privacy:{settings.SECRET_KEY}".encode()
        message = f"{self.kind}:{self.normalized()}".encode()
        return hmac.new(key, message, hashlib.sha256).hexdigest()


def _email_owned(value: str) -> Q:
    """Conversations where `value` is shown to be the customer's own address: they confirmed
    it with the e-mailed link, or it is the verified customer's e-mail."""
    return Q(contact_email__iexact=value, contact_email_confirmed_at__isnull=False) | Q(
        customer_email__iexact=value, customer_verified_at__isnull=False
    )


def _public_ids(values: Collection[str]) -> list[uuid.UUID]:
    ids = []
    for value in values:
        try:
            ids.append(uuid.UUID(str(value)))
        except ValueError:
            continue
    return ids


def _email_unconfirmed(value: str) -> Q:
    """Every conversation that names the address: left in the chat, the customer's e-mail, or
    the sender of an e-mail thread (apps/mail: `visitor_id` "email:<address>") — the From of an
    e-mail proves nothing unless the provider verified it, which makes it `customer_email`."""
    return (
        Q(contact_email__iexact=value)
        | Q(customer_email__iexact=value)
        | Q(visitor_id__iexact=f"email:{value}")
    )


def subject_conversations(
    *, client: Client, match: SubjectMatch, include_unconfirmed: Collection[str] = ()
) -> QuerySet[Conversation]:
    """The client's conversations the request is about, oldest first. Another client's
    conversations never match, whatever the address: each business answers for its own.

    By e-mail, only conversations whose address is the customer's own match: confirmed with
    the e-mailed link, or the verified customer's e-mail. Anyone can type an address into a
    chat, so the others (`subject_unconfirmed_conversations`) are left to staff, who may add
    some by id (`include_unconfirmed`: public ids; ids of other conversations are ignored)."""
    conversations = Conversation.objects.for_client(client)
    value = match.normalized()
    if not value:
        return conversations.none()
    if match.kind == MatchKind.EMAIL:
        owned = _email_owned(value)
        chosen = _public_ids(include_unconfirmed)
        if chosen:
            owned |= _email_unconfirmed(value) & Q(public_id__in=chosen)
        conversations = conversations.filter(owned)
    elif match.kind == MatchKind.CONVERSATION:
        try:
            public_id = uuid.UUID(value)
        except ValueError:
            return conversations.none()
        conversations = conversations.filter(public_id=public_id)
    elif match.kind == MatchKind.VISITOR:
        conversations = conversations.filter(visitor_id=value)
    elif match.kind == MatchKind.CUSTOMER:
        # Only conversations whose customer the business's site verified (docs/widget.md).
        conversations = conversations.filter(customer_id=value, customer_verified_at__isnull=False)
    else:
        raise ValueError(f"unknown match kind {match.kind!r}")
    return conversations.order_by("created_at", "pk")


def subject_unconfirmed_conversations(
    *, client: Client, match: SubjectMatch, include_unconfirmed: Collection[str] = ()
) -> QuerySet[Conversation]:
    """By e-mail: the client's conversations with that address that the customer never
    confirmed (a stranger may have typed it), except those staff chose to include — for staff
    to decide, listed apart and never exported or erased on their own. Empty for the other
    kinds of match."""
    conversations = Conversation.objects.for_client(client)
    value = match.normalized()
    if match.kind != MatchKind.EMAIL or not value:
        return conversations.none()
    taken = subject_conversations(
        client=client, match=match, include_unconfirmed=include_unconfirmed
    )
    return (
        conversations.filter(_email_unconfirmed(value))
        .exclude(pk__in=taken.values("pk"))
        .order_by("created_at", "pk")
    )


def retention_due(*, client: Client, cutoff: datetime) -> QuerySet[Conversation]:
    """The client's conversations with no activity since `cutoff` that are not erased yet,
    oldest first."""
    erased = ErasedConversation.objects.for_client(client).values("conversation_id")
    return (
        Conversation.objects.for_client(client)
        .annotate(last_activity=Coalesce("last_message_at", "created_at"))
        .filter(last_activity__lt=cutoff)
        .exclude(Q(pk__in=erased))
        .order_by("last_activity", "pk")
    )


def privacy_requests(*, client: Client) -> QuerySet[DataSubjectRequest]:
    return (
        DataSubjectRequest.objects.for_client(client)
        .select_related("requested_by")
        .order_by("-created_at", "-pk")
    )


def privacy_request_get(*, client: Client, public_id: str) -> DataSubjectRequest | None:
    try:
        key = uuid.UUID(str(public_id))
    except ValueError:
        return None
    return privacy_requests(client=client).filter(public_id=key).first()
