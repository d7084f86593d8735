"""Denial of wallet (a red-team finding): per plan, a cap on deliberative turns per conversation
per hour, a token budget per conversation and one per visitor (client address) per day —
enforced before the turn spends, through the real pipeline (the `openai` SDK against the
scripted server, whose token counts the budgets add up).

Red team: 100 messages from 10 addresses on a deliberative plan spent 2.83 M tokens, the
tenant's whole monthly budget, and every later customer of the month was handed off."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.db.models import Sum
from django.utils import timezone

from apps.billing.models import UsageRecord
from apps.clients.rubrics import SUPPORT
from apps.conversations.models import Conversation, Message
from apps.conversations.services import conversation_create
from apps.escalations.models import Escalation
from apps.reasoning.models import ReasoningTrace
from apps.reasoning.services import USAGE_LIMIT_TEXT
from devtools.fake_llm import WithUsage
from tests.factories import set_deliberation
from tests.support.shop import Chat, assess, make_shop
from tests.widget.conftest import Widget, say_from, start_from

pytestmark = pytest.mark.django_db

ORIGIN = "https://shop.example"


def limits(client: Any, **fields: Any) -> None:
    plan = client.plan
    for name, value in fields.items():
        setattr(plan, name, value)
    plan.save()
    client.refresh_from_db()


def spent(**filters: Any) -> int:
    totals = (
        UsageRecord.objects.unscoped("test checks the database directly")
        .filter(**filters)
        .aggregate(p=Sum("prompt_tokens"), c=Sum("completion_tokens"))
    )
    return int((totals["p"] or 0) + (totals["c"] or 0))


def answer(text: str, tokens: int) -> WithUsage:
    """An adaptive answer that costs `tokens` (as the provider reports them)."""
    return WithUsage(assess(response=text), prompt_tokens=tokens - 10, completion_tokens=10)


def reason_step() -> dict[str, Any]:
    scores = dict.fromkeys((p["key"] for p in SUPPORT["principles"]), 0.9)
    return {"content": "thinking", "status": "final", "scores": scores, "rationale": "ok"}


# -- (a) deliberative turns per conversation per hour ------------------------------------------


@pytest.fixture
def deep_shop(db, webhook) -> Any:
    client = make_shop("deliberative", webhook.url(), slug="deep-shop")
    set_deliberation(client.plan_id, min_steps=1, max_steps=1, refinement_iterations=0)
    client.refresh_from_db()
    return client


def test_after_the_hourly_cap_a_conversations_turns_run_adaptive(
    deep_shop, llm, django_capture_on_commit_callbacks
):
    limits(deep_shop, deliberative_turns_per_hour=2)
    llm.default("reason_step", reason_step())
    llm.default("synthesize", assess(response="A deep answer."))
    llm.default("assess", assess(response="A quick answer."))
    chat = Chat.new(deep_shop, django_capture_on_commit_callbacks)

    replies = [chat.say(f"question {n}")[0].text for n in range(5)]

    assert replies == ["A deep answer."] * 2 + ["A quick answer."] * 3
    traces = list(
        ReasoningTrace.objects.unscoped("test checks the database directly").order_by("pk")
    )
    assert [t.mode for t in traces] == ["deliberative"] * 2 + ["adaptive"] * 3
    assert len(llm.calls("reason_step")) == 2  # nothing deliberative after the cap
    capped = traces[2].steps.get(name="deliberative_cap").output
    assert capped["reason"] == "hourly_cap" and capped["limit"] == 2
    # billed as what ran: the capped turns at the adaptive multiplier
    assert set(UsageRecord.objects.filter(trace=traces[4]).values_list("mode", flat=True)) == {
        "adaptive"
    }
    assert not Escalation.objects.unscoped("test checks the database directly").exists()

    # an hour later the conversation gets deliberative answers again
    UsageRecord.objects.unscoped("test checks the database directly").update(
        created_at=timezone.now() - timedelta(minutes=61)
    )
    assert chat.say("one more")[0].text == "A deep answer."


def test_a_deliberative_turn_that_no_longer_fits_the_conversation_budget_runs_adaptive(
    deep_shop, llm, django_capture_on_commit_callbacks, settings
):
    settings.BILLING_DELIBERATIVE_TURN_TOKEN_RESERVE = 5_000
    limits(deep_shop, deliberative_turns_per_hour=0, conversation_token_budget=10_000)
    llm.default("reason_step", WithUsage(reason_step(), prompt_tokens=1_990, completion_tokens=10))
    llm.default(
        "synthesize",
        WithUsage(assess(response="Deep."), prompt_tokens=990, completion_tokens=10),
    )
    llm.default("assess", answer("Quick.", 500))
    chat = Chat.new(deep_shop, django_capture_on_commit_callbacks)

    assert chat.say("first")[0].text == "Deep."  # 0 + a deliberative reservation fits
    assert chat.say("second")[0].text == "Deep."  # 3,000 used: 3,000 + 5,000 ≤ 10,000
    assert chat.say("third")[0].text == "Quick."  # 6,000 + 5,000 > 10,000: adaptive
    trace = (
        ReasoningTrace.objects.unscoped("test checks the database directly").order_by("pk").last()
    )
    assert trace is not None and trace.mode == "adaptive"
    assert trace.steps.get(name="deliberative_cap").output["reason"] == "conversation_budget"


# -- (c) the conversation budget ---------------------------------------------------------------


def test_a_conversation_over_its_budget_is_handed_to_staff_before_another_call(chat, llm):
    limits(chat.client, conversation_token_budget=3_000)
    llm.default("assess", answer("Sure.", 2_000))
    assert chat.say("one")[0].text == "Sure."  # 2,000 used
    assert chat.say("two")[0].text == "Sure."  # admitted at 2,000 < 3,000: 4,000 used
    calls = len(llm.requests)

    replies = chat.say("three")

    assert len(llm.requests) == calls  # no call: refused before the turn spends
    assert [(r.kind, r.text) for r in replies] == [("handoff", USAGE_LIMIT_TEXT)]
    escalation = Escalation.objects.unscoped("test checks the database directly").get()
    assert escalation.reason == "usage_limit"
    assert "conversation token budget 3,000 reached (4,000 used)" in escalation.detail
    assert spent() == 4_000
    # another conversation of the same client is not affected
    other = Chat(chat.client, conversation_create(client=chat.client)[0], chat._capture)
    assert other.say("hello")[0].text == "Sure."


# -- (b) the visitor's daily budget, through the widget ----------------------------------------


@pytest.fixture
def shop_widget(shop) -> Widget:
    shop.allowed_origins = [ORIGIN]
    shop.save()
    return Widget(shop)


@pytest.mark.django_db(transaction=True)
def test_a_visitor_past_their_daily_budget_is_handed_to_a_person_and_another_still_gets_answers(
    shop_widget, llm
):
    widget = shop_widget
    limits(widget.client, visitor_daily_token_budget=3_000, conversation_token_budget=0)
    llm.default("assess", answer("We open at nine.", 2_000))
    attacker = "198.51.100.7"
    first = start_from(widget, attacker)
    assert say_from(widget, attacker, first, "hours?").json()["replies"][0]["text"] == (
        "We open at nine."
    )
    assert say_from(widget, attacker, first, "hours?").status_code == 201  # 4,000 used
    calls = len(llm.requests)

    # over the budget: a new conversation from the same address is the same visitor
    again = start_from(widget, attacker)
    refused = say_from(widget, attacker, again, "hours??")
    assert refused.status_code == 201
    assert len(llm.requests) == calls  # refused before any call
    from apps.reasoning.services import VISITOR_LIMIT_TEXT

    [notice] = refused.json()["replies"]
    assert notice["text"] == str(VISITOR_LIMIT_TEXT)
    assert refused.json()["status"] == "escalated"  # a person answers: never locked out
    stored = Message.objects.unscoped("test checks the database directly").get(text="hours??")
    [handoff] = Escalation.objects.unscoped("test checks the database directly").all()
    assert handoff.conversation_id == stored.conversation_id  # stored, for the person
    assert handoff.reason == "usage_limit"
    trace = ReasoningTrace.objects.unscoped("test checks the database directly").get(
        user_message__text="hours??"
    )
    assert trace.llm_calls == 0
    assert trace.steps.get(name="usage_limit").output == {"limit": "visitor_tokens"}
    assert spent() == 4_000

    # a different visitor of the same tenant still gets normal answers
    other = start_from(widget, "203.0.113.9")
    ok = say_from(widget, "203.0.113.9", other, "hours?")
    assert ok.json()["replies"][0]["text"] == "We open at nine."


@pytest.mark.django_db(transaction=True)
def test_the_red_team_flood_is_bounded_per_address_and_the_tenant_keeps_answering(shop_widget, llm):
    """The red team's run, scaled down 100×: 10 addresses × 10 messages, each answer 2,000
    tokens, on a tenant with a monthly budget (3 M there, 30,000 here). Each address spends at
    most its daily budget plus the one turn admitted under it; the tenant's budget holds and
    the next customer gets an answer."""
    widget = shop_widget
    limits(
        widget.client,
        monthly_token_budget=30_000,
        visitor_daily_token_budget=1_500,
        conversation_token_budget=0,
    )
    llm.default("assess", answer("Answer.", 2_000))
    for n in range(10):
        address = f"198.51.100.{n + 1}"
        conversation = start_from(widget, address)
        for m in range(10):
            assert say_from(widget, address, conversation, f"flood {n}.{m}").status_code == 201

    assert len(llm.requests) == 10  # one answer per address, then a person
    assert spent() == 10 * 2_000 < 30_000
    # past its day an address is handed to a person once per conversation — its later
    # messages wait for staff without a model call — so the flood fills the staff queue by
    # one hand-off per conversation, no faster than asking for a person does
    handoffs = Escalation.objects.unscoped("test checks the database directly")
    assert handoffs.count() == 10
    assert set(handoffs.values_list("reason", flat=True)) == {"usage_limit"}
    customer = start_from(widget, "203.0.113.50")
    reply = say_from(widget, "203.0.113.50", customer, "Where is my order?")
    assert reply.json()["replies"][0]["text"] == "Answer."
    assert (
        Conversation.objects.unscoped("test checks the database directly")
        .filter(status="escalated")
        .count()
        == 10  # the flooding addresses' conversations; the next customer's is answered
    )


# -- (d) concurrency: many messages of one visitor at once (PostgreSQL row locks) ------------


@pytest.mark.django_db(transaction=True)
def test_concurrent_messages_of_one_visitor_overspend_by_at_most_one_reservation(llm, webhook):
    if connection.vendor != "postgresql":
        pytest.skip(
            "needs PostgreSQL row locks (select_for_update is a no-op on SQLite); CI runs it "
            "with DATABASE_URL=postgres://…"
        )
    from django.apps import apps

    from apps.billing import periods
    from apps.platform.throttling import visitor_key
    from tests.billing.test_budgets import _wait_for_lock_waiters

    visitor_usage = apps.get_model("billing", "VisitorUsage")
    client = make_shop("adaptive", webhook.url(), slug="flooded")
    client.allowed_origins = [ORIGIN]
    client.save()
    budget, reservation, n = 10_000, 4_000, 10
    limits(client, visitor_daily_token_budget=budget, per_turn_token_cap=reservation)
    widget = Widget(client)
    address = "198.51.100.7"
    conversations = [start_from(widget, address) for _ in range(n)]
    arrived = threading.Event()

    def slow_answer(request: Any) -> Any:
        # Every admitted turn holds its reservation while "thinking" until all n would have
        # arrived; had all been admitted, all n calls would reach the server.
        if len(llm.requests) >= n:
            arrived.set()
        arrived.wait(2)
        return answer("Sure.", reservation - 100)

    llm.default("assess", slow_answer)
    statuses: list[int] = []
    errors: list[BaseException] = []

    def post(conversation: tuple[str, str]) -> None:
        try:
            statuses.append(say_from(Widget(client), address, conversation, "hello").status_code)
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=post, args=(c,)) for c in conversations]
    # Force the race: hold the visitor's row until every turn waits on it, then let them go at
    # once. With the row lock they queue and each sees the others' reservations.
    row = visitor_usage.objects.create(
        client=client, day=periods.today(), visitor=visitor_key(address)
    )
    with transaction.atomic():
        visitor_usage.objects.for_client(client).select_for_update().get(pk=row.pk)
        for thread in threads:
            thread.start()
        _wait_for_lock_waiters(n)
    for thread in threads:
        thread.join(30)

    assert errors == [] and statuses == [201] * n
    # admitted while used + reserved < budget: 0, 4,000, 8,000 — then 12,000 ≥ 10,000
    assert len(llm.requests) == 3
    assert spent(client=client) == 3 * (reservation - 100) <= budget + reservation
    row.refresh_from_db()
    assert (row.tokens_used, row.tokens_reserved) == (3 * (reservation - 100), 0)
    # the turns refused the visitor's day went to a person: one hand-off each, none lost
    handoffs = Escalation.objects.unscoped("test checks the database directly")
    assert handoffs.count() == n - 3
    assert set(handoffs.values_list("reason", flat=True)) == {"usage_limit"}


# -- the visitor's hold: taken-over turns, dead workers, the window switched off ----------------


def _visitor_turn(client: Any, visitor: str) -> tuple[Any, ReasoningTrace]:
    from apps.billing.services.visitors import conversation_visitor_record
    from apps.conversations.services import message_append

    conversation, _ = conversation_create(client=client)
    conversation_visitor_record(client=client, conversation=conversation, visitor=visitor)
    message = message_append(client=client, conversation=conversation, role="user", text="hi")
    trace = ReasoningTrace.objects.create(
        client=client, conversation=conversation, user_message=message, mode="adaptive"
    )
    return conversation, trace


def test_a_taken_over_turn_keeps_its_hold_and_a_dead_workers_is_settled(shop, settings):
    from apps.billing.models import TurnAllowance, VisitorUsage
    from apps.billing.services.visitors import turn_limits_admit, turn_limits_commit

    limits(shop, visitor_daily_token_budget=100_000)
    conversation, trace = _visitor_turn(shop, "v" * 32)
    first = turn_limits_admit(client=shop, conversation=conversation, trace=trace, mode="adaptive")
    again = turn_limits_admit(client=shop, conversation=conversation, trace=trace, mode="adaptive")
    assert first.allowance is not None and again.allowance is not None
    assert again.allowance.pk == first.allowance.pk  # a redelivered task: not held twice
    usage = VisitorUsage.objects.unscoped("test checks the database directly").get()
    assert (usage.tokens_reserved, usage.turns) == (settings.BILLING_TURN_TOKEN_RESERVE, 1)

    # its worker dies after spending 700 tokens; the visitor's next turn settles it
    ReasoningTrace.objects.unscoped("test checks the database directly").filter(pk=trace.pk).update(
        prompt_tokens=700
    )
    TurnAllowance.objects.unscoped("test checks the database directly").update(
        updated_at=timezone.now() - timedelta(hours=1)
    )
    other_conversation, other = _visitor_turn(shop, "v" * 32)
    nxt = turn_limits_admit(
        client=shop, conversation=other_conversation, trace=other, mode="adaptive"
    )
    usage.refresh_from_db()
    assert (usage.tokens_used, usage.tokens_reserved) == (700, settings.BILLING_TURN_TOKEN_RESERVE)
    turn_limits_commit(client=shop, limits=nxt, tokens=300)
    turn_limits_commit(client=shop, limits=nxt, tokens=300)  # twice: counted once
    usage.refresh_from_db()
    assert (usage.tokens_used, usage.tokens_reserved) == (1_000, 0)


def test_a_slow_worker_settled_as_dead_leaves_the_visitors_day_alone(shop, settings):
    """A worker so slow that the visitor's next turn settled its allowance as a dead worker's
    commits afterwards with the allowance it holds in memory: the row is not as it holds it any
    more, so the commit reads it locked, finds it settled and counts nothing twice."""
    from apps.billing.models import TurnAllowance, VisitorUsage
    from apps.billing.services.visitors import turn_limits_admit, turn_limits_commit

    limits(shop, visitor_daily_token_budget=100_000)
    conversation, slow = _visitor_turn(shop, "v" * 32)
    held = turn_limits_admit(client=shop, conversation=conversation, trace=slow, mode="adaptive")
    ReasoningTrace.objects.unscoped("test checks the database directly").filter(pk=slow.pk).update(
        prompt_tokens=300
    )
    TurnAllowance.objects.unscoped("test checks the database directly").update(
        updated_at=timezone.now() - timedelta(hours=1)
    )
    other_conversation, other = _visitor_turn(shop, "v" * 32)
    turn_limits_admit(client=shop, conversation=other_conversation, trace=other, mode="adaptive")
    usage = VisitorUsage.objects.unscoped("test checks the database directly").get()
    before = (usage.tokens_used, usage.tokens_reserved)
    assert before == (300, settings.BILLING_TURN_TOKEN_RESERVE)

    turn_limits_commit(client=shop, limits=held, tokens=300)

    usage.refresh_from_db()
    assert (usage.tokens_used, usage.tokens_reserved) == before
    settled = TurnAllowance.objects.unscoped("test checks the database directly").get(trace=slow)
    assert (settled.state, settled.tokens_committed) == ("committed", 300)


def test_an_empty_token_window_rate_turns_the_window_off(shop, settings):
    from apps.platform.throttling import token_window_charge, token_window_reached
    from tests.widget.test_widget_api import rates

    rates(settings, widget_tokens="", widget_address_tokens="")
    token_window_charge(client_id=shop.pk, conversation_id=1, visitor="v1", tokens=10**9)
    assert token_window_reached(client_id=shop.pk, conversation_id=1, visitor="v1") is None
    rates(settings, widget_tokens="10/hour", widget_address_tokens="10/hour")
    # nothing was charged
    assert token_window_reached(client_id=shop.pk, conversation_id=1, visitor="v1") is None


def test_a_visitors_turn_holds_their_row_only_for_its_last_statement(shop, settings):
    """Customers behind one office address write at once: each turn reserves and commits on the
    visitor's one row for the day, so the row is locked only by the transaction's last
    statement, never across round trips (as the monthly counter; test_budgets.py)."""
    from django.test.utils import CaptureQueriesContext

    from apps.billing.models import VisitorUsage
    from apps.billing.services.visitors import turn_limits_admit, turn_limits_commit

    limits(shop, visitor_daily_token_budget=100_000)
    conversation, trace = _visitor_turn(shop, "v" * 32)
    turn_limits_admit(client=shop, conversation=conversation, trace=trace, mode="adaptive")
    conversation, trace = _visitor_turn(shop, "v" * 32)  # the row exists: the common case
    with CaptureQueriesContext(connection) as admitting:
        admitted = turn_limits_admit(
            client=shop, conversation=conversation, trace=trace, mode="adaptive"
        )
    with CaptureQueriesContext(connection) as committing:
        turn_limits_commit(client=shop, limits=admitted, tokens=450)
    for captured in (admitting, committing):
        sqls = [q["sql"].upper() for q in captured.captured_queries]
        writes = [
            i for i, sql in enumerate(sqls) if "BILLING_VISITORUSAGE" in sql and "FOR UPDATE" in sql
        ]
        assert writes == [], sqls  # never locked by a read
        updates = [
            i for i, sql in enumerate(sqls) if sql.startswith('UPDATE "BILLING_VISITORUSAGE"')
        ]
        assert len(updates) == 1, sqls
        assert sqls[updates[0] + 1].startswith(("RELEASE SAVEPOINT", "COMMIT")), sqls
    usage = VisitorUsage.objects.unscoped("test checks the database directly").get()
    assert (usage.tokens_used, usage.tokens_reserved, usage.turns) == (
        450,
        settings.BILLING_TURN_TOKEN_RESERVE,
        2,
    )


def test_the_conversations_visitor_is_written_only_when_it_changes(shop):
    """Every widget message notes its visitor; the row is written when the visitor is new or
    another one, and left alone (no new row version) when the same visitor writes again."""
    from apps.billing.models import ConversationVisitor
    from apps.billing.services.visitors import conversation_visitor_record

    conversation, _ = conversation_create(client=shop)
    rows = ConversationVisitor.objects.for_client(shop)
    conversation_visitor_record(client=shop, conversation=conversation, visitor="a" * 32)
    first = rows.get(conversation=conversation)
    conversation_visitor_record(client=shop, conversation=conversation, visitor="a" * 32)
    assert rows.get(conversation=conversation).updated_at == first.updated_at
    conversation_visitor_record(client=shop, conversation=conversation, visitor="b" * 32)
    moved = rows.get(conversation=conversation)
    assert (moved.pk, moved.visitor) == (first.pk, "b" * 32)
    assert moved.updated_at > first.updated_at and moved.created_at == first.created_at
    assert rows.count() == 1
