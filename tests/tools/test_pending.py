"""The pending-action service (apps/tools/pending.py): the one place PendingAction rows are
written. The rule that decides an answer is passed in, so these tests use small rules of their
own alongside the real one."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from apps.conversations.models import Role
from apps.conversations.services import conversation_create, message_append
from apps.reasoning.guards import confirmation_decision
from apps.tools.models import PendingAction, PendingActionStatus, ToolKind
from apps.tools.pending import (
    OpenQuestion,
    params_hash,
    pending_create,
    pending_expire_open,
    pending_expired_by_answer,
    pending_mark_executed,
    pending_mark_shown,
    pending_resolve,
)
from apps.tools.selectors import pending_declined_by
from tests.factories import ClientToolFactory

pytestmark = pytest.mark.django_db

ORDER = {"order_id": "#W1001"}


@pytest.fixture
def setup(client_a) -> dict[str, Any]:
    conversation = conversation_create(client=client_a)[0]
    tool = ClientToolFactory(client=client_a, name="cancel_order", kind=ToolKind.DESTRUCTIVE)
    return {"client": client_a, "conversation": conversation, "tool": tool}


def say(setup: dict[str, Any], text: str, role: str = Role.USER) -> Any:
    return message_append(
        client=setup["client"], conversation=setup["conversation"], role=role, text=text
    )


def ask(setup: dict[str, Any], params: dict[str, Any] = ORDER) -> PendingAction:
    proposed_in = say(setup, "cancel it")
    pending = pending_create(
        client=setup["client"],
        conversation=setup["conversation"],
        tool=setup["tool"],
        params=params,
        proposed_in=proposed_in,
    )
    question = say(setup, "Just to confirm?", role=Role.ASSISTANT)
    pending_mark_shown(client=setup["client"], pending_id=pending.pk, question=question)
    pending.refresh_from_db()
    return pending


def resolve(setup: dict[str, Any], text: str, decide: Any = confirmation_decision) -> Any:
    message = say(setup, text)
    confirmed = pending_resolve(
        client=setup["client"],
        conversation=setup["conversation"],
        user_message=message,
        decide=decide,
    )
    return message, confirmed


def test_create_puts_the_exact_call_and_supersedes_older_questions(setup):
    first = ask(setup)
    second = ask(setup, {"order_id": "#W2002"})
    first.refresh_from_db()
    assert first.status == PendingActionStatus.SUPERSEDED
    assert second.status == PendingActionStatus.PENDING
    assert second.params_hash == params_hash({"order_id": "#W2002"})
    assert second.idempotency_key.startswith("pa-") and second.question is not None
    assert second.expires_at > timezone.now()


def test_resolve_records_what_the_rule_decides(setup):
    pending = ask(setup)
    seen: list[tuple[OpenQuestion, str]] = []

    def decide(question: OpenQuestion, text: str) -> str:
        seen.append((question, text))
        return PendingActionStatus.CONFIRMED

    message, confirmed = resolve(setup, "anything", decide)
    assert confirmed == pending
    assert seen == [
        (
            OpenQuestion(
                params=ORDER,
                shown_before=True,
                expired=False,
                first_reply=True,
                another_confirmed=False,
                action_id=pending.pk,
                digest=pending.params_hash[:16],
                structured=None,
                tool=pending.tool.name,
            ),
            "anything",
        )
    ]
    pending.refresh_from_db()
    assert (pending.status, pending.resolved_by) == (PendingActionStatus.CONFIRMED, message)
    # a re-run of the same turn finds the same action without asking the rule again
    again = pending_resolve(
        client=setup["client"],
        conversation=setup["conversation"],
        user_message=message,
        decide=lambda *_: pytest.fail("must not decide twice"),
    )
    assert again == pending


def test_resolve_with_the_real_rule(setup):
    pending = ask(setup)
    _, confirmed = resolve(setup, "yes cancel order #W2002")
    assert confirmed is None
    pending.refresh_from_db()
    assert pending.status == PendingActionStatus.EXPIRED

    declined = ask(setup)
    message, confirmed = resolve(setup, "no")
    assert confirmed is None
    assert pending_declined_by(client=setup["client"], user_message=message) == declined


def test_facts_for_a_question_answered_late_or_not_shown(setup):
    pending = ask(setup)
    say(setup, "hello?")
    seen: list[OpenQuestion] = []

    def decide(question: OpenQuestion, text: str) -> str:
        seen.append(question)
        return PendingActionStatus.PENDING

    resolve(setup, "yes", decide)
    assert seen[0].first_reply is False and seen[0].shown_before is True
    pending.refresh_from_db()
    assert pending.status == PendingActionStatus.PENDING  # PENDING = left as it is

    PendingAction.objects.unscoped("test checks the database directly").filter(
        pk=pending.pk
    ).update(question=None, expires_at=timezone.now() - timedelta(seconds=1))
    resolve(setup, "yes", decide)
    assert seen[1].shown_before is False and seen[1].expired is True


def test_mark_executed_and_expire_open(setup):
    pending = ask(setup)
    pending_mark_executed(client=setup["client"], pending=pending)
    pending.refresh_from_db()
    assert pending.status == PendingActionStatus.EXECUTED

    open_one = ask(setup)
    assert pending_expire_open(client=setup["client"], conversation=setup["conversation"]) == 1
    open_one.refresh_from_db()
    assert open_one.status == PendingActionStatus.EXPIRED
    pending.refresh_from_db()
    assert pending.status == PendingActionStatus.EXECUTED  # only open questions expire


def test_writes_stay_within_the_client(setup, client_b):
    pending = ask(setup)
    other = conversation_create(client=client_b)[0]
    question = message_append(client=client_b, conversation=other, role=Role.ASSISTANT, text="?")
    pending_mark_shown(client=client_b, pending_id=pending.pk, question=question)
    pending_mark_executed(
        client=client_b,
        pending=PendingAction.objects.unscoped("test checks the database directly").get(
            pk=pending.pk
        ),
    )
    assert pending_expire_open(client=client_b, conversation=setup["conversation"]) == 0
    pending.refresh_from_db()
    assert pending.status == PendingActionStatus.PENDING
    assert pending.question is not None and pending.question.conversation_id != other.pk


# --- a bounded time to answer -------------------------------------------------------------------


def test_a_question_expires_after_the_configured_minutes(setup, settings):
    settings.REASONING_CONFIRMATION_TTL_MINUTES = 5
    before = timezone.now()
    pending = ask(setup)
    assert before + timedelta(minutes=5) <= pending.expires_at
    assert pending.expires_at <= timezone.now() + timedelta(minutes=5)


def test_a_stale_yes_never_confirms(setup):
    """The time ran out: a typed yes expires the question, it never confirms it."""
    pending = ask(setup)
    PendingAction.objects.for_client(setup["client"]).filter(pk=pending.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    _, confirmed = resolve(setup, "yes, cancel it")
    pending.refresh_from_db()
    assert confirmed is None and pending.status == PendingActionStatus.EXPIRED
    assert (
        pending_expired_by_answer(client=setup["client"], user_message=pending.resolved_by) is None
    )


def test_asking_again_never_extends_the_deadline(setup, settings):
    first = ask(setup)
    message, _ = resolve(setup, "Yeah, right.")
    first.refresh_from_db()
    assert first.status == PendingActionStatus.EXPIRED
    assert pending_expired_by_answer(client=setup["client"], user_message=message) == first
    settings.REASONING_CONFIRMATION_TTL_MINUTES = 60 * 24
    again = pending_create(
        client=setup["client"],
        conversation=setup["conversation"],
        tool=setup["tool"],
        params=first.params,
        proposed_in=message,
        expires_at=first.expires_at,
    )
    assert again.expires_at == first.expires_at


def test_a_button_press_or_a_clear_answer_is_not_asked_again(setup):
    ask(setup)
    message, confirmed = resolve(setup, "yes")
    assert confirmed is not None
    assert pending_expired_by_answer(client=setup["client"], user_message=message) is None
