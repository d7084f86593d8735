"""Turn-level guarantees: escalated conversations run no LLM, redelivered turns do nothing twice,
the query count of a turn does not grow with the conversation, standard mode sends everything."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.conversations.models import Message
from apps.conversations.services import conversation_create, message_append
from apps.core.tenancy import tenant_scope
from apps.escalations.models import Escalation
from apps.escalations.services import escalation_resolve
from apps.reasoning.models import ReasoningTrace
from apps.reasoning.services import handle_turn, turn_process
from apps.tools.models import ToolExecution
from tests.support.broker import NEEDS_REDIS
from tests.support.fake_webhook import Reply
from tests.support.shop import Chat, assess, critique, make_shop

pytestmark = pytest.mark.django_db
ORDER = {"order_id": "TH-12345"}


def test_asking_for_a_human_escalates_without_any_llm_call(chat, llm):
    replies = chat.say("I want to talk to a real person please")
    assert llm.requests == []
    assert replies[-1].kind == "handoff"
    assert (
        Escalation.objects.unscoped("test checks the database directly").get().reason
        == "customer_request"
    )


def test_escalated_conversation_runs_no_llm_until_handed_back(chat, llm):
    chat.say("Can I speak to a human?")
    replies = chat.say("Hello? Anyone there?")
    assert replies == []  # stored for staff, no AI reply
    assert (
        Message.objects.unscoped("test checks the database directly")
        .filter(role="user", text="Hello? Anyone there?")
        .exists()
    )
    assert llm.requests == []
    skipped = ReasoningTrace.objects.unscoped("test checks the database directly").get(
        user_message__text="Hello? Anyone there?"
    )
    assert skipped.status == "skipped"
    assert skipped.llm_calls == 0

    escalation_resolve(
        client=chat.client,
        escalation=Escalation.objects.unscoped("test checks the database directly").get(),
        actor=None,
    )
    llm.script("assess", assess(response="Hi again! How can I help?"))
    replies = chat.say("Are you back?")
    assert [r.text for r in replies] == ["Hi again! How can I help?"]
    assert len(llm.requests) == 1
    assert chat.all(kind="notice")[0].text.startswith("Our team has finished")


@pytest.mark.django_db(transaction=True)
def test_status_is_rechecked_before_the_reply_is_posted(chat, llm, shop):
    def take_over(request):
        # staff take over while the model is thinking (another thread, another connection)
        from django.db import connection as thread_connection

        from apps.escalations.services import escalation_create

        try:
            escalation_create(
                client=shop,
                conversation=chat.conversation,
                reason="customer_request",
                detail="staff took over",
            )
        finally:
            thread_connection.close()
        return assess(response="An AI answer nobody should see")

    llm.script("assess", take_over)
    replies = chat.say("hello")
    assert "An AI answer nobody should see" not in [r.text for r in replies]
    trace = ReasoningTrace.objects.unscoped("test checks the database directly").get()
    assert trace.status == "skipped"
    assert trace.steps.filter(name="reply_suppressed").exists()


def test_redelivered_turn_posts_nothing_twice_and_runs_no_tool_twice(chat, llm, webhook):
    llm.script("assess", assess(tool_call="get_order_status", tool_params=ORDER, confidence=9))
    webhook.script(Reply.ok({"status": "shipped"}))
    llm.script("compose", {"response": "Shipped."})
    chat.say("status of TH-12345")
    message = Message.objects.unscoped("test checks the database directly").get(role="user")
    before = Message.objects.unscoped("test checks the database directly").count()
    with tenant_scope(message.client_id):
        assert turn_process(message_id=message.pk) is None  # the task delivered again
    assert Message.objects.unscoped("test checks the database directly").count() == before
    assert (
        len(webhook.requests) == 1
        and ToolExecution.objects.unscoped("test checks the database directly").count() == 1
    )


def test_turn_of_a_dead_worker_is_taken_over_without_repeating_the_tool(chat, llm, webhook):
    """A worker ran the tool and died before replying: the next delivery re-runs the turn,
    finds the execution by its idempotency key, and does not call the webhook again."""
    llm.script("assess", assess(tool_call="get_order_status", tool_params=ORDER, confidence=9))
    webhook.script(Reply.ok({"status": "shipped"}))
    llm.script("compose", {"response": "Shipped."})
    chat.say("status of TH-12345")
    trace = ReasoningTrace.objects.unscoped("test checks the database directly").get()
    # simulate: the reply was never posted and the worker's lease ran out
    Message.objects.filter(trace=trace, role="assistant", visibility="visible").delete()
    ReasoningTrace.objects.unscoped("test checks the database directly").filter(pk=trace.pk).update(
        status="processing"
    )
    ReasoningTrace.objects.unscoped("test checks the database directly").filter(pk=trace.pk).update(
        updated_at=trace.updated_at.replace(year=2000)
    )
    llm.script("assess", assess(tool_call="get_order_status", tool_params=ORDER, confidence=9))
    llm.script("compose", {"response": "Shipped."})
    with tenant_scope(trace.client_id):
        turn_process(message_id=trace.user_message_id)
    assert len(webhook.requests) == 1
    assert ToolExecution.objects.unscoped("test checks the database directly").count() == 1
    assert (
        Message.objects.unscoped("test checks the database directly")
        .filter(role="assistant", visibility="visible")
        .count()
        == 1
    )


def _queries_for_one_turn(shop, llm, capture, history: int) -> int:
    conversation, _ = conversation_create(client=shop)
    for i in range(history):
        role = "user" if i % 2 == 0 else "assistant"
        earlier = message_append(client=shop, conversation=conversation, role=role, text=f"m{i}")
        if role == "user":  # an earlier, finished turn
            ReasoningTrace.objects.create(
                client=shop,
                conversation=conversation,
                user_message=earlier,
                mode="adaptive",
                status="done",
            )
    llm.script("assess", assess(response="Sure."))
    with capture(execute=True):
        message = handle_turn(client=shop, conversation=conversation, text="hello")
    with CaptureQueriesContext(connection) as ctx:
        ReasoningTrace.objects.filter(user_message=message).delete()
        with tenant_scope(message.client_id):
            turn_process(message_id=message.pk)
    return len(ctx.captured_queries)


def test_query_count_of_an_adaptive_turn_is_flat(shop, llm, django_capture_on_commit_callbacks):
    small = _queries_for_one_turn(shop, llm, django_capture_on_commit_callbacks, history=2)
    large = _queries_for_one_turn(shop, llm, django_capture_on_commit_callbacks, history=60)
    assert small == large
    # (+1: the trace's TurnAllowance row, deleted with it; +1: its approval requests, unlinked;
    # +1: the customer's message and its conversation are read by two plain statements, which
    # cost less CPU than the ORM's one select_related join did)
    assert small <= 40


def test_adaptive_turn_query_budget(chat, llm, django_assert_max_num_queries):
    llm.script("assess", assess(response="Hi"))
    chat.say("warm up")
    llm.script("assess", assess(response="Sure."))
    message = handle_turn(client=chat.client, conversation=chat.conversation, text="and now?")
    with (
        django_assert_max_num_queries(21),  # (savepoints: the test's own transaction is open)
        tenant_scope(message.client_id),
    ):
        turn_process(message_id=message.pk)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("mode", "script", "queries"),
    [
        ("standard", [("respond", {"response": "Sure.", "tool_call": None})], 17),
        ("adaptive", [("assess", assess(response="Sure."))], 21),
        (
            "adaptive",
            [
                ("assess", assess(confidence=5, needs_more_context=["policies.returns"])),
                ("assess", assess(response="Sure.")),
            ],
            34,
        ),
    ],
    ids=["standard-one-call", "adaptive-one-call", "adaptive-two-calls"],
)
def test_query_count_of_a_turn_as_a_worker_runs_it(
    mode, script, queries, llm, webhook, django_assert_num_queries
):
    """What a worker runs per turn, outside any transaction as in production (devtools/benchmarks/
    turn_overhead.py measures the same turns): the message, then its conversation — two plain
    statements, cheaper in CPU than one ORM join (its client and plan from the row cache,
    apps/clients/rowcache.py); the turn lock; the trace; tools,
    history and the pending-action check; the conversation's usage so far and its visitor (the
    per-visitor limits); per LLM call the status re-check (not before the first), usage record,
    trace counts and step (the price is cached);
    the assessment (adaptive); the finish — reply, trace, lock release — in one transaction."""
    shop = make_shop(mode, webhook.url())

    def stored_message() -> int:
        for step, reply in script:
            llm.script(step, reply)
        conversation, _ = conversation_create(client=shop)
        return message_append(
            client=shop, conversation=conversation, role="user", text="Returns?"
        ).pk

    with tenant_scope(shop.pk):  # warm: the notes cache, the SDK client
        turn_process(message_id=stored_message())
    message_id = stored_message()
    with django_assert_num_queries(queries), tenant_scope(shop.pk):
        turn_process(message_id=message_id)
    trace = ReasoningTrace.objects.for_client(shop).get(user_message_id=message_id)
    assert (trace.status, trace.llm_calls, trace.escalated) == ("done", len(script), False)


def test_standard_mode_sends_full_context_in_one_call(
    standard_shop, llm, django_capture_on_commit_callbacks
):
    chat = Chat.new(standard_shop, django_capture_on_commit_callbacks)
    llm.script("respond", {"response": "30 days.", "tool_call": None, "tool_params": {}})
    [reply] = chat.say("How long do I have to return?")
    assert reply.text == "30 days."
    [call] = llm.requests
    assert call.step == "respond"
    assert call.response_format["json_schema"]["name"] == "respond"
    info = standard_shop.business_info
    for text in [info["policies"]["returns"], info["faqs"][0]["answer"], info["ai_instructions"]]:
        assert text in call.prompt_text
    for tool in ["get_order_status", "update_shipping_address", "cancel_order"]:
        assert f"{tool} (" in call.prompt_text and '"required":["order_id"' in call.prompt_text
    assert "gift_card_balance" not in call.prompt_text  # disabled tools are not offered
    assert ReasoningTrace.objects.unscoped("test checks the database directly").get().llm_calls == 1


def test_client_b_tools_are_never_offered_or_run_for_client_a(
    shop, llm, webhook, django_capture_on_commit_callbacks
):
    from tests.support.shop import make_shop

    other = make_shop("adaptive", webhook.url("/other"), slug="other-shop")
    other.tools = None
    from apps.tools.models import ClientTool

    ClientTool.objects.filter(client=other, name="get_order_status").update(name="secret_lookup")
    chat = Chat.new(shop, django_capture_on_commit_callbacks)
    llm.script("assess", assess(tool_call="secret_lookup", tool_params=ORDER, confidence=10))
    llm.script("critique", critique("PROCEED"))
    [reply] = chat.say("run the secret lookup on TH-12345")
    assert reply.kind == "handoff"  # another client's tool is unknown here; no draft: a person
    assert webhook.requests == []
    assert "secret_lookup" not in llm.calls("assess")[0].prompt_text


def test_staff_reply_takes_ownership_and_silences_the_ai(chat, llm):
    from apps.escalations.services import staff_reply
    from tests.factories import UserFactory

    agent = UserFactory()
    message = staff_reply(
        client=chat.client,
        conversation=chat.conversation,
        text="Hi, I'm Sam from support.",
        author=agent,
    )
    assert message.role == "staff"
    assert message.visibility == "visible"
    chat.conversation.refresh_from_db()
    assert chat.conversation.status == "escalated"
    escalation = Escalation.objects.unscoped("test checks the database directly").get()
    assert escalation.reason == "staff_takeover"
    assert escalation.assigned_to == agent
    assert chat.say("thanks Sam") == []
    assert llm.requests == []


def test_turns_of_one_conversation_run_in_message_order(chat, llm):
    """A later message waits while an earlier one is queued or running (a second worker)."""
    from apps.reasoning.services import TurnBusy

    first = handle_turn(client=chat.client, conversation=chat.conversation, text="first")
    second = handle_turn(client=chat.client, conversation=chat.conversation, text="second")
    # the task of the second message arrives first: it must wait for the first
    with pytest.raises(TurnBusy), tenant_scope(second.client_id):
        turn_process(message_id=second.pk)
    assert not ReasoningTrace.objects.filter(user_message=second).exists()
    llm.script("assess", assess(response="one"), assess(response="two"))
    with tenant_scope(first.client_id):
        turn_process(message_id=first.pk)
    with tenant_scope(second.client_id):
        turn_process(message_id=second.pk)
    replies = [m.text for m in chat.all(role="assistant", visibility="visible")]
    assert replies == ["one", "two"]
    chat.conversation.refresh_from_db()
    assert chat.conversation.turn_lock_until is None


def test_a_held_turn_lock_makes_the_next_turn_wait(chat, llm):
    from datetime import timedelta

    from django.utils import timezone

    from apps.conversations.models import Conversation
    from apps.reasoning.services import TurnBusy

    message = handle_turn(client=chat.client, conversation=chat.conversation, text="hello")
    Conversation.objects.unscoped("test checks the database directly").filter(
        pk=chat.conversation.pk
    ).update(turn_lock_until=timezone.now() + timedelta(minutes=1))
    with pytest.raises(TurnBusy), tenant_scope(message.client_id):
        turn_process(message_id=message.pk)
    # a lock past its lease belongs to a dead worker and no longer blocks
    Conversation.objects.unscoped("test checks the database directly").filter(
        pk=chat.conversation.pk
    ).update(turn_lock_until=timezone.now() - timedelta(seconds=1))
    llm.script("assess", assess(response="hi"))
    with tenant_scope(message.client_id):
        turn_process(message_id=message.pk)
    assert [m.text for m in chat.all(role="assistant", visibility="visible")] == ["hi"]


def test_broker_down_still_answers_in_process(chat, llm, monkeypatch):
    from apps.reasoning import tasks

    def broker_down(*args, **kwargs):
        raise ConnectionError("broker unreachable")

    monkeypatch.setattr(tasks.process_turn, "delay", broker_down)
    llm.script("assess", assess(response="Still here."))
    replies = chat.say("hello")
    assert [r.text for r in replies] == ["Still here."]


def test_history_sent_to_the_model_follows_the_setting(
    standard_shop, llm, settings, django_capture_on_commit_callbacks
):
    chat = Chat.new(standard_shop, django_capture_on_commit_callbacks)
    for n in range(1, 4):
        llm.script("respond", {"response": f"answer {n}", "tool_call": None, "tool_params": {}})
        chat.say(f"question {n}")
    settings.REASONING_HISTORY_MESSAGES = 3  # question 3, its answer and question 4
    llm.script("respond", {"response": "answer 4", "tool_call": None, "tool_params": {}})
    chat.say("question 4")
    last = llm.requests[-1].prompt_text
    assert "question 4" in last and "answer 3" in last and "question 3" in last
    assert "question 2" not in last and "answer 2" not in last


@NEEDS_REDIS
def test_a_turn_that_replies_wakes_the_conversations_streams_once(
    chat, llm, settings, monkeypatch, django_capture_on_commit_callbacks
):
    """The reply and the end of the typing line commit together, and a stream reads all that
    changed on one wake-up: one publish for the turn's end, not two (each web process would
    read the conversation again for nothing)."""
    from apps.conversations import events

    settings.REDIS_URL = settings.TEST_BROKER_URL  # push on; publish is caught below
    published: list[tuple[int, int | None, bool]] = []
    monkeypatch.setattr(
        events,
        "publish",
        lambda cid, client_id=None, note=None: published.append((cid, client_id, bool(note))),
    )
    llm.script("assess", assess(response="Sure."))
    with django_capture_on_commit_callbacks(execute=True):  # the turn runs in-process (eager)
        handle_turn(client=chat.client, conversation=chat.conversation, text="Hi?")
    replies = Message.objects.for_client(chat.client).filter(role="assistant", kind="text")
    assert [m.text for m in replies] == ["Sure."]
    # the customer's message and the turn's start (typing on), each with its note (the streams
    # need not read them); its end: the reply with the typing line off, one wake-up
    ids = (chat.conversation.pk, chat.client.pk)
    assert published == [(*ids, True), (*ids, True), (*ids, False)]
