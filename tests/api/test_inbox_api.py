"""The inbox API per conversation: take over, assign / claim, hand back (with or without
answering the customer's waiting message) and staff notes — their effects, their roles, and
another client's credentials answering 404 with nothing changed."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from apps.accounts.models import Role
from apps.conversations.models import Conversation, ConversationStatus, Kind, Message, Visibility
from apps.conversations.models import Role as MessageRole
from apps.conversations.services import message_append
from apps.escalations.models import Escalation, EscalationReason, EscalationStatus
from apps.reasoning.models import ReasoningTrace, TraceStatus
from tests.api.conftest import TenantData, assert_error
from tests.conftest import key_for, session_for
from tests.factories import MembershipFactory
from tests.support.messages import internal_message

pytestmark = pytest.mark.django_db


def url(name: str, conversation: Conversation) -> str:
    return reverse(f"api-conversation-{name}", args=[conversation.public_id])


def state(conversation: Conversation) -> tuple[Any, ...]:
    conversation.refresh_from_db()
    return (
        conversation.status,
        conversation.assignee_id,
        conversation.last_seq,
        list(
            Escalation.objects.filter(conversation=conversation).values_list(
                "status", "assigned_to"
            )
        ),
    )


# --------------------------------------------------------------------------- take over


def test_takeover_silences_the_assistant_and_tells_the_customer(client_a, data_a):
    quiet = data_a.quiet_conversation
    agent = session_for(client_a, Role.AGENT)
    response = agent.post(url("takeover", quiet), format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "escalated"
    assert body["assignee"] == agent.staff_user.email
    assert body["open_escalation"]["reason"] == "staff_takeover"
    quiet.refresh_from_db()
    assert quiet.status == ConversationStatus.ESCALATED and not quiet.ai_may_reply
    joined = Message.objects.filter(conversation=quiet, kind=Kind.HANDOFF).get()
    assert joined.visibility == Visibility.VISIBLE
    assert joined.text == "A member of our team has joined the conversation."


def test_takeover_twice_is_one_hand_off_and_the_second_caller_claims_it(client_a, data_a):
    quiet = data_a.quiet_conversation
    first, second = session_for(client_a, Role.AGENT), session_for(client_a, Role.ADMIN)
    first.post(url("takeover", quiet), format="json")
    body = second.post(url("takeover", quiet), format="json").json()
    assert body["assignee"] == second.staff_user.email
    assert Escalation.objects.filter(conversation=quiet).count() == 1
    assert Message.objects.filter(conversation=quiet, kind=Kind.HANDOFF).count() == 1
    assert Escalation.objects.get(conversation=quiet).assigned_to == second.staff_user


def test_takeover_by_api_key_escalates_with_nobody_assigned(client_a, data_a):
    body = key_for(client_a, Role.AGENT).post(url("takeover", data_a.quiet_conversation)).json()
    assert body["status"] == "escalated" and body["assignee"] is None


def test_the_joined_message_is_in_the_customers_language(client_a, data_a):
    quiet = data_a.quiet_conversation
    Conversation.objects.for_client(client_a).filter(pk=quiet.pk).update(language="es")
    session_for(client_a, Role.AGENT).post(url("takeover", quiet))
    joined = Message.objects.get(conversation=quiet, kind=Kind.HANDOFF)
    assert joined.text != "A member of our team has joined the conversation."
    assert "equipo" in joined.text


# --------------------------------------------------------------------------- assign / claim


def test_assign_to_a_teammate_and_unassign(client_a, data_a):
    conv = data_a.conversation  # escalated by the fixture
    teammate = MembershipFactory(client=client_a, role=Role.AGENT).user
    agent = session_for(client_a, Role.AGENT)
    body = agent.post(url("assign", conv), {"assignee": teammate.email}, format="json").json()
    assert body["assignee"] == teammate.email
    assert (
        Escalation.objects.for_client(client_a).get(pk=data_a.escalation.pk).assigned_to == teammate
    )
    note = Message.objects.filter(conversation=conv).order_by("-seq").first()
    assert note.visibility == Visibility.INTERNAL and teammate.email in note.text
    body = agent.post(url("assign", conv), {"assignee": None}, format="json").json()
    assert body["assignee"] is None
    conv.refresh_from_db()
    assert conv.assignee is None


def test_claim_is_assigning_yourself(client_a, data_a):
    agent = session_for(client_a, Role.AGENT)
    body = agent.post(
        url("assign", data_a.conversation), {"assignee": agent.staff_user.email}, format="json"
    ).json()
    assert body["assignee"] == agent.staff_user.email
    assert "Claimed by" in Message.objects.filter(conversation=data_a.conversation).last().text


def test_assigning_does_not_take_over_an_assistant_conversation(client_a, data_a):
    quiet = data_a.quiet_conversation
    agent = session_for(client_a, Role.AGENT)
    body = agent.post(
        url("assign", quiet), {"assignee": agent.staff_user.email}, format="json"
    ).json()
    assert body["status"] == "open" and body["assignee"] == agent.staff_user.email
    assert not Message.objects.filter(conversation=quiet, kind=Kind.HANDOFF).exists()


@pytest.mark.parametrize("who", ["viewer", "other client's agent", "nobody"])
def test_only_this_clients_agents_can_be_assigned(client_a, client_b, data_a, who):
    if who == "viewer":
        email = MembershipFactory(client=client_a, role=Role.VIEWER).user.email
    elif who == "other client's agent":
        email = MembershipFactory(client=client_b, role=Role.AGENT).user.email
    else:
        email = "nobody@example.com"
    before = state(data_a.conversation)
    response = session_for(client_a, Role.AGENT).post(
        url("assign", data_a.conversation), {"assignee": email}, format="json"
    )
    assert_error(response, 400)
    assert "assignee" in response.content.decode()
    assert state(data_a.conversation) == before


# --------------------------------------------------------------------------- hand back


def _waiting_message(data: TenantData) -> Message:
    """The customer writes while a person owns the conversation: stored, its turn skipped."""
    message = message_append(
        client=data.client,
        conversation=data.conversation,
        role=MessageRole.USER,
        text="Yes please, order TH-10042",
    )
    ReasoningTrace.objects.create(
        client=data.client,
        conversation=data.conversation,
        user_message=message,
        mode="adaptive",
        status=TraceStatus.SKIPPED,
    )
    return message


def test_hand_back_answers_the_waiting_message(
    client_a, data_a, django_capture_on_commit_callbacks
):
    waiting = _waiting_message(data_a)
    agent = session_for(client_a, Role.AGENT)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = agent.post(url("handback", data_a.conversation), {}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "open" and body["open_escalation"] is None
    assert body["assignee"] is None
    # The skipped turn is dropped so the normal path runs the message again (queued on commit).
    assert not ReasoningTrace.objects.filter(user_message=waiting).exists()
    assert len(callbacks) >= 1
    assert (
        Escalation.objects.for_client(client_a).get(pk=data_a.escalation.pk).status
        == EscalationStatus.RESOLVED
    )


def test_hand_back_without_answering_leaves_the_message_alone(
    client_a, data_a, django_capture_on_commit_callbacks
):
    waiting = _waiting_message(data_a)
    with django_capture_on_commit_callbacks(execute=False):
        body = (
            session_for(client_a, Role.AGENT)
            .post(url("handback", data_a.conversation), {"answer_waiting": False}, format="json")
            .json()
        )
    assert body["status"] == "open"
    trace = ReasoningTrace.objects.get(user_message=waiting)
    assert trace.status == TraceStatus.SKIPPED  # nothing queued: no turn will answer it


def test_hand_back_of_an_assistant_conversation_changes_nothing(client_a, data_a):
    quiet = data_a.quiet_conversation
    before = state(quiet)
    response = session_for(client_a, Role.AGENT).post(url("handback", quiet), {}, format="json")
    assert response.status_code == 200 and response.json()["status"] == "open"
    assert state(quiet) == before


def test_hand_back_rejects_a_non_boolean(client_a, data_a):
    response = session_for(client_a, Role.AGENT).post(
        url("handback", data_a.conversation), {"answer_waiting": "perhaps"}, format="json"
    )
    assert_error(response, 400)
    assert (
        Conversation.objects.for_client(client_a).get(pk=data_a.conversation.pk).status
        == "escalated"
    )


# --------------------------------------------------------------------------- notes


def test_a_note_is_internal_listed_and_never_shown_to_the_customer(client_a, data_a):
    agent = session_for(client_a, Role.AGENT)
    conv = data_a.quiet_conversation
    response = agent.post(url("notes", conv), {"text": "  VIP — be gentle  "}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["text"] == "VIP — be gentle"
    assert response.json()["author"] == agent.staff_user.email
    note = Message.objects.get(conversation=conv, kind=Kind.STAFF_NOTE)
    assert note.visibility == Visibility.INTERNAL and note.role == MessageRole.STAFF
    conv.refresh_from_db()
    assert conv.status == ConversationStatus.OPEN  # a note is no takeover
    # What the widget lists is the visible messages only.
    widget_texts = list(
        Message.objects.visible().filter(conversation=conv).values_list("text", flat=True)
    )
    assert "VIP — be gentle" not in widget_texts
    listed = session_for(client_a, Role.VIEWER).get(url("notes", conv)).json()
    assert [n["text"] for n in listed["results"]] == ["VIP — be gentle"]


@pytest.mark.parametrize("text", ["", "   ", "x" * 4001])
def test_an_empty_or_huge_note_is_refused(client_a, data_a, text):
    response = session_for(client_a, Role.AGENT).post(
        url("notes", data_a.conversation), {"text": text}, format="json"
    )
    assert_error(response, 400)
    assert not Message.objects.for_client(client_a).filter(kind=Kind.STAFF_NOTE).exists()


# --------------------------------------------------------------------------- roles, tenants

WRITES = [
    ("takeover", None),
    ("assign", {"assignee": None}),
    ("handback", {}),
    ("notes", {"text": "note"}),
]


@pytest.mark.parametrize("kind", ["api_key", "session"])
@pytest.mark.parametrize(("name", "body"), WRITES)
def test_a_viewer_cannot_take_over_assign_hand_back_or_note(client_a, data_a, kind, name, body):
    viewer = (
        key_for(client_a, Role.VIEWER) if kind == "api_key" else session_for(client_a, Role.VIEWER)
    )
    for conv in (data_a.conversation, data_a.quiet_conversation):
        before = state(conv)
        assert_error(viewer.post(url(name, conv), body, format="json"), 403)
        assert state(conv) == before


@pytest.mark.parametrize("kind", ["api_key", "session"])
@pytest.mark.parametrize(("name", "body"), [*WRITES, ("notes-get", None)])
def test_another_client_cannot_touch_the_conversation(client_a, client_b, data_a, kind, name, body):
    b_owner = (
        key_for(client_b, Role.OWNER) if kind == "api_key" else session_for(client_b, Role.OWNER)
    )
    internal_message(
        data_a.conversation, Kind.STAFF_NOTE, "A's secret note", role=MessageRole.STAFF
    )
    for conv in (data_a.conversation, data_a.quiet_conversation):
        before = state(conv)
        if name == "notes-get":
            response = b_owner.get(url("notes", conv))
        else:
            response = b_owner.post(url(name, conv), body, format="json")
        assert_error(response, 404)
        assert "secret" not in response.content.decode()
        assert state(conv) == before


def test_another_clients_staff_cannot_be_assigned_by_email_of_a_member(client_a, client_b, data_b):
    """B's agent assigning B's conversation to A's teammate: refused, as an unknown address."""
    a_member = MembershipFactory(client=client_a, role=Role.OWNER).user
    response = session_for(client_b, Role.AGENT).post(
        url("assign", data_b.conversation), {"assignee": a_member.email}, format="json"
    )
    assert_error(response, 400)
    assert Conversation.objects.for_client(client_b).get(pk=data_b.conversation.pk).assignee is None
    assert EscalationReason.STAFF_TAKEOVER  # the enum the takeover writes exists


@pytest.mark.parametrize(
    ("name", "body"),
    [("handback", {"answer_wating": False}), ("assign", {"assignee": None, "x": 1e-400})],
)
def test_an_unknown_field_is_refused_not_ignored(client_a, data_a, name, body):
    before = state(data_a.conversation)
    response = session_for(client_a, Role.AGENT).post(
        url(name, data_a.conversation), body, format="json"
    )
    assert_error(response, 400)
    assert "Unknown field." in response.content.decode()
    assert state(data_a.conversation) == before
