"""Client B cannot see or change client A's conversations, escalations, tools, tool runs or
keys: another tenant's object answers 404 exactly like a missing one, and nothing changes."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.urls import reverse

from apps.accounts.models import ApiKey, Role
from apps.accounts.services import api_key_issue
from apps.conversations.models import Conversation, Message
from apps.escalations.models import Escalation
from apps.tools.models import ClientTool
from tests.api.conftest import TenantData, assert_error
from tests.factories import ClientToolFactory

pytestmark = pytest.mark.django_db


def snapshot_of_a(data: TenantData) -> dict[str, Any]:
    client = data.client
    return {
        "conversations": _rows(Conversation, client, "status", "last_seq"),
        "messages": _rows(Message, client, "text"),
        "escalations": _rows(Escalation, client, "status", "resolved_at", "assigned_to"),
        "tools": _rows(ClientTool, client, "enabled", "description"),
        "keys": _rows(ApiKey, client, "revoked_at"),
    }


def _rows(model: Any, client: Any, *fields: str) -> list[Any]:
    """The client's rows of `model`, as (pk, *fields)."""
    return list(model.objects.filter(client=client).order_by("pk").values_list("pk", *fields))


def test_b_cannot_read_as_conversation(b_owner, data_a, data_b):
    a_url = reverse("api-conversation-detail", args=[data_a.conversation.public_id])
    missing_url = reverse("api-conversation-detail", args=[uuid.uuid4()])
    a_response = b_owner.get(a_url)
    missing_response = b_owner.get(missing_url)
    assert_error(a_response, 404, "not_found")
    assert a_response.json() == missing_response.json()
    # and can read its own
    own = reverse("api-conversation-detail", args=[data_b.conversation.public_id])
    assert b_owner.get(own).status_code == 200


def test_b_cannot_reply_in_as_conversation(b_owner, data_a, data_b):
    before = snapshot_of_a(data_a)
    url = reverse("api-conversation-messages", args=[data_a.quiet_conversation.public_id])
    assert_error(b_owner.post(url, {"text": "hijack"}, format="json"), 404, "not_found")
    assert snapshot_of_a(data_a) == before
    assert (
        not Message.objects.unscoped("test checks the database directly")
        .filter(text="hijack")
        .exists()
    )


def test_b_cannot_resolve_as_escalation(b_owner, data_a, data_b):
    before = snapshot_of_a(data_a)
    url = reverse("api-escalation-resolve", args=[data_a.escalation.public_id])
    assert_error(b_owner.post(url), 404, "not_found")
    assert snapshot_of_a(data_a) == before
    data_a.escalation.refresh_from_db()
    assert data_a.escalation.status == "open"


def test_b_cannot_change_as_tool(b_owner, data_a, data_b):
    ClientToolFactory(client=data_a.client, name="only_a_has_this")
    before = snapshot_of_a(data_a)
    url = reverse("api-tool-detail", args=["only_a_has_this"])
    body = {"enabled": False, "description": "pwned"}
    assert_error(b_owner.patch(url, body, format="json"), 404, "not_found")
    assert snapshot_of_a(data_a) == before


def test_b_changing_a_tool_of_the_same_name_changes_only_bs(b_owner, data_a, data_b):
    before = snapshot_of_a(data_a)
    url = reverse("api-tool-detail", args=[data_b.tool.name])
    assert data_a.tool.name == data_b.tool.name
    assert b_owner.patch(url, {"enabled": False}, format="json").status_code == 200
    assert snapshot_of_a(data_a) == before
    data_b.tool.refresh_from_db()
    assert data_b.tool.enabled is False


def test_b_cannot_revoke_as_key(b_owner, data_a, data_b):
    a_key, _ = api_key_issue(client=data_a.client, name="a's", role=Role.VIEWER)
    before = snapshot_of_a(data_a)
    assert_error(b_owner.post(reverse("api-key-revoke", args=[a_key.pk])), 404, "not_found")
    assert snapshot_of_a(data_a) == before
    a_key.refresh_from_db()
    assert a_key.revoked_at is None


@pytest.mark.parametrize(
    ("url_name", "a_marker"),
    [
        ("api-conversation-list", lambda d: str(d.conversation.public_id)),
        ("api-escalation-list", lambda d: str(d.conversation.public_id)),
        ("api-tool-execution-list", lambda d: d.execution.idempotency_key),
        ("api-key-list", lambda d: d.client.key_prefix),
    ],
)
def test_bs_lists_hold_nothing_of_as(b_owner, data_a, data_b, url_name, a_marker):
    data_a.client.key_prefix = api_key_issue(client=data_a.client, name="a")[0].prefix
    api_key_issue(client=data_b.client, name="b")
    response = b_owner.get(reverse(url_name))
    assert response.status_code == 200
    assert response.json()["count"] >= 1  # B's own objects are there
    assert a_marker(data_a) not in response.content.decode()
    # ?client= cannot switch tenants: a key ignores it, a session with no membership in A gets
    # nothing at all
    switched = b_owner.get(reverse(url_name), {"client": data_a.client.slug})
    if switched.status_code == 200:
        assert switched.content == response.content
    else:
        assert_error(switched, 403, "permission_denied")


def test_bs_tool_list_holds_only_bs_tools(b_owner, data_a, data_b):
    ClientToolFactory(client=data_a.client, name="only_a_has_this")
    names = [t["name"] for t in b_owner.get(reverse("api-tool-list")).json()["results"]]
    assert names == [data_b.tool.name]
