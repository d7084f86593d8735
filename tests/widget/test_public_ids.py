"""Public ids are opaque: the widget's message JSON and `escalation_id` used to be
the database's global counters (a new conversation's first message came back as `"id": 17`,
telling anyone how many messages every tenant had). Now every id the widget — and the staff API
for the same records — shows is a UUID; `seq` numbers a conversation's messages."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.urls import reverse

from apps.accounts.models import Role
from apps.accounts.services import api_key_issue
from apps.conversations.models import Conversation, Message
from apps.conversations.services import conversation_create, message_append
from apps.escalations.models import Escalation
from apps.escalations.services import escalation_create, escalation_resolve
from tests.conftest import api_for
from tests.factories import ClientFactory
from tests.support.shop import assess

pytestmark = pytest.mark.django_db


def is_uuid(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        return str(uuid.UUID(value)) == value
    except ValueError:
        return False


def busy_other_tenant() -> None:
    """Another tenant with messages and escalations, so global counters would be well above 1."""
    other = ClientFactory(slug="busy-other")
    for _ in range(3):
        conversation, _ = conversation_create(client=other)
        message_append(client=other, conversation=conversation, role="user", text="hi")
        escalation_create(
            client=other, conversation=conversation, reason="customer_request", notify=False
        )


def test_message_ids_in_the_widget_are_opaque(
    widget: Any, llm: Any, django_capture_on_commit_callbacks: Any
) -> None:
    busy_other_tenant()
    llm.script("assess", assess(response="We're open 8 to 6.", confidence=9))
    conversation_id, token = widget.conversation()
    with django_capture_on_commit_callbacks(execute=True):  # the turn task
        message = widget.say(conversation_id, token, "When are you open?").json()["message"]
    assert is_uuid(message["id"]), message
    assert message["seq"] == 1  # seq: per conversation
    stored = Message.objects.unscoped("test checks the database directly").get(
        public_id=message["id"]
    )
    assert stored.conversation.public_id == uuid.UUID(conversation_id)
    listed = widget.messages(conversation_id, token).json()["results"]
    assert [m["text"] for m in listed] == ["When are you open?", "We're open 8 to 6."]
    assert listed[0]["id"] == message["id"]
    assert all(is_uuid(m["id"]) for m in listed)
    assert len({m["id"] for m in listed}) == 2


@pytest.mark.django_db(transaction=True)
def test_escalation_ids_in_the_widget_are_opaque(widget: Any, llm: Any) -> None:
    busy_other_tenant()
    conversation_id, token = widget.conversation()
    body = widget.say(conversation_id, token, "I want to talk to a human").json()
    [handoff] = body["replies"]
    escalation = Escalation.objects.unscoped("test checks the database directly").get(
        conversation__public_id=conversation_id
    )
    assert handoff["data"]["escalation_id"] == str(escalation.public_id)
    assert is_uuid(handoff["data"]["escalation_id"])

    escalation_resolve(client=widget.client, escalation=escalation, actor=None)
    listed = widget.messages(conversation_id, token).json()["results"]
    notice = listed[-1]
    assert notice["data"] == {"escalation_id": str(escalation.public_id), "resolved": True}
    assert all(is_uuid(m["id"]) for m in listed)


def test_the_staff_api_shows_the_same_opaque_ids(widget: Any) -> None:
    client = widget.client
    busy_other_tenant()
    conversation, _ = conversation_create(client=client)
    first = message_append(client=client, conversation=conversation, role="user", text="hi")
    escalation = escalation_create(
        client=client, conversation=conversation, reason="customer_request", notify=False
    )
    api = api_for(api_key_issue(client=client, name="agent", role=Role.AGENT)[1])

    detail = api.get(f"/api/v1/conversations/{conversation.public_id}/").json()
    assert detail["messages"][0]["id"] == str(first.public_id)
    assert all(is_uuid(m["id"]) for m in detail["messages"])
    assert detail["escalations"][0]["id"] == str(escalation.public_id)
    listed = api.get("/api/v1/escalations/").json()["results"]
    assert [e["id"] for e in listed] == [str(escalation.public_id)]

    # the database id is no longer an address; the public one is
    by_pk = api.post(reverse("api-escalation-resolve", args=[escalation.pk]))
    assert by_pk.status_code == 404
    resolved = api.post(reverse("api-escalation-resolve", args=[escalation.public_id]))
    assert resolved.status_code == 200, resolved.content
    assert resolved.json()["id"] == str(escalation.public_id)


def test_another_tenants_escalation_id_is_a_404(widget: Any) -> None:
    other = ClientFactory(slug="other-one")
    conversation, _ = conversation_create(client=other)
    escalation = escalation_create(
        client=other, conversation=conversation, reason="customer_request", notify=False
    )
    api = api_for(api_key_issue(client=widget.client, name="owner", role=Role.OWNER)[1])
    response = api.post(reverse("api-escalation-resolve", args=[escalation.public_id]))
    assert response.status_code == 404
    assert (
        Escalation.objects.unscoped("test checks the database directly")
        .get(pk=escalation.pk)
        .status
        == "open"
    )
    assert (
        Conversation.objects.unscoped("test checks the database directly")
        .get(pk=conversation.pk)
        .status
        == "escalated"
    )
