"""/api/v1/events/: subscriptions and deliveries, the admin role, and tenant isolation (client
B's key can neither see nor change client A's subscriptions or deliveries)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from apps.accounts.models import Role
from apps.events.models import DeliveryStatus, EventDelivery, EventSubscription
from apps.events.services import subscription_create
from tests.conftest import key_for
from tests.support.rows import client_rows

pytestmark = pytest.mark.django_db

BASE = "/api/v1/events/"
HOOK = "https://127.0.0.1:8443/hook"


@pytest.fixture
def subscription_a(client_a: Any) -> EventSubscription:
    return subscription_create(
        client=client_a, url=HOOK, name="CRM", event_types=["conversation.created"]
    )


@pytest.fixture
def delivery_a(client_a: Any, subscription_a: EventSubscription) -> EventDelivery:
    return EventDelivery.objects.create(
        client=client_a,
        subscription=subscription_a,
        event_id=uuid.uuid4(),
        event_type="conversation.created",
        payload={"id": "x", "type": "conversation.created", "data": {}},
        status=DeliveryStatus.FAILED,
        attempts=9,
    )


def snapshot(client: Any) -> list[tuple[Any, ...]]:
    return client_rows(
        EventSubscription, client, "url", "event_types", "active", "include_customer_text", "secret"
    )


def test_an_admin_subscribes_an_endpoint_and_sees_the_secret_once(owner_a, client_a):
    response = owner_a.post(
        f"{BASE}subscriptions/",
        {"url": HOOK, "event_types": ["message.created", "conversation.created"]},
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["secret"].startswith("whsec_")
    assert body["event_types"] == ["conversation.created", "message.created"]
    assert body["include_customer_text"] is False
    listed = owner_a.get(f"{BASE}subscriptions/").json()["results"]
    assert [s["id"] for s in listed] == [body["id"]]
    assert "secret" not in listed[0]
    assert "secret" not in owner_a.get(f"{BASE}subscriptions/{body['id']}/").json()


def test_an_unknown_event_type_or_a_private_address_is_refused(owner_a, settings):
    bad_type = owner_a.post(
        f"{BASE}subscriptions/", {"url": HOOK, "event_types": ["order.paid"]}, format="json"
    )
    assert bad_type.status_code == 400
    settings.TOOL_WEBHOOK_ALLOW_PRIVATE_NETWORKS = False
    private = owner_a.post(
        f"{BASE}subscriptions/",
        {"url": "https://127.0.0.1/hook", "event_types": ["message.created"]},
        format="json",
    )
    assert private.status_code == 400
    assert "url" in str(private.json())


def test_an_admin_changes_and_deletes_a_subscription(owner_a, client_a, subscription_a):
    url = f"{BASE}subscriptions/{subscription_a.public_id}/"
    changed = owner_a.patch(
        url, {"include_customer_text": True, "event_types": ["tool.executed"]}, format="json"
    )
    assert changed.status_code == 200, changed.content
    assert changed.json()["event_types"] == ["tool.executed"]
    subscription_a.refresh_from_db()
    assert subscription_a.include_customer_text
    assert owner_a.delete(url).status_code == 204
    assert not EventSubscription.objects.for_client(client_a).exists()


def test_deliveries_are_listed_and_resent(owner_a, client_a, delivery_a, settings):
    settings.EVENTS_TIMEOUT_SECONDS = 1.0
    listed = owner_a.get(f"{BASE}deliveries/?status=failed").json()["results"]
    assert [d["event_id"] for d in listed] == [str(delivery_a.event_id)]
    response = owner_a.post(f"{BASE}deliveries/{delivery_a.event_id}/resend")
    assert response.status_code == 200
    assert response.json()["status"] == "pending"
    assert response.json()["attempts"] == 0


@pytest.mark.parametrize("role", [Role.VIEWER, Role.AGENT])
def test_events_need_the_admin_role(client_a, subscription_a, delivery_a, role):
    api = key_for(client_a, role)
    assert api.get(f"{BASE}subscriptions/").status_code == 403
    assert api.get(f"{BASE}deliveries/").status_code == 403
    assert api.post(f"{BASE}deliveries/{delivery_a.pk}/resend").status_code == 403
    assert (
        api.post(
            f"{BASE}subscriptions/", {"url": HOOK, "event_types": ["tool.executed"]}, format="json"
        ).status_code
        == 403
    )


def test_client_b_cannot_see_client_as_subscriptions_or_deliveries(
    owner_b, subscription_a, delivery_a
):
    assert owner_b.get(f"{BASE}subscriptions/").json()["results"] == []
    assert owner_b.get(f"{BASE}deliveries/").json()["results"] == []
    assert owner_b.get(f"{BASE}subscriptions/{subscription_a.public_id}/").status_code == 404
    assert (
        owner_b.get(f"{BASE}deliveries/?subscription={subscription_a.public_id}").status_code == 404
    )


def test_client_b_cannot_change_delete_or_resend_client_as(
    owner_b, client_a, subscription_a, delivery_a
):
    before = snapshot(client_a)
    url = f"{BASE}subscriptions/{subscription_a.public_id}/"
    patched = owner_b.patch(url, {"url": "https://evil.example/hook"}, format="json")
    assert patched.status_code == 404
    assert owner_b.delete(url).status_code == 404
    for ref in (delivery_a.pk, delivery_a.event_id):
        assert owner_b.post(f"{BASE}deliveries/{ref}/resend").status_code == 404
    assert snapshot(client_a) == before
    delivery_a.refresh_from_db()
    assert (delivery_a.status, delivery_a.attempts) == (DeliveryStatus.FAILED, 9)
