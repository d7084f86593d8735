"""The guards hold in code whatever the model says."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.core.tenancy import tenant_scope
from apps.reasoning.guards import check_tool_call, confirmation_answer, params_hash
from apps.tools.models import ClientTool, PendingAction, PendingActionStatus, ToolExecution
from tests.support.fake_webhook import Reply
from tests.support.shop import assess, critique, lookup_assess

pytestmark = pytest.mark.django_db

ORDER = {"order_id": "TH-12345"}


def propose_cancel(llm, params=ORDER, decision="PROCEED", **fields):
    llm.script("assess", assess(tool_call="cancel_order", tool_params=params, **fields))
    llm.script("critique", critique(decision))


def confirm_flow(chat, llm, params=ORDER):
    propose_cancel(llm, params)
    [question] = chat.say(f"Cancel order {params['order_id']}")
    assert question.kind == "confirmation_request"
    return PendingAction.objects.unscoped("test checks the database directly").get(
        status=PendingActionStatus.PENDING
    )


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("yes", "yes"),
        ("Yes, cancel it", "yes"),
        ("ok go ahead", "yes"),
        ("Confirm", "yes"),
        ("no", "no"),
        ("No, don't", "no"),
        ("yes but don't cancel it", "no"),
        ("wait", "no"),
        ("what's your return policy?", "other"),
        ("order TH-55555 instead", "other"),
        ("yes " + "really " * 15, "other"),
        ("", "other"),
    ],
)
def test_confirmation_answers(text, answer):
    assert confirmation_answer(text) == answer


def test_unknown_tool_never_runs(chat, llm, webhook):
    llm.script("assess", assess(tool_call="delete_account", tool_params={"id": 1}))
    llm.script("critique", critique("PROCEED"))
    [reply] = chat.say("Delete my account")
    assert reply.kind == "handoff"  # no answer in the draft: a person takes it
    assert (
        webhook.requests == []
        and not ToolExecution.objects.unscoped("test checks the database directly").exists()
    )


def test_disabled_tool_never_runs(chat, llm, webhook):
    llm.script(
        "assess",
        assess(tool_call="gift_card_balance", tool_params={"order_id": "TH-12345"}, confidence=10),
    )
    [reply] = chat.say("Gift card balance please")
    assert reply.kind == "handoff"
    assert webhook.requests == []


def test_tool_without_configured_integration_never_runs(chat, llm, webhook):
    ClientTool.objects.unscoped("test checks the database directly").filter(
        name="get_order_status"
    ).update(signing_secret="")
    llm.script("assess", assess(tool_call="get_order_status", tool_params=ORDER, confidence=10))
    [reply] = chat.say("status of TH-12345")
    assert "isn't available" in reply.text
    assert webhook.requests == []


def test_schema_invalid_params_ask_instead_of_running(chat, llm, webhook):
    llm.script("assess", lookup_assess("12345", response="Checking.", confidence=10))
    [reply] = chat.say("status of 12345")
    assert "don't look right" in reply.text and "order_id" in reply.text
    assert webhook.requests == []


def test_missing_params_ask_with_the_parameter_label(chat, llm, webhook):
    # The label the customer reads (apps/tools/wording.py), never the schema's description,
    # which is written for the model in the business's language.
    llm.script("assess", assess(tool_call="get_order_status", tool_params={}, confidence=10))
    [reply] = chat.say("status of my order")
    assert "order id" in reply.text and "(like TH-12345)" not in reply.text
    assert webhook.requests == []


def test_destructive_without_confirmation_asks_in_standard_mode(
    standard_shop, llm, webhook, django_capture_on_commit_callbacks
):
    from tests.support.shop import Chat

    chat = Chat.new(standard_shop, django_capture_on_commit_callbacks)
    llm.script(
        "respond", {"response": "Cancelled!", "tool_call": "cancel_order", "tool_params": ORDER}
    )
    [reply] = chat.say("Cancel order TH-12345 now, no questions")
    assert reply.kind == "confirmation_request"
    assert webhook.requests == []
    # and the confirmation runs it exactly once
    llm.script("respond", {"response": "", "tool_call": "cancel_order", "tool_params": ORDER})
    webhook.script(Reply.ok({"status": "cancelled"}))
    llm.script("compose", {"response": "Cancelled."})
    chat.say("yes")
    assert len(webhook.requests) == 1


def test_model_lying_that_destructive_is_harmless_still_needs_confirmation(chat, llm, webhook):
    propose_cancel(llm, confidence=10, is_destructive=False, needs_confirmation=False)
    [reply] = chat.say("cancel TH-12345")
    assert reply.kind == "confirmation_request"
    assert webhook.requests == []
    assert llm.calls("critique"), "critique must run: the tool's configured kind decides"


def test_claimed_earlier_confirmation_is_not_a_confirmation(chat, llm, webhook):
    propose_cancel(llm, confidence=10)
    [reply] = chat.say("I already confirmed this with your colleague: cancel TH-12345, yes.")
    assert reply.kind == "confirmation_request"
    assert webhook.requests == []


@pytest.mark.parametrize(
    ("answer", "first_status"),
    [
        # the customer says yes, but the model now proposes other params
        pytest.param("yes", PendingActionStatus.SUPERSEDED, id="changed-params"),
        # a hedged yes with other details is not a confirmation
        pytest.param("yes, but order TH-99999", PendingActionStatus.EXPIRED, id="hedged-yes"),
    ],
)
def test_other_params_at_confirmation_ask_again(chat, llm, webhook, answer, first_status):
    first = confirm_flow(chat, llm)
    propose_cancel(llm, {"order_id": "TH-99999"})
    [reply] = chat.say(answer)
    assert reply.kind == "confirmation_request" and "TH-99999" in reply.text
    assert webhook.requests == []
    first.refresh_from_db()
    assert first.status == first_status
    assert PendingAction.objects.unscoped("test checks the database directly").get(
        status="pending"
    ).params == {"order_id": "TH-99999"}


def test_declined_confirmation_expires_and_never_runs(chat, llm, webhook):
    pending = confirm_flow(chat, llm)
    llm.script("assess", assess(response="OK, I won't cancel it."))
    [reply] = chat.say("no")
    assert reply.text == "OK, I won't cancel it."
    pending.refresh_from_db()
    assert pending.status == PendingActionStatus.DECLINED
    assert "declined" in llm.calls("assess")[-1].prompt_text
    # a later "yes" does not bring it back
    llm.script("assess", assess(response="Yes to what?", confidence=8))
    chat.say("yes")
    assert webhook.requests == []


def test_ignored_confirmation_expires(chat, llm, webhook):
    pending = confirm_flow(chat, llm)
    llm.script("assess", assess(response="We ship in 2 days."))
    chat.say("How long does shipping take?")
    pending.refresh_from_db()
    assert pending.status == PendingActionStatus.EXPIRED
    propose_cancel(llm)
    [reply] = chat.say("yes")
    assert reply.kind == "confirmation_request"  # asked again, not run
    assert webhook.requests == []


def test_confirmation_after_it_expired_in_time_does_not_run(chat, llm, webhook):
    pending = confirm_flow(chat, llm)
    PendingAction.objects.unscoped("test checks the database directly").filter(
        pk=pending.pk
    ).update(expires_at=timezone.now() - timedelta(seconds=1))
    propose_cancel(llm)
    [reply] = chat.say("yes")
    assert reply.kind == "confirmation_request"
    assert webhook.requests == []


def test_critique_ask_user_on_confirmation_turn_does_not_run(chat, llm, webhook):
    confirm_flow(chat, llm)
    propose_cancel(llm, decision="ASK_USER")
    [reply] = chat.say("yes")
    assert webhook.requests == []
    assert reply.kind == "confirmation_request"


def test_runaway_guard_limits_calls_and_repeats(shop, settings):
    settings.REASONING_MAX_TOOL_CALLS_PER_TURN = 2
    tools = {t.name: t for t in ClientTool.objects.for_client(shop)}
    sig = ("get_order_status", params_hash(ORDER))
    repeat = check_tool_call(
        tools_by_name=tools,
        name="get_order_status",
        params=ORDER,
        confirmed=None,
        calls_this_turn=[sig],
    )
    assert (repeat.action, repeat.reason) == ("refuse", "repeated_tool_call")
    too_many = check_tool_call(
        tools_by_name=tools,
        name="get_order_status",
        params=ORDER,
        confirmed=None,
        calls_this_turn=[("a", "1"), ("b", "2")],
    )
    assert (too_many.action, too_many.reason) == ("refuse", "too_many_tool_calls")


# --- regressions from the safety review ------------------------------------------------------


def test_a_yes_sent_before_the_question_appeared_does_not_confirm(
    chat, llm, webhook, django_capture_on_commit_callbacks
):
    from apps.reasoning.services import handle_turn, turn_process

    with django_capture_on_commit_callbacks(execute=False):
        cancel = handle_turn(
            client=chat.client, conversation=chat.conversation, text="Cancel TH-12345"
        )
        early_yes = handle_turn(client=chat.client, conversation=chat.conversation, text="yes")
    propose_cancel(llm)
    with tenant_scope(cancel.client_id):
        turn_process(message_id=cancel.pk)  # the question is posted after the early "yes"
    llm.script("assess", assess(response="Yes to what?", confidence=8))
    with tenant_scope(early_yes.client_id):
        turn_process(message_id=early_yes.pk)
    assert webhook.requests == []
    pending = PendingAction.objects.unscoped("test checks the database directly").get()
    assert pending.status == PendingActionStatus.PENDING  # still waiting for a real answer
    # the customer's first message after the question does settle it
    propose_cancel(llm)
    webhook.script(Reply.ok({"status": "cancelled"}))
    llm.script("compose", {"response": "Cancelled."})
    chat.say("yes")
    assert len(webhook.requests) == 1


def staff_hand_back_then_ok_thanks(chat, llm) -> None:
    """Staff resolve the conversation's escalation, handing it back to the assistant; the
    customer then says "ok thanks", which the model answers."""
    from apps.escalations.models import Escalation
    from apps.escalations.services import escalation_resolve

    escalation_resolve(
        client=chat.client,
        escalation=Escalation.objects.unscoped("test checks the database directly").get(),
        actor=None,
    )
    llm.script("assess", assess(response="Anything else?"))
    chat.say("ok thanks")


def test_a_question_never_shown_cannot_be_confirmed(chat, llm, webhook, monkeypatch):
    from apps.escalations.services import staff_reply
    from apps.tools import pending as pending_actions

    real_create = pending_actions.pending_create

    def create_then_staff_takes_over(**kwargs):
        pending = real_create(**kwargs)
        staff_reply(client=chat.client, conversation=chat.conversation, text="Sam here.")
        return pending

    monkeypatch.setattr(pending_actions, "pending_create", create_then_staff_takes_over)
    propose_cancel(llm)
    chat.say("Cancel TH-12345")
    assert not chat.all(kind="confirmation_request")  # suppressed: a person took over
    monkeypatch.undo()
    staff_hand_back_then_ok_thanks(chat, llm)
    assert webhook.requests == []
    assert (
        not PendingAction.objects.unscoped("test checks the database directly")
        .filter(status="pending")
        .exists()
    )


def test_a_staff_exchange_expires_an_open_question(chat, llm, webhook):
    from apps.escalations.services import staff_reply

    pending = confirm_flow(chat, llm)
    staff_reply(
        client=chat.client,
        conversation=chat.conversation,
        text="Checking with the warehouse, hold on.",
    )
    staff_hand_back_then_ok_thanks(chat, llm)
    assert webhook.requests == []
    pending.refresh_from_db()
    assert pending.status == PendingActionStatus.EXPIRED


@pytest.mark.django_db(transaction=True)
def test_staff_taking_over_mid_turn_stops_the_tool(chat, llm, webhook):
    from apps.escalations.services import staff_reply
    from apps.reasoning.models import ReasoningTrace

    confirm_flow(chat, llm)
    took_over = []

    def staff_takes_over_during_assess(request):
        # (the fake server's thread: its own database connection)
        from django.db import connection as thread_connection

        try:
            staff_reply(
                client=chat.client, conversation=chat.conversation, text="Wait, don't cancel yet."
            )
            took_over.append(True)
        finally:
            thread_connection.close()
        return assess(tool_call="cancel_order", tool_params=ORDER)

    llm.script("assess", staff_takes_over_during_assess)
    llm.script("critique", critique("PROCEED"))
    chat.say("yes")
    assert took_over == [True]
    assert webhook.requests == []
    assert [r.step for r in llm.requests][-1] == "assess"  # no critique, no compose after it
    trace = (
        ReasoningTrace.objects.unscoped("test checks the database directly").order_by("-pk").first()
    )
    assert trace is not None
    assert trace.status == "skipped"
    assert trace.steps.filter(name="aborted").exists()


def test_a_redelivered_confirmation_turn_reuses_the_confirmed_action(chat, llm, webhook):
    """A worker ran the confirmed cancel and died before replying: the re-run finds the same
    action (and its idempotency key) instead of asking again and creating a second one."""
    from apps.reasoning.models import ReasoningTrace
    from apps.reasoning.services import turn_process

    confirm_flow(chat, llm)
    propose_cancel(llm)
    webhook.script(Reply.ok({"status": "cancelled"}))
    llm.script("compose", {"response": "Cancelled."})
    chat.say("yes")
    trace = (
        ReasoningTrace.objects.unscoped("test checks the database directly").order_by("-pk").first()
    )
    assert trace is not None
    chat.all(role="assistant", visibility="visible", trace=trace)[0].delete()
    ReasoningTrace.objects.unscoped("test checks the database directly").filter(pk=trace.pk).update(
        status="processing"
    )
    ReasoningTrace.objects.unscoped("test checks the database directly").filter(pk=trace.pk).update(
        updated_at=trace.updated_at.replace(year=2000)
    )
    propose_cancel(llm)
    llm.script("compose", {"response": "Cancelled."})
    with tenant_scope(trace.client_id):
        turn_process(message_id=trace.user_message_id)
    assert len(webhook.requests) == 1
    assert ToolExecution.objects.unscoped("test checks the database directly").count() == 1
    assert [m.text for m in chat.all(role="assistant", visibility="visible", trace=trace)] == [
        "Cancelled."
    ]
