"""GET /api/v1/escalations/ and POST /api/v1/escalations/<id>/resolve."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.conversations.models import Message
from apps.escalations.models import Escalation
from apps.escalations.services import escalation_create, escalation_resolve
from tests.api.conftest import assert_error, escalate_turns, make_conversation_with_turn
from tests.conftest import session_for

pytestmark = pytest.mark.django_db

LIST_URL = reverse("api-escalation-list")


def resolve_url(escalation_id: int | str) -> str:
    return reverse("api-escalation-resolve", args=[escalation_id])


def test_list_items_have_the_documented_fields(viewer_a, data_a):
    response = viewer_a.get(LIST_URL)
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 1
    (item,) = body["results"]
    assert item == {
        "id": str(data_a.escalation.public_id),
        "conversation": str(data_a.conversation.public_id),
        "reason": "customer_request",
        "status": "open",
        "detail": "asked",
        "created_at": item["created_at"],
        "resolved_at": None,
        "assigned_to": None,
    }


def test_list_shows_the_assignee_and_filters_by_status(client_a, viewer_a, data_a):
    agent = session_for(client_a, "agent")
    agent.post(
        reverse("api-conversation-messages", args=[data_a.conversation.public_id]),
        {"text": "Taking this one."},
        format="json",
    )
    other, _ = make_conversation_with_turn(client_a)
    resolved = escalation_create(client=client_a, conversation=other, reason="policy", notify=False)
    escalation_resolve(client=client_a, escalation=resolved)

    open_items = viewer_a.get(LIST_URL, {"status": "open"}).json()["results"]
    assert [i["id"] for i in open_items] == [str(data_a.escalation.public_id)]
    assert open_items[0]["assigned_to"] == agent.staff_user.email
    resolved_items = viewer_a.get(LIST_URL, {"status": "resolved"}).json()["results"]
    assert [i["id"] for i in resolved_items] == [str(resolved.public_id)]
    assert resolved_items[0]["resolved_at"] is not None
    all_ids = [i["id"] for i in viewer_a.get(LIST_URL).json()["results"]]
    assert all_ids == [str(resolved.public_id), str(data_a.escalation.public_id)]  # newest first


@pytest.mark.parametrize("value", ["pending", "OPEN", ""])
def test_list_rejects_a_bad_status(viewer_a, data_a, value):
    response = viewer_a.get(LIST_URL, {"status": value})
    if value == "":
        assert response.status_code == 200  # an empty filter is no filter
        return
    error = assert_error(response, 400, "invalid")
    assert set(error["fields"]) == {"status"}


def test_list_query_count_does_not_grow(viewer_a, client_a, django_assert_max_num_queries):
    escalate_turns(client_a, 2)
    viewer_a.get(LIST_URL)
    with django_assert_max_num_queries(3) as few:
        viewer_a.get(LIST_URL)
    escalate_turns(client_a, 18)
    with django_assert_max_num_queries(3) as many:
        assert len(viewer_a.get(LIST_URL).json()["results"]) == 20
    assert len(few.captured_queries) == len(many.captured_queries)


def test_resolve_hands_the_conversation_back(agent_a, data_a):
    response = agent_a.post(resolve_url(data_a.escalation.public_id))
    assert response.status_code == 200
    body = response.json()
    assert body["id"] == str(data_a.escalation.public_id)
    assert body["status"] == "resolved"
    assert body["resolved_at"] is not None
    data_a.conversation.refresh_from_db()
    assert data_a.conversation.status == "open"
    notice = Message.objects.filter(conversation=data_a.conversation).order_by("-seq").first()
    assert notice.kind == "notice"
    assert notice.data["resolved"] is True


def test_resolve_by_a_session_records_who(client_a, data_a):
    api = session_for(client_a, "agent")
    assert api.post(resolve_url(data_a.escalation.public_id)).status_code == 200
    data_a.escalation.refresh_from_db()
    assert data_a.escalation.resolved_by == api.staff_user


def test_resolving_twice_is_idempotent(agent_a, data_a):
    first = agent_a.post(resolve_url(data_a.escalation.public_id)).json()
    messages_after_first = Message.objects.filter(conversation=data_a.conversation).count()
    second = agent_a.post(resolve_url(data_a.escalation.public_id))
    assert second.status_code == 200
    assert second.json() == first
    assert Message.objects.filter(conversation=data_a.conversation).count() == messages_after_first


@pytest.mark.parametrize("escalation_id", ["999999", "abc", "0", "-1", "9" * 30, "1.5"])
def test_resolve_unknown_or_malformed_id_is_404(agent_a, data_a, escalation_id):
    assert_error(agent_a.post(resolve_url(escalation_id)), 404, "not_found")
    data_a.escalation.refresh_from_db()
    assert data_a.escalation.status == "open"


def test_resolve_ignores_a_body(agent_a, data_a):
    response = agent_a.post(
        resolve_url(data_a.escalation.public_id), {"status": "open", "client": 999}, format="json"
    )
    assert response.status_code == 200
    assert (
        Escalation.objects.unscoped("test checks the database directly")
        .get(pk=data_a.escalation.pk)
        .status
        == "resolved"
    )
