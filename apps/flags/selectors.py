"""Read-side queries for flags on the assistant's answers, always scoped to one client."""

from __future__ import annotations

from typing import Any

from django.db.models import Exists, OuterRef, QuerySet

from apps.api.schema import parse_uuid
from apps.clients.models import Client
from apps.conversations.models import Conversation, Message
from apps.flags.models import MessageFlag


def flag_list(*, client: Client, conversation: Any = None) -> QuerySet[MessageFlag]:
    queryset = MessageFlag.objects.for_client(client).select_related(
        "conversation", "message", "flagged_by"
    )
    if conversation is not None:
        queryset = queryset.filter(conversation=conversation)
    return queryset.order_by("-created_at", "-pk")


def conversations_flagged[Q: QuerySet[Conversation]](
    *, client: Client, queryset: Q, flagged: bool = True
) -> Q:
    """`queryset` (the client's conversations) narrowed to those with at least one flagged
    reply (`flagged=False`: those with none) — the inbox's "flagged" filter. One EXISTS
    subquery on the (client, conversation) index, whatever the page size."""
    has_flag = Exists(MessageFlag.objects.for_client(client).filter(conversation=OuterRef("pk")))
    return queryset.filter(has_flag if flagged else ~has_flag)


def flag_get(*, client: Client, flag_id: str) -> MessageFlag | None:
    public_id = parse_uuid(flag_id)
    if public_id is None:
        return None
    return flag_list(client=client).filter(public_id=public_id).first()


def flaggable_message_get(*, client: Client, message_id: str) -> Message | None:
    """One of the client's messages by public id (None: malformed, unknown, another
    client's)."""
    public_id = parse_uuid(message_id)
    if public_id is None:
        return None
    return (
        Message.objects.for_client(client)
        .select_related("conversation")
        .filter(public_id=public_id)
        .first()
    )
