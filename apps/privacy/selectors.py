"""Reads of the privacy app: which conversations a data-subject request is about, which ones the
retention task is due to erase, and the register of requests (docs/privacy.md)."""

from __future__ import annotations

import hashlib
import hmac
import uuid
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


def subject_conversations(*, client: Client, match: SubjectMatch) -> QuerySet[Conversation]:
    """The client's conversations the request is about, oldest first. Another client's
    conversations never match, whatever the address: each business answers for its own."""
    conversations = Conversation.objects.for_client(client)
    value = match.normalized()
    if not value:
        return conversations.none()
    if match.kind == MatchKind.EMAIL:
        conversations = conversations.filter(contact_email__iexact=value)
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
