"""Reads of the events app: a client's subscriptions and deliveries, and what is due."""

from __future__ import annotations

import uuid
from datetime import datetime

from django.db.models import Q, QuerySet

from apps.clients.models import Client
from apps.events.models import UNFINISHED, DeliveryStatus, EventDelivery, EventSubscription


def _uuid(value: object) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


def subscription_list(*, client: Client) -> QuerySet[EventSubscription]:
    return EventSubscription.objects.for_client(client).order_by("created_at", "pk")


def subscription_get(*, client: Client, subscription_id: object) -> EventSubscription | None:
    """The client's subscription by public id; None for a missing one or another client's."""
    public_id = _uuid(subscription_id)
    if public_id is None:
        return None
    return EventSubscription.objects.for_client(client).filter(public_id=public_id).first()


def subscriptions_for(*, client_id: int, event_type: str) -> list[EventSubscription]:
    """The client's active subscriptions that receive `event_type` (a client has a handful:
    the type list is read here rather than with a JSON lookup every database lacks)."""
    return [
        subscription
        for subscription in EventSubscription.objects.filter(
            client_id=client_id, active=True
        ).order_by("pk")
        if event_type in (subscription.event_types or [])
    ]


def delivery_list(
    *,
    client: Client,
    subscription: EventSubscription | None = None,
    status: str | None = None,
    event_type: str | None = None,
) -> QuerySet[EventDelivery]:
    rows = EventDelivery.objects.for_client(client).select_related("subscription")
    if subscription is not None:
        rows = rows.filter(subscription=subscription)
    if status:
        rows = rows.filter(status=status)
    if event_type:
        rows = rows.filter(event_type=event_type)
    return rows.order_by("-created_at", "-pk")


def delivery_get(*, client: Client, delivery_id: object) -> EventDelivery | None:
    """The client's delivery by its event id (one per subscription: the newest first) or its
    number; None for a missing one or another client's."""
    rows = EventDelivery.objects.for_client(client).select_related("subscription")
    public_id = _uuid(delivery_id)
    if public_id is not None:
        return rows.filter(event_id=public_id).order_by("-pk").first()
    if str(delivery_id).isdigit():
        return rows.filter(pk=int(str(delivery_id))).first()
    return None


def delivery_blocked(delivery: EventDelivery) -> bool:
    """Whether an earlier event of the same conversation to the same subscription is still
    unfinished: this one waits for it (per-conversation order)."""
    if delivery.conversation_public_id is None:
        return False
    return EventDelivery.objects.filter(
        client_id=delivery.client_id,
        subscription_id=delivery.subscription_id,
        conversation_public_id=delivery.conversation_public_id,
        status__in=UNFINISHED,
        pk__lt=delivery.pk,
    ).exists()


def delivery_next_in_line(delivery: EventDelivery) -> EventDelivery | None:
    """The earliest unfinished later delivery of the same conversation and subscription."""
    if delivery.conversation_public_id is None:
        return None
    return (
        EventDelivery.objects.filter(
            client_id=delivery.client_id,
            subscription_id=delivery.subscription_id,
            conversation_public_id=delivery.conversation_public_id,
            status__in=(DeliveryStatus.PENDING, DeliveryStatus.RETRYING),
            pk__gt=delivery.pk,
        )
        .order_by("pk")
        .first()
    )


def deliveries_due(*, now: datetime, limit: int) -> list[tuple[int, int]]:
    """(client id, delivery id) of every delivery whose attempt is due, oldest first: waiting
    for its first attempt or a retry, or claimed by a worker that never reported back (its
    lease, `next_attempt_at`, ran out). Across clients: the beat task."""
    due = Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now)
    return list(
        EventDelivery.objects.unscoped("the beat task sends every client's due deliveries")
        .filter(status__in=UNFINISHED)
        .filter(due)
        .order_by("pk")
        .values_list("client_id", "pk")[:limit]
    )
