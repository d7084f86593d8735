"""GET /api/v1/conversations/, GET /api/v1/conversations/<id>/,
POST /api/v1/conversations/<id>/messages."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.conversations.models import Conversation, Message
from apps.conversations.services import conversation_create
from apps.escalations.models import Escalation
from apps.escalations.services import escalation_create, escalation_resolve
from tests.api.conftest import add_turn, assert_error, make_conversation_with_turn
from tests.conftest import key_for, session_for
from tests.support.shop import assess

pytestmark = pytest.mark.django_db

LIST_URL = reverse("api-conversation-list")


def detail_url(conversation: Conversation | str) -> str:
    public_id = getattr(conversation, "public_id", conversation)
    return reverse("api-conversation-detail", args=[public_id])


def messages_url(conversation: Conversation | str) -> str:
    public_id = getattr(conversation, "public_id", conversation)
    return reverse("api-conversation-messages", args=[public_id])


# --------------------------------------------------------------------------------------- list


def test_list_items_have_the_documented_fields(viewer_a, data_a):
    response = viewer_a.get(LIST_URL)
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"count", "next", "previous", "results"}
    assert body["count"] == 2
    by_id = {item["id"]: item for item in body["results"]}
    escalated = by_id[str(data_a.conversation.public_id)]
    assert set(escalated) == {
        "id",
        "status",
        "channel",
        "visitor_id",
        "language",
        "created_at",
        "last_message_at",
        "message_count",
        "open_escalation",
        "customer",
    }
    assert escalated["channel"] == "widget"
    assert escalated["customer"] == {
        "id": "",
        "email": "",
        "name": "",
        "verified": False,
        "verified_via": "",
    }
    assert escalated["status"] == "escalated"
    assert escalated["visitor_id"] == "visitor-1"
    assert escalated["open_escalation"] is True
    # user + internal assessment + reply + internal escalation note + visible hand-off
    assert escalated["message_count"] == 5
    quiet = by_id[str(data_a.quiet_conversation.public_id)]
    assert quiet["open_escalation"] is False
    assert quiet["message_count"] == 3


def test_list_is_newest_first(viewer_a, client_a):
    first = conversation_create(client=client_a)[0]
    second = conversation_create(client=client_a)[0]
    Conversation.objects.unscoped("test checks the database directly").filter(pk=first.pk).update(
        created_at=timezone.now() - timedelta(days=1)
    )
    ids = [item["id"] for item in viewer_a.get(LIST_URL).json()["results"]]
    assert ids == [str(second.public_id), str(first.public_id)]


def test_list_filters_by_status(viewer_a, data_a):
    results = viewer_a.get(LIST_URL, {"status": "escalated"}).json()["results"]
    assert [item["id"] for item in results] == [str(data_a.conversation.public_id)]
    results = viewer_a.get(LIST_URL, {"status": "open"}).json()["results"]
    assert [item["id"] for item in results] == [str(data_a.quiet_conversation.public_id)]
    assert viewer_a.get(LIST_URL, {"status": "closed"}).json()["count"] == 0


def test_list_filters_by_creation_day_inclusively(viewer_a, client_a):
    old = conversation_create(client=client_a)[0]
    new = conversation_create(client=client_a)[0]
    Conversation.objects.unscoped("test checks the database directly").filter(pk=old.pk).update(
        created_at=timezone.make_aware(timezone.datetime(2026, 1, 10, 23, 59))
    )
    Conversation.objects.unscoped("test checks the database directly").filter(pk=new.pk).update(
        created_at=timezone.make_aware(timezone.datetime(2026, 1, 11, 0, 0))
    )

    def ids(**params: str) -> set[str]:
        response = viewer_a.get(LIST_URL, params)
        assert response.status_code == 200
        return {item["id"] for item in response.json()["results"]}

    assert ids(created_after="2026-01-11") == {str(new.public_id)}
    assert ids(created_before="2026-01-10") == {str(old.public_id)}
    assert ids(created_after="2026-01-10", created_before="2026-01-10") == {str(old.public_id)}
    assert ids(created_after="2026-01-10", created_before="2026-01-11") == {
        str(old.public_id),
        str(new.public_id),
    }


def test_list_filters_by_has_escalation(viewer_a, data_a, client_a):
    resolved = make_conversation_with_turn(client_a)[0]
    escalation = escalation_create(
        client=client_a, conversation=resolved, reason="policy", notify=False
    )
    escalation_resolve(client=client_a, escalation=escalation)

    escalated = {
        item["id"] for item in viewer_a.get(LIST_URL, {"has_escalation": "true"}).json()["results"]
    }
    assert escalated == {str(data_a.conversation.public_id), str(resolved.public_id)}
    never = viewer_a.get(LIST_URL, {"has_escalation": "false"}).json()["results"]
    assert [item["id"] for item in never] == [str(data_a.quiet_conversation.public_id)]


def test_list_accepts_the_extreme_days(viewer_a, data_a):
    params = {"created_after": "0001-01-01", "created_before": "9999-12-31"}
    assert viewer_a.get(LIST_URL, params).json()["count"] == 2


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"status": "pending"}, "status"),
        ({"created_after": "2026-13-01"}, "created_after"),
        ({"created_after": "yesterday"}, "created_after"),
        ({"created_before": "2026-02-30"}, "created_before"),
        ({"created_before": "01/02/2026"}, "created_before"),
        ({"has_escalation": "maybe"}, "has_escalation"),
        ({"created_after": "2026-02-02", "created_before": "2026-02-01"}, "created_before"),
    ],
)
def test_list_rejects_bad_filters_naming_the_field(viewer_a, data_a, params, field):
    error = assert_error(viewer_a.get(LIST_URL, params), 400, "invalid")
    assert set(error["fields"]) == {field}
    assert error["message"].startswith(f"{field}:")


def test_list_is_paginated(viewer_a, client_a):
    for _ in range(3):
        conversation_create(client=client_a)
    first = viewer_a.get(LIST_URL, {"page_size": 2}).json()
    assert first["count"] == 3
    assert len(first["results"]) == 2
    assert first["previous"] is None
    assert "page=2" in first["next"]
    second = viewer_a.get(first["next"]).json()
    assert len(second["results"]) == 1
    assert second["next"] is None
    seen = {item["id"] for item in first["results"] + second["results"]}
    assert len(seen) == 3
    assert_error(viewer_a.get(LIST_URL, {"page": 9}), 404, "not_found")


@pytest.mark.parametrize("size", [2, 20])
def test_list_query_count_does_not_grow(viewer_a, client_a, size, django_assert_max_num_queries):
    for _ in range(size):
        make_conversation_with_turn(client_a)
    # API-key lookup, last-used update (at most once a minute), count, page.
    with django_assert_max_num_queries(4):
        response = viewer_a.get(LIST_URL)
    assert len(response.json()["results"]) == size


def test_list_query_count_with_a_session_does_not_grow(client_a, django_assert_max_num_queries):
    api = session_for(client_a, "viewer")
    for _ in range(20):
        make_conversation_with_turn(client_a)
    # session, user, membership → client, membership → role, client again, count, page.
    with django_assert_max_num_queries(7):
        assert api.get(LIST_URL).status_code == 200


# ------------------------------------------------------------------------------------- detail


def test_detail_has_all_messages_turns_and_escalations(viewer_a, data_a):
    Conversation.objects.unscoped("test checks the database directly").filter(
        pk=data_a.conversation.pk
    ).update(contact_email="ann@example.com")
    response = viewer_a.get(detail_url(data_a.conversation))
    assert response.status_code == 200
    body = response.json()
    assert body["id"] == str(data_a.conversation.public_id)
    assert body["status"] == "escalated"
    assert body["open_escalation"] is True
    assert body["contact_email"] == "ann@example.com"  # left by the customer in the widget

    messages = body["messages"]
    assert [m["seq"] for m in messages] == [1, 2, 3, 4, 5]
    assert {m["visibility"] for m in messages} == {"visible", "internal"}
    assessment = messages[1]
    assert assessment == {
        "id": assessment["id"],
        "seq": 2,
        "role": "assistant",
        "visibility": "internal",
        "kind": "assessment",
        "text": "Confidence 5/10",
        "data": {"confidence": 5},
        "language": "",  # internal reasoning: no reply language
        "created_at": assessment["created_at"],
    }
    assert [m["kind"] for m in messages[3:]] == ["escalation", "handoff"]

    (turn,) = body["turns"]
    assert turn["id"] == data_a.trace.pk
    assert turn["user_message"] == 1
    assert turn["mode"] == "adaptive"
    assert turn["status"] == "done"
    assert turn["critique_triggered"] is True
    assert turn["critique_reasons"] == ["low_confidence"]
    assert turn["context_fetched"] == ["policies.returns"]
    assert turn["escalated"] is False
    assert (turn["llm_calls"], turn["prompt_tokens"], turn["completion_tokens"]) == (2, 700, 80)
    assert turn["duration_ms"] == 1500
    assert [s["name"] for s in turn["steps"]] == ["assess", "critique"]
    assert turn["steps"][1] == {
        "index": 2,
        "name": "critique",
        "input_summary": "critique input",
        "output": {"step": "critique"},
        "latency_ms": 200,
        "prompt_tokens": 350,
        "completion_tokens": 40,
        "error": "",
    }

    (escalation,) = body["escalations"]
    assert escalation["id"] == str(data_a.escalation.public_id)
    assert escalation["conversation"] == str(data_a.conversation.public_id)
    assert escalation["status"] == "open"


def test_detail_of_a_real_conversation_shows_the_pipelines_trace(owner_b, chat, llm, shop):
    """A turn run by the real pipeline (openai SDK → fake server) reads back in full."""
    llm.script("assess", assess(response="Our returns window is 30 days.", confidence=9))
    chat.say("How long do I have to return something?")
    api = key_for(shop, "viewer")
    body = api.get(detail_url(chat.conversation)).json()
    user_messages = [m for m in body["messages"] if m["role"] == "user"]
    assert [m["text"] for m in user_messages] == ["How long do I have to return something?"]
    assert any(m["visibility"] == "internal" for m in body["messages"])
    assert body["messages"][-1]["text"] == "Our returns window is 30 days."
    (turn,) = body["turns"]
    assert turn["user_message"] == user_messages[0]["seq"]
    assert turn["llm_calls"] == 1
    assert turn["steps"], "each reasoning step is listed"
    assert "assess" in [s["name"] for s in turn["steps"]]
    # another tenant's key does not see it
    assert_error(owner_b.get(detail_url(chat.conversation)), 404)


def test_detail_query_count_does_not_grow_with_the_conversation(
    viewer_a, client_a, django_assert_max_num_queries
):
    small, _ = make_conversation_with_turn(client_a)
    big, _ = make_conversation_with_turn(client_a)
    for n in range(15):  # more turns, steps and messages on the big one
        add_turn(client_a, big, text=f"extra {n}")
    escalation = escalation_create(client=client_a, conversation=big, reason="policy", notify=False)
    escalation_resolve(client=client_a, escalation=escalation)
    escalation_create(client=client_a, conversation=big, reason="policy", notify=False)
    viewer_a.get(LIST_URL)  # the key's last-used write happens once a minute: get it done

    with django_assert_max_num_queries(6) as small_queries:
        small_body = viewer_a.get(detail_url(small)).json()
    with django_assert_max_num_queries(6) as big_queries:
        big_body = viewer_a.get(detail_url(big)).json()
    assert len(big_queries.captured_queries) == len(small_queries.captured_queries)
    assert len(big_body["turns"]) == 16 > len(small_body["turns"])
    assert len(big_body["escalations"]) == 2


@pytest.mark.parametrize(
    "public_id", ["3f2b8c1e-7d4a-4e5b-9c6d-0a1b2c3d4e5f", "not-a-uuid", "123", "%00"]
)
def test_detail_of_an_unknown_or_malformed_id_is_404(viewer_a, data_a, public_id):
    assert_error(viewer_a.get(detail_url(public_id)), 404, "not_found")


# ------------------------------------------------------------------------------- staff reply


def test_staff_reply_with_an_api_key(agent_a, data_a):
    conversation = data_a.quiet_conversation  # the assistant still owns it
    response = agent_a.post(
        messages_url(conversation), {"text": "  Hello from staff  "}, format="json"
    )
    assert response.status_code == 201
    body = response.json()
    assert body["role"] == "staff"
    assert body["visibility"] == "visible"
    assert body["kind"] == "text"
    assert body["text"] == "Hello from staff"
    message = Message.objects.unscoped("test checks the database directly").get(
        public_id=body["id"]
    )
    assert message.author is None
    # replying took ownership: the conversation is escalated, no AI answers over staff
    conversation.refresh_from_db()
    assert conversation.status == "escalated"
    escalation = Escalation.objects.get(conversation=conversation)
    assert escalation.reason == "staff_takeover"
    assert escalation.assigned_to is None


def test_staff_reply_from_a_session_is_authored_and_assigns(client_a, data_a):
    api = session_for(client_a, "agent")
    user = api.staff_user
    response = api.post(messages_url(data_a.conversation), {"text": "On it."}, format="json")
    assert response.status_code == 201
    message = Message.objects.unscoped("test checks the database directly").get(
        public_id=response.json()["id"]
    )
    assert message.author == user
    assert message.data == {"author": user.email}
    data_a.escalation.refresh_from_db()
    assert data_a.escalation.assigned_to == user
    # already escalated: no second escalation
    assert Escalation.objects.filter(conversation=data_a.conversation).count() == 1


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"text": ""}, 400, "invalid"),
        ({"text": "   \n "}, 400, "invalid"),
        ({}, 400, "invalid"),
        ({"text": None}, 400, "invalid"),
        ({"text": ["a"]}, 400, "invalid"),
        ({"text": "x" * 4001}, 413, "too_long"),
        (["text"], 400, "invalid"),
        ("just a string", 400, "invalid"),
    ],
)
def test_staff_reply_validates_text(agent_a, data_a, body, status, code):
    before = Message.objects.unscoped("test checks the database directly").count()
    error = assert_error(
        agent_a.post(messages_url(data_a.conversation), body, format="json"), status, code
    )
    if isinstance(body, dict):
        assert "text" in error["fields"]
    assert Message.objects.unscoped("test checks the database directly").count() == before


def test_staff_reply_accepts_exactly_the_limit(agent_a, data_a):
    response = agent_a.post(messages_url(data_a.conversation), {"text": "x" * 4000}, format="json")
    assert response.status_code == 201


def test_staff_reply_only_accepts_json(agent_a, data_a):
    response = agent_a.post(messages_url(data_a.conversation), {"text": "hi"})  # multipart
    assert_error(response, 415, "unsupported_media_type")


def test_staff_reply_to_an_unknown_conversation_is_404(agent_a, data_a):
    before = Message.objects.unscoped("test checks the database directly").count()
    response = agent_a.post(messages_url(str(uuid.uuid4())), {"text": "hi"}, format="json")
    assert_error(response, 404, "not_found")
    assert Message.objects.unscoped("test checks the database directly").count() == before


def test_a_verified_customer_shows_in_list_and_detail(viewer_a, owner_b, client_a):
    from apps.clients.identity import Identity
    from apps.conversations.services import conversation_customer_verify

    conversation = conversation_create(client=client_a)[0]
    conversation_customer_verify(
        client=client_a,
        conversation=conversation,
        identity=Identity(customer_id="cust-9", email="ann@example.com", name="Ann", via="jwt"),
    )
    expected = {
        "id": "cust-9",
        "email": "ann@example.com",
        "name": "Ann",
        "verified": True,
        "verified_via": "jwt",
    }
    listed = {item["id"]: item for item in viewer_a.get(LIST_URL).json()["results"]}
    assert listed[str(conversation.public_id)]["customer"] == expected
    assert viewer_a.get(detail_url(conversation)).json()["customer"] == expected
    # Tenant B sees neither the conversation nor its customer.
    assert owner_b.get(detail_url(conversation)).status_code == 404
    assert str(conversation.public_id) not in {
        item["id"] for item in owner_b.get(LIST_URL).json()["results"]
    }
