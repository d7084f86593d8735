"""Hand-back answers what the customer wrote while waiting for a person:
the latest unanswered message of the hand-off gets one turn through the normal turn path, with
the earlier unanswered ones in its history; nothing is queued when nothing is unanswered."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.conversations.models import Message
from apps.escalations.models import Escalation
from apps.escalations.services import staff_reply
from apps.reasoning.handback import escalation_hand_back
from apps.reasoning.models import ReasoningTrace
from tests.conftest import session_for
from tests.factories import MembershipFactory
from tests.support.shop import make_shop, script_order_lookup

pytestmark = pytest.mark.django_db


def test_message_written_during_the_handoff_is_answered_after_hand_back(
    chat, llm, webhook, django_capture_on_commit_callbacks
):
    chat.say("Can I talk to a real person?")
    assert chat.say("Is anyone there?") == []
    assert chat.say("Yes please, order TH-10042") == []
    assert llm.requests == []  # a person owned the conversation: no model ran

    script_order_lookup(llm, webhook, "TH-10042")
    agent = session_for(chat.client, "agent")
    escalation = Escalation.objects.unscoped("test checks the database directly").get()
    with django_capture_on_commit_callbacks(execute=True):
        response = agent.post(reverse("api-escalation-resolve", args=[escalation.public_id]))
    assert response.status_code == 200

    replies = [m.text for m in chat.all(role="assistant", visibility="visible")]
    assert replies == ["Order TH-10042 has shipped."]
    assert [r.step for r in llm.requests] == ["assess", "compose"]
    # one turn, for the latest message; the earlier unanswered one is in its history
    prompt = llm.requests[0].prompt_text
    assert "Yes please, order TH-10042" in prompt
    assert "Is anyone there?" in prompt
    answered = ReasoningTrace.objects.unscoped("test checks the database directly").get(
        user_message__text="Yes please, order TH-10042"
    )
    assert answered.status == "done"
    earlier = ReasoningTrace.objects.unscoped("test checks the database directly").get(
        user_message__text="Is anyone there?"
    )
    assert earlier.status == "skipped"
    assert webhook.requests[0].json["params"] == {"order_id": "TH-10042"}


def test_console_hand_back_answers_the_waiting_message(
    chat, llm, webhook, client, django_capture_on_commit_callbacks
):
    chat.say("I want a human")
    chat.say("Yes please, order TH-10042")
    script_order_lookup(llm, webhook, "TH-10042")
    member = MembershipFactory(client=chat.client, role="agent")
    client.force_login(member.user)
    url = reverse("console-conversation-resolve", args=[chat.conversation.public_id])
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url)
    assert response.status_code == 302
    assert [m.text for m in chat.all(role="assistant", visibility="visible")] == [
        "Order TH-10042 has shipped."
    ]


def test_hand_back_with_nothing_unanswered_queues_nothing(
    chat, llm, django_capture_on_commit_callbacks
):
    chat.say("Can I talk to a real person?")  # the request itself was answered by the hand-off
    traces = list(
        ReasoningTrace.objects.unscoped("test checks the database directly").values_list(
            "pk", "status"
        )
    )
    with django_capture_on_commit_callbacks(execute=True):
        escalation_hand_back(
            client=chat.client,
            escalation=Escalation.objects.unscoped("test checks the database directly").get(),
        )
    assert llm.requests == []
    assert (
        list(
            ReasoningTrace.objects.unscoped("test checks the database directly").values_list(
                "pk", "status"
            )
        )
        == traces
    )
    assert chat.all(role="assistant", visibility="visible") == []
    chat.conversation.refresh_from_db()
    assert chat.conversation.status == "open"


def test_staff_reply_after_the_message_means_nothing_is_queued(
    chat, llm, django_capture_on_commit_callbacks
):
    chat.say("Can I talk to a real person?")
    chat.say("Yes please, order TH-10042")
    with django_capture_on_commit_callbacks(execute=True):
        staff_reply(client=chat.client, conversation=chat.conversation, text="Done: it shipped.")
        escalation_hand_back(
            client=chat.client,
            escalation=Escalation.objects.unscoped("test checks the database directly").get(),
        )
    assert llm.requests == []
    assert chat.all(role="assistant", visibility="visible") == []
    trace = ReasoningTrace.objects.unscoped("test checks the database directly").get(
        user_message__text="Yes please, order TH-10042"
    )
    assert trace.status == "skipped"


def test_hand_back_twice_queues_one_turn(chat, llm, webhook, django_capture_on_commit_callbacks):
    chat.say("Can I talk to a real person?")
    chat.say("Yes please, order TH-10042")
    script_order_lookup(llm, webhook, "TH-10042")
    escalation = Escalation.objects.unscoped("test checks the database directly").get()
    with django_capture_on_commit_callbacks(execute=True):
        escalation_hand_back(client=chat.client, escalation=escalation)
        escalation_hand_back(client=chat.client, escalation=escalation)
    assert len(chat.all(role="assistant", visibility="visible")) == 1
    assert len(llm.requests) == 2


def test_hand_back_is_scoped_to_the_tenant(chat, llm, webhook):
    other = make_shop("adaptive", webhook.url(), slug="other-shop")
    chat.say("Can I talk to a real person?")
    chat.say("Yes please, order TH-10042")
    escalation = Escalation.objects.unscoped("test checks the database directly").get()
    with pytest.raises(Escalation.DoesNotExist):
        escalation_hand_back(client=other, escalation=escalation)
    escalation.refresh_from_db()
    assert escalation.status == "open"
    assert llm.requests == []
    assert (
        Message.objects.filter(
            conversation=chat.conversation, role="assistant", visibility="visible"
        ).count()
        == 0
    )
