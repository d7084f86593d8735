"""Events out to the business's systems (docs/events.md): subscriptions, recording an event as
one delivery per subscription, sending a delivery (signed with Standard Webhooks, as tool calls
are), retries with back-off, per-conversation order, resending, and erasure.

How an event travels:

1. The app that caused it calls `apps.core.outbound.emit`; when its transaction commits,
   `event_receive` queues the `events.record` task (the `background` queue: never a turn's).
2. `event_record` writes one `EventDelivery` per active subscription of the type (unique per
   subscription and event id, so a task run twice records nothing twice) and queues
   `events.deliver` for each.
3. `delivery_send` sends one delivery — unless an earlier delivery of the same conversation to
   the same subscription is still unfinished: then it waits, and is sent right after that one
   finishes (or by the beat). A 2xx answer delivers it; anything else (an error status, a
   timeout, a refused connection) schedules the next attempt after `BACKOFF_SECONDS`; after
   the last one it is `failed`.
4. Retries are run by the beat task `events.send_due` (every `EVENTS_SEND_DUE_SECONDS`), never
   by a countdown: a worker restart loses nothing, and the schedule is data (`next_attempt_at`).
"""

from __future__ import annotations

import json
import logging
import ssl
import time
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

import httpx2
from celery import current_app
from django.conf import settings
from django.core.cache import cache as django_cache
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext

from apps.clients.models import Client
from apps.core.exceptions import ApplicationError
from apps.core.outbound import INTERNAL_PREFIX, OutboundEvent
from apps.core.tenancy import tenant_scope
from apps.events.alerts import alert_text
from apps.events.models import (
    ALERT_TYPES,
    UNFINISHED,
    DeliveryStatus,
    EventDelivery,
    EventSubscription,
    EventType,
    SubscriptionFormat,
)
from apps.events.selectors import (
    deliveries_due,
    delivery_blocked,
    delivery_next_in_line,
    subscriptions_for,
)
from apps.platform.db import release_connection
from apps.platform.http import CONNECT_TO, wall_clock_client
from apps.tools.executors.webhook import (
    generate_secret,
    resolve_addresses,
    sign_request,
)

logger = logging.getLogger(__name__)

RECORD = "events.record"
DELIVER = "events.deliver"
USER_AGENT = "GuideDesk-Events/1"
# The wait after failed attempt n (1-based); after the last attempt the delivery has failed.
# 30 s, 2 min, 10 min, 30 min, 1 h, 3 h, 6 h, 12 h: nine attempts over about 23 hours.
BACKOFF_SECONDS = (30, 120, 600, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600)
MAX_ATTEMPTS = len(BACKOFF_SECONDS) + 1
# A worker that claimed a delivery and never reported back: the beat sends it again after this.
SENDING_LEASE = timedelta(minutes=5)
# The business's answer is not read beyond this (we only need its status).
MAX_RESPONSE_BYTES = 64 * 1024
MAX_ERROR_CHARS = 500
SEND_DUE_BATCH = 500
# Keys of an event's `data` that hold the customer's (or staff's) words, tool params and
# results: sent only to subscriptions with `include_customer_text`, blanked by an erasure.
CONTENT_KEYS = frozenset(
    {"text", "detail", "comment", "params", "result", "error", "denial_reason"}
)


def retry_delay(attempts: int) -> timedelta | None:
    """How long after failed attempt number `attempts` the next one is due; None: no more."""
    if attempts < 1 or attempts > len(BACKOFF_SECONDS):
        return None
    return timedelta(seconds=BACKOFF_SECONDS[attempts - 1])


# --- subscriptions -------------------------------------------------------------------------------

# Whether a client has an active subscription, cached: most clients have none, and their events
# (every message) then cost one cache read and no task.
_LISTENING_KEY = "events:listening:{client_id}"
_LISTENING_SECONDS = 300


def client_listening(client_id: int) -> bool:
    key = _LISTENING_KEY.format(client_id=client_id)
    known = django_cache.get(key)
    if known is None:
        known = EventSubscription.objects.filter(client_id=client_id, active=True).exists()
        django_cache.set(key, known, _LISTENING_SECONDS)
    return bool(known)


def _listening_changed(client_id: int) -> None:
    django_cache.delete(_LISTENING_KEY.format(client_id=client_id))


def event_types_clean(event_types: Any, fmt: str) -> list[str]:
    allowed = set(ALERT_TYPES) if fmt == SubscriptionFormat.CHAT else set(EventType.values)
    if not isinstance(event_types, list) or not event_types:
        message = gettext("Choose at least one event type.")
        raise ApplicationError(message, {"fields": {"event_types": message}}, code="invalid")
    unknown = [t for t in event_types if t not in allowed]
    if unknown:
        message = gettext("Unknown event type for this format: %(types)s.") % {
            "types": ", ".join(map(str, unknown))
        }
        raise ApplicationError(message, {"fields": {"event_types": message}}, code="invalid")
    return [t for t in EventType.values if t in event_types]  # one order, no repeats


def url_check(url: str) -> None:
    _, refusal = resolve_addresses(url)
    if refusal:
        raise ApplicationError(refusal, {"fields": {"url": refusal}}, code="invalid")


@transaction.atomic
def subscription_create(
    *,
    client: Client,
    url: str,
    event_types: list[str],
    name: str = "",
    fmt: str = SubscriptionFormat.EVENTS,
    include_customer_text: bool = False,
    active: bool = True,
) -> EventSubscription:
    """A new subscription with a new signing secret (`subscription.secret`: show it once)."""
    url_check(url)
    transaction.on_commit(lambda: _listening_changed(client.pk))
    _listening_changed(client.pk)
    return EventSubscription.objects.create(
        client=client,
        name=name[:100],
        url=url,
        format=SubscriptionFormat(fmt),
        event_types=event_types_clean(event_types, fmt),
        include_customer_text=include_customer_text,
        active=active,
        secret=generate_secret(),
    )


@transaction.atomic
def subscription_update(
    *, client: Client, subscription: EventSubscription, **changes: Any
) -> EventSubscription:
    """Change `url`, `name`, `event_types`, `include_customer_text`, `active` (and `fmt`)."""
    if subscription.client_id != client.pk:
        raise ValueError("subscription belongs to another client")
    fmt = changes.pop("fmt", subscription.format)
    if "url" in changes:
        url_check(changes["url"])
    types = changes.pop("event_types", subscription.event_types)
    subscription.format = SubscriptionFormat(fmt)
    subscription.event_types = event_types_clean(types, subscription.format)
    for name in ("url", "name", "include_customer_text", "active"):
        if name in changes:
            setattr(subscription, name, changes[name])
    subscription.save()
    _listening_changed(client.pk)
    transaction.on_commit(lambda: _listening_changed(client.pk))
    return subscription


def subscription_delete(*, client: Client, subscription: EventSubscription) -> None:
    """Delete it and its delivery log."""
    EventSubscription.objects.for_client(client).filter(pk=subscription.pk).delete()
    _listening_changed(client.pk)


@transaction.atomic
def subscription_secret_rotate(*, client: Client, subscription: EventSubscription) -> str:
    """A new signing secret (the old one stops at once); returns it, to show once."""
    subscription.secret = generate_secret()
    EventSubscription.objects.for_client(client).filter(pk=subscription.pk).update(
        secret=subscription.secret, updated_at=timezone.now()
    )
    return subscription.secret


# --- recording an event --------------------------------------------------------------------------


def event_receive(event: OutboundEvent) -> None:
    """The outbound hook's receiver (after the cause committed): queue the recording on the
    background queue. Never raises (the hook logs what does). A client with no active
    subscription queues nothing, nor does an internal event (`INTERNAL_PREFIX`: between our own
    apps, never sent — a turn's replies for the e-mail channel)."""
    if event.type.startswith(INTERNAL_PREFIX) or not client_listening(event.client_id):
        return
    message = {
        "id": event.id,
        "type": event.type,
        "timestamp": event.occurred_at.isoformat(),
        "conversation": event.conversation,
        "data": event.data,
        "content": event.content,
    }
    current_app.tasks[RECORD].apply_async(kwargs={"event": message, "client_id": event.client_id})


def _payload(subscription: EventSubscription, event: dict[str, Any], client: Client) -> dict:
    if subscription.format == SubscriptionFormat.CHAT:
        return {"text": alert_text(client=client, event=event)}
    data = dict(event["data"])
    if subscription.include_customer_text:
        data.update(event.get("content") or {})
    return {
        "id": event["id"],
        "type": event["type"],
        "timestamp": event["timestamp"],
        "data": data,
    }


def event_record(*, client_id: int, event: dict[str, Any]) -> list[EventDelivery]:
    """One delivery per active subscription of the event's type; returns the new ones (a
    second run of the same event records nothing). Queues their sending on commit."""
    subscriptions = subscriptions_for(client_id=client_id, event_type=event["type"])
    if not subscriptions:
        return []
    client = Client.objects.get(pk=client_id)
    event_id = uuid.UUID(event["id"])
    conversation = uuid.UUID(event["conversation"]) if event.get("conversation") else None
    created: list[EventDelivery] = []
    with transaction.atomic():
        for subscription in subscriptions:
            if subscription.format == SubscriptionFormat.CHAT and event["type"] not in ALERT_TYPES:
                continue
            delivery, new = EventDelivery.objects.for_client(client).get_or_create(
                client=client,
                subscription=subscription,
                event_id=event_id,
                defaults={
                    "event_type": event["type"],
                    "conversation_public_id": conversation,
                    "payload": _payload(subscription, event, client),
                },
            )
            if new:
                created.append(delivery)
        ids = [d.pk for d in created]
        transaction.on_commit(lambda: _queue_sends(client_id, ids))
    return created


def _queue_sends(client_id: int, delivery_ids: Iterable[int]) -> None:
    for delivery_id in delivery_ids:
        try:
            current_app.tasks[DELIVER].apply_async(
                kwargs={"delivery_id": delivery_id, "client_id": client_id}
            )
        except Exception:
            # The beat task sends what is due: a delivery that could not be queued waits.
            logger.exception("event delivery not queued", extra={"delivery": delivery_id})


# --- sending -------------------------------------------------------------------------------------


@cache
def _tls_context(bundle: str) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=bundle or None)


def _post(
    subscription: EventSubscription, delivery: EventDelivery
) -> tuple[int | None, str, int, bool]:
    """One signed POST: (the HTTP status or None, an error or "", latency in ms, whether the
    error is final: an address GuideDesk refuses to call, which no retry changes)."""
    started = time.monotonic()
    addresses, refusal = resolve_addresses(subscription.url)
    if refusal:
        return None, refusal[:MAX_ERROR_CHARS], 0, True
    body = json.dumps(delivery.payload, separators=(",", ":"), sort_keys=True).encode()
    headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT}
    headers |= sign_request(
        body=body,
        message_id=str(delivery.event_id),
        timestamp=datetime.now(UTC),  # per attempt: a retry is not a stale replay
        secrets_=[subscription.secret],
    )
    extensions = {CONNECT_TO: addresses[delivery.attempts % len(addresses)]} if addresses else {}
    options = {"verify": _tls_context(settings.EVENTS_CA_BUNDLE)}
    status: int | None = None
    error = ""
    release_connection()  # no database connection is held while the business answers
    with wall_clock_client(
        limit=settings.EVENTS_TIMEOUT_SECONDS,
        follow_redirects=False,
        transport_options=options,
    ) as http:
        try:
            request = http.build_request(
                "POST", subscription.url, content=body, headers=headers, extensions=extensions
            )
            response = http.send(request, stream=True)
            try:
                status = response.status_code
                read = 0
                for chunk in response.iter_bytes():
                    read += len(chunk)
                    if read > MAX_RESPONSE_BYTES:
                        break
            finally:
                response.close()
        except httpx2.TimeoutException:
            error = "The endpoint timed out."
        except httpx2.HTTPError as exc:
            error = f"Could not reach the endpoint ({type(exc).__name__})."
    if status is not None and not 200 <= status < 300:
        error = f"The endpoint answered HTTP {status}."
    return status, error[:MAX_ERROR_CHARS], int((time.monotonic() - started) * 1000), False


def _claim(delivery: EventDelivery, now: datetime) -> bool:
    """pending/retrying (due) → sending, or a sending one whose lease ran out; one conditional
    UPDATE, so of two workers exactly one sends."""
    rows = EventDelivery.objects.filter(client_id=delivery.client_id, pk=delivery.pk)
    due = rows.filter(status__in=UNFINISHED).exclude(next_attempt_at__gt=now)
    return bool(due.update(status=DeliveryStatus.SENDING, next_attempt_at=now + SENDING_LEASE))


def delivery_send(*, client_id: int, delivery_id: int, now: datetime | None = None) -> str:
    """Send one delivery if it is due and nothing earlier of its conversation is unfinished.
    Returns what happened: delivered, retrying, failed, waiting (ordering), not_due. `now`
    stands for the clock (the tests run the back-off schedule without sleeping)."""
    now = now or timezone.now()
    with tenant_scope(client_id):
        delivery = (
            EventDelivery.objects.for_current_client()
            .select_related("subscription")
            .filter(pk=delivery_id)
            .first()
        )
        if delivery is None or delivery.status not in UNFINISHED:
            return "not_due"
        if delivery_blocked(delivery):
            return "waiting"
        if not _claim(delivery, now):
            return "not_due"
        subscription = delivery.subscription
        status, error, latency, final = _post(subscription, delivery)
        attempts = min(delivery.attempts + 1, 32767)
        fields: dict[str, Any] = {
            "attempts": attempts,
            "last_status_code": status,
            "last_error": error,
            "latency_ms": latency,
            "updated_at": timezone.now(),
        }
        if not error:
            outcome = DeliveryStatus.DELIVERED
            fields |= {"delivered_at": timezone.now(), "next_attempt_at": None}
        elif not final and (delay := retry_delay(attempts)) is not None:
            outcome = DeliveryStatus.RETRYING
            fields["next_attempt_at"] = now + delay
        else:
            outcome = DeliveryStatus.FAILED
            fields["next_attempt_at"] = None
        EventDelivery.objects.for_current_client().filter(pk=delivery.pk).update(
            status=outcome, **fields
        )
        if outcome == DeliveryStatus.RETRYING:
            logger.info(
                "event delivery failed; will retry",
                extra={"delivery": delivery.pk, "attempt": attempts, "error": error},
            )
            return str(outcome)
        # Finished: the next event of the conversation, held back for this one, goes now.
        following = delivery_next_in_line(delivery)
    if following is not None:
        delivery_send(client_id=client_id, delivery_id=following.pk, now=now)
    return str(outcome)


def deliveries_send_due(*, now: datetime | None = None, limit: int = SEND_DUE_BATCH) -> int:
    """The beat task: send every due delivery, oldest first (each in its client's scope).
    Returns how many were delivered."""
    now = now or timezone.now()
    delivered = 0
    for client_id, delivery_id in deliveries_due(now=now, limit=limit):
        try:
            if delivery_send(client_id=client_id, delivery_id=delivery_id, now=now) == "delivered":
                delivered += 1
        except Exception:
            logger.exception("event delivery crashed", extra={"delivery": delivery_id})
    return delivered


@transaction.atomic
def delivery_resend(*, client: Client, delivery: EventDelivery) -> EventDelivery:
    """Send the delivery again, as it was (same payload, same `webhook-id`: the receiver
    deduplicates), with a fresh back-off schedule."""
    EventDelivery.objects.for_client(client).filter(pk=delivery.pk).update(
        status=DeliveryStatus.PENDING,
        attempts=0,
        next_attempt_at=None,
        last_error="",
        updated_at=timezone.now(),
    )
    client_id, delivery_id = client.pk, delivery.pk
    transaction.on_commit(lambda: _queue_sends(client_id, [delivery_id]))
    delivery.refresh_from_db()
    return delivery


# --- erasure -------------------------------------------------------------------------------------


def deliveries_erase(*, client: Client, conversation_public_ids: Iterable[str]) -> dict[str, int]:
    """An erasure of these conversations (apps/privacy/services.py): the delivery log keeps
    each delivery (type, status, attempts, times) and loses the customer's words and the tool
    params and results in its payload. Returns the rows changed, labelled for the erasure's
    counts."""
    ids = [uuid.UUID(str(i)) for i in conversation_public_ids]
    if not ids:
        return {}
    rows = list(
        EventDelivery.objects.for_client(client)
        .filter(conversation_public_id__in=ids)
        .only("pk", "payload", "subscription_id")
    )
    changed = []
    for delivery in rows:
        payload = dict(delivery.payload or {})
        data = payload.get("data")
        if isinstance(data, dict):
            payload["data"] = {k: v for k, v in data.items() if k not in CONTENT_KEYS}
        delivery.payload = payload
        delivery.content_erased = True
        changed.append(delivery)
    EventDelivery.objects.bulk_update(changed, ["payload", "content_erased"])
    return {"events.EventDelivery": len(changed)} if changed else {}
