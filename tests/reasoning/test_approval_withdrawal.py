"""A customer's no withdraws a refund waiting for a teammate's approval: real
turns (the openai SDK against the scripted model server, the tool behind the local webhook
server, which must never be called), then the console's and the API's Approve on the withdrawn
request. The rule: a later customer message withdraws every request still waiting unless it is
an explicit yes to it — a no, or anything else, withdraws it."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import close_old_connections
from django.urls import reverse

from apps.accounts.models import Role
from apps.approvals.models import ApprovalRequest, ApprovalStatus, WithdrawnBecause
from apps.approvals.services import approval_approve, approval_run, approvals_expire
from apps.conversations.models import Kind, Message, Visibility
from apps.core.exceptions import ApplicationError
from apps.reasoning.models import ReasoningStep
from apps.reasoning.services import handle_turn
from apps.tools.models import PendingAction, PendingActionStatus, ToolExecution
from tests.api.conftest import assert_error
from tests.conftest import session_for
from tests.factories import UserFactory
from tests.reasoning.test_approvals import (
    add_refund_tool,
    confirmed_refund,
    refund_held_for_a_race,
)
from tests.support.shop import Chat, make_shop

pytestmark = pytest.mark.django_db
ALL = "test checks the database directly"


@pytest.fixture
def shop(db, webhook):
    client = make_shop("standard", webhook.url(), slug="withdraw-shop")
    add_refund_tool(client, webhook.url())
    return client


def held(chat: Chat, llm: Any) -> ApprovalRequest:
    [reply] = confirmed_refund(chat, llm, 150)
    assert "member of our team" in reply.text
    return ApprovalRequest.objects.unscoped(ALL).get(status=ApprovalStatus.PENDING)


def no_model_calls(llm: Any) -> int:
    return len(llm.calls("respond"))


def test_a_customer_no_withdraws_the_request_and_approve_then_does_nothing(
    chat, llm, webhook, django_capture_on_commit_callbacks
):
    approval = held(chat, llm)
    before = no_model_calls(llm)

    [reply] = chat.say("No, don't do it")

    assert no_model_calls(llm) == before  # a fixed reply: no model decides it
    assert "withdrawn your request" in reply.text and "will not be carried out" in reply.text
    assert "member of our team" not in reply.text
    approval.refresh_from_db()
    no = Message.objects.unscoped(ALL).get(conversation=chat.conversation, text="No, don't do it")
    assert approval.status == ApprovalStatus.WITHDRAWN
    assert approval.withdrawn_in == no and approval.withdrawn_at is not None
    assert approval.withdrawn_because == WithdrawnBecause.DECLINED
    assert PendingAction.objects.unscoped(ALL).get().status == PendingActionStatus.EXPIRED
    step = ReasoningStep.objects.unscoped(ALL).get(name="approval_withdrawn")
    assert step.trace_id == approval.trace_id and step.output["seq"] == no.seq
    note = Message.objects.unscoped(ALL).get(data__outcome="withdrawn")
    assert note.visibility == Visibility.INTERNAL and "WITHDRAWN" in note.text

    # a teammate's later Approve does nothing, and says so
    with (
        django_capture_on_commit_callbacks(execute=True),
        pytest.raises(ApplicationError) as refused,
    ):
        approval_approve(client=chat.client, approval=approval, actor=UserFactory())
    assert refused.value.status == 409 and refused.value.code == "approval_withdrawn"
    assert "Withdrawn by the customer" in refused.value.message
    assert f"#{no.seq}" in refused.value.message
    # the executor never runs it: not a redelivered run task, not the sweeper
    assert approval_run(client_id=chat.client.pk, approval_id=approval.pk) is not None
    assert approvals_expire() == 0
    assert webhook.requests == []
    assert not ToolExecution.objects.unscoped(ALL).exists()
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.WITHDRAWN


def test_a_new_request_withdraws_it_and_the_reply_says_so_first(chat, llm, webhook):
    approval = held(chat, llm)
    llm.script("respond", {"response": "We open at 9.", "tool_call": None, "tool_params": {}})

    replies = chat.say("When do you open tomorrow?")

    assert [r.text for r in replies][1] == "We open at 9."
    assert "has been withdrawn" in replies[0].text and "Refund order" in replies[0].text
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.WITHDRAWN
    assert approval.withdrawn_because == WithdrawnBecause.NEW_MESSAGE
    assert webhook.requests == []


def test_an_explicit_yes_keeps_it_waiting(chat, llm, webhook):
    approval = held(chat, llm)
    before = no_model_calls(llm)

    [reply] = chat.say("Yes please")

    assert no_model_calls(llm) == before
    assert "still waiting for a member of our team" in reply.text
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.PENDING
    assert webhook.requests == []


@pytest.mark.parametrize(
    ("language", "text"), [("es", "No, no lo hagas"), ("de", "Nein, bitte nicht")]
)
def test_a_no_in_another_language_withdraws_it(chat, llm, webhook, language, text):
    chat.client.languages = ["en", language]  # the shop answers in both
    chat.client.save(update_fields=["languages"])
    approval = held(chat, llm)

    [reply] = chat.say(text)

    approval.refresh_from_db()
    assert approval.withdrawn_because == WithdrawnBecause.DECLINED
    # A short "no" is no evidence of a language: the conversation stays English
    # (docs/languages.md, "The conversation's language is sticky").
    assert reply.text.startswith("Understood") and reply.language == "en"
    assert webhook.requests == []


def test_a_no_after_a_teammate_already_approved_does_not_promise_otherwise(
    chat, llm, webhook, django_capture_on_commit_callbacks
):
    approval = held(chat, llm)
    # approved, its run queued but not yet done (the worker has not picked it up)
    with django_capture_on_commit_callbacks(execute=False):
        approval_approve(client=chat.client, approval=approval, actor=UserFactory())

    [reply] = chat.say("No, stop")

    assert "already approved" in reply.text and "going ahead" in reply.text
    assert "withdrawn" not in reply.text
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.APPROVED


def test_the_console_and_api_approve_button_after_a_withdrawal(shop, llm, webhook, chat):
    approval = held(chat, llm)
    chat.say("No thanks")
    agent = session_for(shop, Role.AGENT)
    assert_error(
        agent.post(reverse("api-approval-approve", args=[approval.public_id])),
        409,
        "approval_withdrawn",
    )
    detail = agent.get(reverse("api-approval-detail", args=[approval.public_id])).json()
    assert detail["status"] == "withdrawn"
    assert detail["withdrawn_because"] == "declined"
    no = Message.objects.unscoped(ALL).get(conversation=chat.conversation, text="No thanks")
    assert detail["withdrawn_by_message"] == no.seq

    page = agent.post(
        reverse("console-approval-approve", args=[approval.public_id]) + f"?client={shop.slug}",
        follow=True,
    ).content.decode()
    assert "Withdrawn by the customer at" in page and "Nothing was run." in page
    card = agent.get(reverse("console-approvals") + f"?client={shop.slug}").content.decode()
    assert "data-approval-withdrawn" in card and "No thanks" in card
    assert "data-approve" not in card
    assert webhook.requests == []
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.WITHDRAWN


@pytest.mark.django_db(transaction=True)
def test_approve_and_withdraw_at_the_same_time_exactly_one_wins(webhook, llm):
    chat, approval = refund_held_for_a_race(webhook, llm, "withdraw-race")
    client = chat.client
    barrier = threading.Barrier(2)
    approved: list[bool] = []

    def approve() -> None:
        try:
            barrier.wait()
            approval_approve(client=client, approval=approval, actor=UserFactory())
            approved.append(True)
        except ApplicationError:
            approved.append(False)
        finally:
            close_old_connections()

    def withdraw() -> None:
        try:
            barrier.wait()
            # only the message is stored here (the withdrawal is part of it); no turn runs
            handle_turn(client=client, conversation=chat.conversation, text="No, don't")
        finally:
            close_old_connections()

    threads = [threading.Thread(target=approve), threading.Thread(target=withdraw)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)

    approval.refresh_from_db()
    assert len(approved) == 1
    if approved[0]:
        assert approval.status == ApprovalStatus.APPROVED and approval.withdrawn_at is None
    else:
        assert approval.status == ApprovalStatus.WITHDRAWN and approval.decided_at is None
        assert webhook.requests == []
    # exactly one of the two left its mark
    marks = Message.objects.unscoped(ALL).filter(
        kind=Kind.GUARD, data__approval=str(approval.public_id)
    )
    texts = [m.text for m in marks]
    assert sum(t.startswith(("APPROVED", "WITHDRAWN")) for t in texts) == 1
