"""The widget key is public, so nothing a stranger does with it may lock the tenant's
widget. Failed and unauthenticated requests count against the caller's address; the tenant-wide
ceiling (`widget_key`) counts only real work — a conversation started, a message posted."""

from __future__ import annotations

import uuid

import pytest
from django.conf import settings as django_settings

from apps.conversations.models import Conversation, Message
from apps.widget.auth import WidgetKeyThrottle
from tests.support.shop import assess
from tests.widget.conftest import API, Widget
from tests.widget.test_widget_api import error, rates

pytestmark = pytest.mark.django_db

ATTACKERS = [f"198.51.100.{n}" for n in range(1, 12)]  # 11 addresses, as in the report


def start_from(widget: Widget, address: str) -> int:
    """Start a conversation from another client address (`Widget.start` sends headers only)."""
    response = widget.http.post(
        f"{API}conversations", {}, format="json", headers=widget.headers(), REMOTE_ADDR=address
    )
    return response.status_code


def bogus_message(widget: Widget, address: str) -> int:
    """A message to a conversation that does not exist, with a made-up token."""
    response = widget.http.post(
        f"{API}conversations/{uuid.uuid4()}/messages",
        {"text": "hello"},
        format="json",
        headers=widget.headers(f"made-up-{uuid.uuid4().hex}"),
        REMOTE_ADDR=address,
    )
    return response.status_code


@pytest.mark.django_db(transaction=True)
def test_bogus_conversation_ids_from_many_addresses_do_not_lock_the_tenant_out(
    widget, settings, llm
):
    # The attack from the report, scaled down: each address sends as much as its own allowance
    # lets through, far more in total than the tenant-wide ceiling.
    rates(settings, widget_ip="12/min", widget_key="20/min")
    statuses = [bogus_message(widget, address) for address in ATTACKERS for _ in range(12)]
    assert statuses.count(404) == 12 * len(ATTACKERS)  # 132 failed requests, all let through
    assert bogus_message(widget, ATTACKERS[0]) == 429  # … until each address's own limit

    # A real visitor of the same tenant still chats.
    llm.script("assess", assess(response="We open at nine.", confidence=9))
    conversation_id, token = widget.conversation()
    reply = widget.say(conversation_id, token, "When do you open?")
    assert reply.status_code == 201, reply.content
    assert reply.json()["replies"][0]["text"] == "We open at nine."


def test_unauthenticated_requests_count_against_the_callers_address(widget, settings):
    rates(settings, widget_ip="3/min", widget_key="1/min")
    for _ in range(3):
        # no visitor token: 401, counted against this address only
        response = widget.messages(str(uuid.uuid4()), None)
        assert response.status_code == 401
    refused = widget.messages(str(uuid.uuid4()), None)
    assert refused.status_code == 429 and error(refused)["code"] == "throttled"
    assert widget.start().status_code == 429  # this address is done for now …
    assert start_from(widget, "10.0.0.2") == 201  # … the tenant is not: its one unit of real work


def test_wrong_keys_and_origins_count_against_the_address_not_the_tenant(widget, settings):
    rates(settings, widget_ip="2/min", widget_key="1/min")
    assert widget.start(**{"X-Widget-Key": "wk_not-a-key"}).status_code == 401
    assert widget.start(Origin="https://evil.example").status_code == 403
    assert widget.start().status_code == 429  # that address used its allowance
    assert start_from(widget, "10.0.0.2") == 201


def test_the_tenant_ceiling_counts_only_real_work(widget, settings):
    rates(settings, widget_key="3/min")
    conversation_id, token = widget.conversation()  # 1: a conversation started
    # reads, failed posts and refused starts are not work
    for _ in range(5):
        assert widget.messages(conversation_id, token).status_code == 200
        assert widget.say(conversation_id, token, {"text": ""}).status_code == 400
        assert widget.say(conversation_id, "wrong-token", "hi").status_code == 404
        assert widget.start({"visitor_id": ["not", "a", "string"]}).status_code == 400
    settings.CELERY_TASK_ALWAYS_EAGER = False
    assert widget.say(conversation_id, token, "one").status_code == 202  # 2
    assert start_from(widget, "10.0.0.2") == 201  # 3
    assert start_from(widget, "10.0.0.3") == 429
    refused = widget.say(conversation_id, token, "two")
    assert refused.status_code == 429
    assert (
        not Message.objects.unscoped("test checks the database directly")
        .filter(text="two")
        .exists()
    )
    assert Conversation.objects.unscoped("test checks the database directly").count() == 2


def test_the_default_tenant_ceiling_is_far_above_the_per_address_limits():
    defaults = django_settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]
    per_minute = {scope: WidgetKeyThrottle().parse_rate(rate) for scope, rate in defaults.items()}
    key_count, key_period = per_minute["widget_key"]
    ip_count, ip_period = per_minute["widget_ip"]
    assert key_period == ip_period == 60
    # 50 requests a second of real work (starts + messages) per tenant
    assert key_count >= 3000 and key_count >= 25 * ip_count
