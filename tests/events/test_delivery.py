"""Events out, end to end against a real HTTPS receiver: Standard Webhooks signatures, each
event type from the service that causes it, retries on the back-off schedule (time simulated,
never slept), one id across retries, order per conversation, customer text, erasure, the chat
alert and the admin's Resend."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from apps.approvals.services import approval_deny, approval_request_create
from apps.conversations.models import Conversation, Message, Role
from apps.escalations.services import escalation_create, escalation_resolve, staff_reply
from apps.events.models import DeliveryStatus, EventDelivery, EventSubscription
from apps.events.services import (
    BACKOFF_SECONDS,
    MAX_ATTEMPTS,
    deliveries_send_due,
    retry_delay,
    subscription_create,
)
from apps.outcomes.services import conversation_rate
from apps.privacy.services import conversations_erase
from apps.tools.executors.webhook import secret_key
from apps.tools.services import tool_execute
from tests.factories import ClientFactory, ClientToolFactory, UserFactory
from tests.widget.conftest import Widget

pytestmark = pytest.mark.django_db

ALL = [
    "conversation.created",
    "message.created",
    "conversation.handed_off",
    "conversation.handed_back",
    "conversation.rated",
    "approval.requested",
    "approval.decided",
    "tool.executed",
]


@pytest.fixture
def shop(db: Any) -> Any:
    return ClientFactory(slug="shop", name="Shop", language="es")


def subscribe(client: Any, url: str, **extra: Any) -> EventSubscription:
    return subscription_create(client=client, url=url, event_types=extra.pop("types", ALL), **extra)


def verify(request: dict[str, Any], secret: str) -> dict[str, Any]:
    """The business's side: verify with the standardwebhooks library."""
    headers = {k.lower(): v for k, v in request["headers"].items()}
    return Webhook(secret_key(secret)).verify(request["body"], headers)


def start_conversation(shop: Any, capture: Any) -> Conversation:
    with capture(execute=True):
        response = Widget(shop).start()
    assert response.status_code == 201, response.content
    conversation = Conversation.objects.for_client(shop).get(public_id=response.json()["id"])
    conversation.token = response.json()["token"]
    return conversation


def test_a_conversation_started_in_the_widget_reaches_the_endpoint_signed(
    shop, receiver, django_capture_on_commit_callbacks
):
    subscription = subscribe(shop, receiver.url)
    conversation = start_conversation(shop, django_capture_on_commit_callbacks)

    assert len(receiver.requests) == 1
    event = verify(receiver.requests[0], subscription.secret)
    assert event["type"] == "conversation.created"
    assert event["data"]["conversation"] == str(conversation.public_id)
    assert receiver.requests[0]["headers"]["webhook-id"] == event["id"]
    delivery = EventDelivery.objects.for_client(shop).get()
    assert str(delivery.event_id) == event["id"]
    assert delivery.status == DeliveryStatus.DELIVERED
    assert delivery.attempts == 1
    assert delivery.last_status_code == 200
    assert delivery.latency_ms is not None


def test_a_forged_or_altered_event_fails_verification(
    shop, receiver, django_capture_on_commit_callbacks
):
    subscription = subscribe(shop, receiver.url)
    start_conversation(shop, django_capture_on_commit_callbacks)
    request = receiver.requests[0]
    tampered = {
        "headers": request["headers"],
        "body": request["body"].replace(b"conversation", b"Conversation", 1),
    }
    with pytest.raises(Exception):  # noqa: B017, PT011 (the library's own verification error)
        verify(tampered, subscription.secret)
    with pytest.raises(Exception):  # noqa: B017, PT011
        verify(request, "whsec_" + "QUJD" * 8)


def test_every_event_type_comes_from_the_service_that_causes_it(
    shop, receiver, django_capture_on_commit_callbacks
):
    subscribe(shop, receiver.url, include_customer_text=True)
    conversation = start_conversation(shop, django_capture_on_commit_callbacks)
    staff = UserFactory(email="sam@shop.example")
    tool = ClientToolFactory(client=shop, name="refund_order", max_retries=0, timeout_seconds=1)
    customer_message = None
    with django_capture_on_commit_callbacks(execute=True):
        escalation = escalation_create(
            client=shop, conversation=conversation, reason="customer_request", notify=False
        )
    with django_capture_on_commit_callbacks(execute=True):
        # The customer writes while a person owns the conversation: no model runs.
        response = Widget(shop).say(
            str(conversation.public_id), conversation.token, "Where is my order TH-12345?"
        )
    customer_message = Message.objects.for_client(shop).filter(role=Role.USER).first()
    with django_capture_on_commit_callbacks(execute=True):
        staff_reply(client=shop, conversation=conversation, text="On its way!", author=staff)
    with django_capture_on_commit_callbacks(execute=True):
        escalation_resolve(client=shop, escalation=escalation, actor=staff)
    with django_capture_on_commit_callbacks(execute=True):
        conversation_rate(client=shop, conversation=conversation, score=5, comment="Great")
    with django_capture_on_commit_callbacks(execute=True):
        approval, _ = approval_request_create(
            client=shop,
            conversation=conversation,
            tool=tool,
            params={"order_id": "TH-12345"},
            idempotency_key="events-approval-1",
            requested_in=customer_message or Message.objects.for_client(shop).first(),
            trace=None,
        )
    with django_capture_on_commit_callbacks(execute=True):
        approval_deny(client=shop, approval=approval, actor=staff, reason="Already refunded")
    with django_capture_on_commit_callbacks(execute=True):
        tool_execute(
            client=shop,
            tool=tool,
            params={"order_id": "TH-12345"},
            idempotency_key="events-tool-1",
            conversation=conversation,
        )

    assert response.status_code in {201, 202}, response.content
    events = receiver.bodies()
    types = [e["type"] for e in events]
    for expected in ALL:
        assert expected in types, (expected, types)
    by_type = {e["type"]: e["data"] for e in events}
    assert by_type["conversation.handed_off"]["reason"] == "customer_request"
    assert by_type["conversation.handed_back"]["by"] == "sam@shop.example"
    assert by_type["conversation.rated"] == {
        "conversation": str(conversation.public_id),
        "score": 5,
        "comment": "Great",
    }
    assert by_type["approval.decided"]["status"] == "denied"
    assert by_type["approval.decided"]["denial_reason"] == "Already refunded"
    assert by_type["tool.executed"]["tool"] == "refund_order"
    assert by_type["tool.executed"]["status"] == "failed"
    said = [e["data"] for e in events if e["type"] == "message.created"]
    assert {(m["role"], m["text"]) for m in said} >= {
        ("customer", "Where is my order TH-12345?"),
        ("staff", "On its way!"),
    }
    # The hand-off notice and other system messages are not customer or staff messages.
    assert {m["role"] for m in said} == {"customer", "staff"}


def test_customer_text_is_left_out_unless_the_subscription_opts_in(
    shop, receiver, django_capture_on_commit_callbacks
):
    subscribe(shop, receiver.url, types=["message.created", "conversation.rated"])
    conversation = start_conversation(shop, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        staff_reply(client=shop, conversation=conversation, text="Your refund is TH-99")
    with django_capture_on_commit_callbacks(execute=True):
        conversation_rate(client=shop, conversation=conversation, score=2, comment="Slow")
    events = receiver.bodies()
    assert [e["type"] for e in events] == ["message.created", "conversation.rated"]
    assert "text" not in events[0]["data"]
    assert events[1]["data"] == {"conversation": str(conversation.public_id), "score": 2}
    assert b"TH-99" not in b"".join(r["body"] for r in receiver.requests)


def test_erasure_removes_the_customer_text_from_the_delivery_log(
    shop, receiver, django_capture_on_commit_callbacks
):
    subscribe(shop, receiver.url, include_customer_text=True, types=["message.created"])
    conversation = start_conversation(shop, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        staff_reply(client=shop, conversation=conversation, text="Jane, your order TH-4242")
    delivery = EventDelivery.objects.for_client(shop).get()
    assert delivery.payload["data"]["text"] == "Jane, your order TH-4242"

    counts = conversations_erase(client=shop, conversation_ids=[conversation.pk])

    delivery.refresh_from_db()
    assert counts["events.EventDelivery"] == 1
    assert "text" not in delivery.payload["data"]
    assert "TH-4242" not in str(delivery.payload)
    assert delivery.content_erased
    assert delivery.status == DeliveryStatus.DELIVERED  # the log itself stays


def test_the_back_off_schedule_runs_to_about_a_day_then_fails():
    waits = [w for n in range(1, MAX_ATTEMPTS) if (w := retry_delay(n)) is not None]
    assert len(waits) == MAX_ATTEMPTS - 1
    assert [w.total_seconds() for w in waits] == list(BACKOFF_SECONDS)
    assert waits[:3] == [timedelta(seconds=30), timedelta(minutes=2), timedelta(minutes=10)]
    assert timedelta(hours=20) < sum(waits, timedelta()) < timedelta(hours=25)
    assert retry_delay(MAX_ATTEMPTS) is None


def test_a_receiver_down_for_ten_minutes_gets_the_event_when_it_is_back(
    shop, receiver, django_capture_on_commit_callbacks
):
    subscription = subscribe(shop, receiver.url, types=["conversation.created"])
    receiver.down()
    t0 = timezone.now()
    start_conversation(shop, django_capture_on_commit_callbacks)
    delivery = EventDelivery.objects.for_client(shop).get()
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.RETRYING, 1)
    first_due = delivery.next_attempt_at
    assert timedelta(seconds=29) < first_due - t0 < timedelta(seconds=35)

    # Nothing is due before the schedule says so.
    assert deliveries_send_due(now=first_due - timedelta(seconds=1)) == 0
    delivery.refresh_from_db()
    assert delivery.attempts == 1
    # +30 s and +2 min 30 s: still down.
    for _ in range(2):
        deliveries_send_due(now=delivery.next_attempt_at)
        delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.RETRYING, 3)
    assert delivery.next_attempt_at - first_due == timedelta(seconds=120 + 600)
    assert delivery.next_attempt_at - t0 > timedelta(minutes=10)  # after the outage

    receiver.up()  # back after ten minutes
    assert deliveries_send_due(now=delivery.next_attempt_at) == 1
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.DELIVERED, 4)
    verify(receiver.requests[0], subscription.secret)


def test_retries_keep_the_event_id_and_sign_each_attempt(
    shop, receiver, django_capture_on_commit_callbacks
):
    subscription = subscribe(shop, receiver.url, types=["conversation.created"])
    receiver.answers = [500, 503]
    start_conversation(shop, django_capture_on_commit_callbacks)
    delivery = EventDelivery.objects.for_client(shop).get()
    for _ in range(2):
        deliveries_send_due(now=delivery.next_attempt_at)
        delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.DELIVERED
    assert delivery.attempts == 3
    ids = {r["headers"]["webhook-id"] for r in receiver.requests}
    assert ids == {str(delivery.event_id)}
    for request in receiver.requests:
        verify(request, subscription.secret)


def test_a_delivery_that_never_succeeds_fails_after_the_last_attempt(
    shop, receiver, django_capture_on_commit_callbacks
):
    subscribe(shop, receiver.url, types=["conversation.created"])
    receiver.answers = [500] * MAX_ATTEMPTS
    start_conversation(shop, django_capture_on_commit_callbacks)
    delivery = EventDelivery.objects.for_client(shop).get()
    while delivery.status == DeliveryStatus.RETRYING:
        deliveries_send_due(now=delivery.next_attempt_at)
        delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.FAILED, MAX_ATTEMPTS)
    assert delivery.last_status_code == 500


def test_events_of_one_conversation_arrive_in_order(
    shop, receiver, django_capture_on_commit_callbacks
):
    subscribe(shop, receiver.url, include_customer_text=True, types=["message.created"])
    conversation = start_conversation(shop, django_capture_on_commit_callbacks)
    receiver.answers = [503]  # the first message's first attempt fails
    for text in ("one", "two", "three"):
        with django_capture_on_commit_callbacks(execute=True):
            staff_reply(client=shop, conversation=conversation, text=text)
    # Two and three wait for one: nothing after the failure was sent.
    assert [b["data"]["text"] for b in receiver.bodies()] == ["one"]
    statuses = list(
        EventDelivery.objects.for_client(shop).order_by("pk").values_list("status", flat=True)
    )
    assert statuses == ["retrying", "pending", "pending"]

    deliveries_send_due(now=timezone.now() + timedelta(minutes=1))

    assert [b["data"]["text"] for b in receiver.bodies()] == ["one", "one", "two", "three"]
    assert set(EventDelivery.objects.for_client(shop).values_list("status", flat=True)) == {
        "delivered"
    }


def test_a_chat_alert_is_sent_for_a_hand_off_in_the_clients_language(
    shop, receiver, django_capture_on_commit_callbacks
):
    subscribe(
        shop,
        receiver.url,
        fmt="chat",
        types=["conversation.handed_off", "approval.requested"],
    )
    conversation = start_conversation(shop, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        escalation_create(
            client=shop, conversation=conversation, reason="customer_request", notify=False
        )
    [alert] = receiver.bodies()
    assert set(alert) == {"text"}
    assert alert["text"].startswith("Shop: ")
    assert str(conversation.public_id) in alert["text"]
    assert "handed to your team" not in alert["text"]  # Spanish, the client's language


def test_a_chat_subscription_takes_only_what_needs_a_person(shop, receiver):
    from apps.core.exceptions import ApplicationError

    with pytest.raises(ApplicationError):
        subscribe(shop, receiver.url, fmt="chat", types=["message.created"])


def test_the_admin_resends_a_delivery_with_the_same_id(
    shop, receiver, client, django_capture_on_commit_callbacks
):
    subscribe(shop, receiver.url, types=["conversation.created"])
    start_conversation(shop, django_capture_on_commit_callbacks)
    delivery = EventDelivery.objects.for_client(shop).get()
    client.force_login(UserFactory(is_superuser=True, is_staff=True))
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("admin:events_eventdelivery_changelist"),
            {"action": "resend", "_selected_action": [delivery.pk], "post": "yes"},
        )
    assert response.status_code == 302
    assert len(receiver.requests) == 2
    assert {r["headers"]["webhook-id"] for r in receiver.requests} == {str(delivery.event_id)}
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.DELIVERED, 1)
