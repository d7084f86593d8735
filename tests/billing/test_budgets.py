"""Monthly budgets (OWASP LLM10): reserve-then-commit on a locked counter, the hard limit (no LLM
call, a polite notice, escalation `usage_limit`), alerts at 80 % and 100 % once a month."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.core import mail
from django.db import connection, transaction
from django.db.models import F, Sum
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from apps.billing import periods
from apps.billing.models import (
    ReservationState,
    UsageAlert,
    UsageCounter,
    UsageRecord,
    UsageReservation,
)
from apps.billing.services.budgets import (
    UsageLimitReached,
    turn_budget_commit,
    turn_budget_reserve,
    usage_counter_reconcile,
)
from apps.conversations.models import Role
from apps.conversations.services import conversation_create, message_append
from apps.core.tenancy import tenant_scope
from apps.escalations.models import Escalation
from apps.reasoning.models import ReasoningTrace
from apps.reasoning.services import USAGE_LIMIT_TEXT, turn_process
from devtools.fake_llm import Fail, WithUsage
from tests.billing.conftest import Call, make_turn
from tests.support.shop import assess, make_shop

pytestmark = pytest.mark.django_db
TODAY = periods.today


def budget(client: Any, *, tokens: int = 0, turns: int = 0, cap: int = 0) -> None:
    plan = client.plan
    plan.monthly_token_budget, plan.monthly_turn_budget, plan.per_turn_token_cap = (
        tokens,
        turns,
        cap,
    )
    plan.save()
    client.refresh_from_db()


def open_trace(client: Any) -> ReasoningTrace:
    """A turn that has just been claimed: no calls yet."""
    conv, _ = conversation_create(client=client)
    message = message_append(client=client, conversation=conv, role=Role.USER, text="hi")
    return ReasoningTrace.objects.create(
        client=client, conversation=conv, user_message=message, mode="adaptive"
    )


def counter(client: Any) -> UsageCounter:
    return UsageCounter.objects.get(client=client, month=periods.month_start(TODAY()))


def replies_usage(prompt: int, completion: int = 0, text: str = "Hi!") -> WithUsage:
    return WithUsage(assess(response=text), prompt_tokens=prompt, completion_tokens=completion)


# -- reserve / commit ---------------------------------------------------------------------------


def test_a_plan_without_budgets_reserves_nothing(shop) -> None:
    assert turn_budget_reserve(client=shop, trace=open_trace(shop)) is None
    assert not UsageCounter.objects.unscoped("test checks the database directly").exists()


def test_reserve_holds_an_estimate_and_commit_swaps_it_for_the_actual_tokens(shop) -> None:
    budget(shop, tokens=100_000)
    trace = open_trace(shop)
    reservation = turn_budget_reserve(client=shop, trace=trace)
    assert reservation is not None
    c = counter(shop)
    assert (c.tokens_reserved, c.turns_reserved, c.tokens_used, c.turns_used) == (
        settings.BILLING_TURN_TOKEN_RESERVE,
        1,
        0,
        0,
    )
    turn_budget_commit(client=shop, reservation=reservation, tokens=1234, llm_calls=2)
    c = counter(shop)
    assert (c.tokens_reserved, c.turns_reserved, c.tokens_used, c.turns_used) == (0, 0, 1234, 1)
    # committing again (a retried task) changes nothing
    turn_budget_commit(client=shop, reservation=reservation, tokens=1234, llm_calls=2)
    assert counter(shop).tokens_used == 1234
    reservation.refresh_from_db()
    assert reservation.state == ReservationState.COMMITTED


def test_the_per_turn_cap_is_the_reserved_estimate(shop) -> None:
    budget(shop, tokens=100_000, cap=2500)
    reservation = turn_budget_reserve(client=shop, trace=open_trace(shop))
    assert reservation is not None and reservation.tokens_reserved == 2500


def test_reservations_of_running_turns_count_against_the_budget(shop) -> None:
    """used + reserved ≥ budget refuses: turns in flight can pass the budget by at most the
    one admitted just under it."""
    budget(shop, tokens=5000, cap=4000)
    turn_budget_reserve(client=shop, trace=open_trace(shop))  # 0 + 0 < 5000
    turn_budget_reserve(client=shop, trace=open_trace(shop))  # 0 + 4000 < 5000
    with pytest.raises(UsageLimitReached) as refused:
        turn_budget_reserve(client=shop, trace=open_trace(shop))  # 0 + 8000 ≥ 5000
    assert refused.value.metric == "tokens"
    assert "monthly token budget 5,000 reached" in refused.value.detail
    assert counter(shop).turns_reserved == 2


def test_the_turn_budget_is_exact_under_concurrency(shop) -> None:
    budget(shop, turns=2)
    turn_budget_reserve(client=shop, trace=open_trace(shop))
    turn_budget_reserve(client=shop, trace=open_trace(shop))
    with pytest.raises(UsageLimitReached) as refused:
        turn_budget_reserve(client=shop, trace=open_trace(shop))
    assert refused.value.metric == "turns"


def _statements(run: Any) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        run()
    return [q["sql"].upper() for q in captured.captured_queries]


def _counter_locked_for_last_statement_only(sqls: list[str]) -> None:
    """The month's counter is changed by one UPDATE and nothing but the end of the transaction
    follows it: no turn waits on that row for another turn's round trips."""
    touching = [i for i, sql in enumerate(sqls) if "BILLING_USAGECOUNTER" in sql]
    assert len(touching) == 1, sqls
    assert sqls[touching[0]].startswith("UPDATE"), sqls
    after = sqls[touching[0] + 1 :]
    assert all(s.startswith(("RELEASE SAVEPOINT", "COMMIT")) for s in after), after


def test_a_turn_holds_the_month_counter_only_for_its_last_statement(shop) -> None:
    """A hundred customers of one shop writing at once: each turn reserves and commits on the
    shop's one counter row, so the row is locked only by the transaction's last statement (it
    was locked across four round trips, and a flash sale queued its turns behind it)."""
    budget(shop, tokens=100_000)
    turn_budget_reserve(client=shop, trace=open_trace(shop))  # the month's counter exists
    trace = open_trace(shop)
    held: list[Any] = []
    sqls = _statements(lambda: held.append(turn_budget_reserve(client=shop, trace=trace)))
    _counter_locked_for_last_statement_only(sqls)
    sqls = _statements(
        lambda: turn_budget_commit(client=shop, reservation=held[0], tokens=900, llm_calls=1)
    )
    touching = [i for i, sql in enumerate(sqls) if "BILLING_USAGECOUNTER" in sql]
    assert sqls[touching[0]].startswith("UPDATE"), sqls
    assert sqls[touching[0] + 1].startswith(("RELEASE SAVEPOINT", "COMMIT")), sqls
    assert all(sqls[i].startswith("SELECT") for i in touching[1:])  # read back, unlocked
    c = counter(shop)
    assert (c.tokens_reserved, c.turns_reserved, c.tokens_used, c.turns_used) == (
        settings.BILLING_TURN_TOKEN_RESERVE,
        1,
        900,
        1,
    )


def test_a_taken_over_turn_keeps_its_reservation(shop) -> None:
    budget(shop, tokens=100_000)
    trace = open_trace(shop)
    first = turn_budget_reserve(client=shop, trace=trace)
    again = turn_budget_reserve(client=shop, trace=trace)  # a redelivered task, same turn
    assert first is not None and again is not None and again.pk == first.pk
    assert counter(shop).turns_reserved == 1
    assert UsageReservation.objects.unscoped("test checks the database directly").count() == 1


def test_a_turn_rerun_after_its_commit_adds_only_the_difference(shop) -> None:
    budget(shop, tokens=100_000)
    trace = open_trace(shop)
    reservation = turn_budget_reserve(client=shop, trace=trace)
    assert reservation is not None
    turn_budget_commit(client=shop, reservation=reservation, tokens=500, llm_calls=1)
    # the worker died before posting the reply; the turn is taken over and runs again
    rerun = turn_budget_reserve(client=shop, trace=trace)
    assert rerun is not None
    turn_budget_commit(client=shop, reservation=rerun, tokens=800, llm_calls=2)
    c = counter(shop)
    assert (c.tokens_used, c.turns_used, c.tokens_reserved, c.turns_reserved) == (800, 1, 0, 0)


def test_a_dead_workers_reservation_is_settled_by_the_next_turn(shop) -> None:
    budget(shop, tokens=100_000)
    dead = open_trace(shop)
    turn_budget_reserve(client=shop, trace=dead)
    ReasoningTrace.objects.unscoped("test checks the database directly").filter(pk=dead.pk).update(
        llm_calls=1, prompt_tokens=300
    )
    UsageReservation.objects.filter(trace=dead).update(
        updated_at=timezone.now() - timedelta(hours=1)
    )
    turn_budget_reserve(client=shop, trace=open_trace(shop))
    c = counter(shop)
    assert (c.tokens_used, c.turns_used, c.turns_reserved) == (300, 1, 1)
    assert UsageReservation.objects.get(trace=dead).state == ReservationState.COMMITTED


def test_a_slow_worker_settled_as_dead_commits_nothing_twice(shop) -> None:
    """A worker so slow that the next turn settled its reservation as a dead worker's commits
    afterwards with the reservation it holds in memory: the row is not as it holds it any
    more, so the commit reads it locked, finds it committed and leaves the counter alone."""
    budget(shop, tokens=100_000)
    slow = open_trace(shop)
    held = turn_budget_reserve(client=shop, trace=slow)
    assert held is not None and held.state == ReservationState.RESERVED
    ReasoningTrace.objects.unscoped("test checks the database directly").filter(pk=slow.pk).update(
        llm_calls=1, prompt_tokens=300
    )
    UsageReservation.objects.filter(trace=slow).update(
        updated_at=timezone.now() - timedelta(hours=1)
    )
    turn_budget_reserve(client=shop, trace=open_trace(shop))  # settles the "dead" one
    before = counter(shop)
    assert (before.tokens_used, before.turns_used, before.turns_reserved) == (300, 1, 1)

    returned = turn_budget_commit(client=shop, reservation=held, tokens=300, llm_calls=1)

    after = counter(shop)
    assert (after.tokens_used, after.turns_used, after.tokens_reserved, after.turns_reserved) == (
        before.tokens_used,
        before.turns_used,
        before.tokens_reserved,
        before.turns_reserved,
    )
    assert returned.state == ReservationState.COMMITTED


def test_the_counter_starts_from_the_months_usage_so_far(shop) -> None:
    make_turn(
        shop, day=TODAY(), hour=0, calls=[Call("assess", 700, 100), Call("critique", 150, 50)]
    )
    budget(shop, tokens=100_000)
    turn_budget_reserve(client=shop, trace=open_trace(shop))
    c = counter(shop)
    assert (c.tokens_used, c.turns_used) == (1000, 1)


def test_reconcile_recounts_finished_turns_and_leaves_running_ones_alone(shop) -> None:
    budget(shop, tokens=100_000)
    running = open_trace(shop)
    turn_budget_reserve(client=shop, trace=running)
    ReasoningTrace.objects.unscoped("test checks the database directly").filter(
        pk=running.pk
    ).update(llm_calls=1, prompt_tokens=50)
    make_turn(shop, day=TODAY(), hour=0, calls=[Call("assess", 400, 100)])  # missed by it
    UsageCounter.objects.filter(client=shop).update(tokens_used=F("tokens_used") + 7)  # drift
    reconciled = usage_counter_reconcile(client=shop, month=periods.month_start(TODAY()))
    assert (reconciled.tokens_used, reconciled.turns_used, reconciled.turns_reserved) == (500, 1, 1)


# -- the hard limit in the pipeline ----------------------------------------------------------


def test_at_the_hard_limit_no_request_reaches_the_model_and_the_turn_escalates(chat, llm) -> None:
    make_turn(chat.client, day=TODAY(), hour=0, calls=[Call("assess", 900, 100)])
    budget(chat.client, tokens=1000)
    replies = chat.say("Where is my order?")
    assert llm.requests == []
    assert [(r.kind, r.text) for r in replies] == [("handoff", USAGE_LIMIT_TEXT)]
    escalation = Escalation.objects.unscoped("test checks the database directly").get()
    assert escalation.reason == "usage_limit"
    assert "monthly token budget 1,000 reached" in escalation.detail
    trace = ReasoningTrace.objects.unscoped("test checks the database directly").get(
        user_message__text="Where is my order?"
    )
    assert trace.llm_calls == 0 and trace.escalated
    assert UsageRecord.objects.filter(trace=trace).count() == 0


def test_the_turn_budget_stops_the_assistant_too(chat, llm) -> None:
    budget(chat.client, turns=1)
    llm.script("assess", assess(response="Hi!"))
    chat.say("hello")
    replies = chat.say("hello again")
    assert len(llm.requests) == 1
    assert replies[-1].text == USAGE_LIMIT_TEXT
    assert (
        Escalation.objects.unscoped("test checks the database directly").get().reason
        == "usage_limit"
    )


def test_a_failed_turn_releases_its_reservation(chat, llm) -> None:
    budget(chat.client, tokens=100_000)
    llm.script("assess", Fail(500), Fail(500))
    chat.say("hello")
    assert (
        Escalation.objects.unscoped("test checks the database directly").get().reason
        == "llm_failure"
    )
    c = counter(chat.client)
    assert (c.tokens_reserved, c.turns_reserved, c.tokens_used, c.turns_used) == (0, 0, 0, 0)
    assert (
        UsageReservation.objects.unscoped("test checks the database directly").get().state
        == ReservationState.COMMITTED
    )


def test_tokens_of_invalid_replies_are_committed(chat, llm) -> None:
    budget(chat.client, tokens=100_000)
    llm.script(
        "assess",
        WithUsage("not json", prompt_tokens=300, completion_tokens=20),
        WithUsage("still not json", prompt_tokens=300, completion_tokens=20),
    )
    chat.say("hello")
    spent = UsageRecord.objects.unscoped("test checks the database directly").aggregate(
        p=Sum("prompt_tokens"), c=Sum("completion_tokens")
    )
    assert spent == {"p": 600, "c": 40}
    assert counter(chat.client).tokens_used == 640
    assert counter(chat.client).tokens_reserved == 0


def test_committed_usage_equals_the_usage_records(chat, llm) -> None:
    budget(chat.client, tokens=1_000_000)
    llm.script("assess", assess(response="Hi"), assess(response="Sure"))
    chat.say("hello")
    chat.say("and another thing")
    spent = UsageRecord.objects.unscoped("test checks the database directly").aggregate(
        p=Sum("prompt_tokens"), c=Sum("completion_tokens")
    )
    c = counter(chat.client)
    assert c.tokens_used == spent["p"] + spent["c"]
    assert c.turns_used == 2 and c.tokens_reserved == 0


# -- alerts ----------------------------------------------------------------------------------


def test_alerts_fire_at_80_and_100_percent_once_each(chat, llm) -> None:
    budget(chat.client, tokens=1000)
    llm.script("assess", replies_usage(800))
    chat.say("one")  # 80 %
    assert [m.subject for m in mail.outbox] == [
        f"[GuideDesk] {chat.client.name}: 80% of the monthly usage budget"
    ]
    assert mail.outbox[0].to == [chat.client.support_email]
    assert "800 of 1,000 tokens" in mail.outbox[0].body

    llm.script("assess", replies_usage(50))
    chat.say("two")  # 85 %: nothing new
    assert len(mail.outbox) == 1

    llm.script("assess", replies_usage(200))
    chat.say("three")  # 105 %
    assert len(mail.outbox) == 2
    assert mail.outbox[1].subject.endswith("monthly usage limit reached")
    assert "makes no more AI calls" in mail.outbox[1].body

    before = len(llm.requests)
    chat.say("four")  # refused: the limit was reached, the 100 % alert already went out
    assert len(llm.requests) == before
    assert len([m for m in mail.outbox if "usage" in m.subject]) == 2
    alerts = list(
        UsageAlert.objects.unscoped("test checks the database directly")
        .order_by("threshold")
        .values_list("threshold", "used")
    )
    assert alerts == [(80, 800), (100, 1050)]
    assert all(
        a.emailed_at for a in UsageAlert.objects.unscoped("test checks the database directly").all()
    )


def test_jumping_past_both_thresholds_sends_one_mail_and_stores_both(chat, llm) -> None:
    budget(chat.client, tokens=1000)
    llm.script("assess", replies_usage(1200))
    chat.say("one")
    assert [m.subject for m in mail.outbox] == [
        f"[GuideDesk] {chat.client.name}: monthly usage limit reached"
    ]
    assert set(
        UsageAlert.objects.unscoped("test checks the database directly").values_list(
            "threshold", flat=True
        )
    ) == {80, 100}


def test_a_refusal_fires_the_100_percent_alert_when_it_has_not_fired(chat, llm) -> None:
    """Reservations of running turns can refuse a turn before `used` reaches the budget; the
    client is told then."""
    budget(chat.client, tokens=5000, cap=4000)
    held = open_trace(chat.client)
    turn_budget_reserve(client=chat.client, trace=held)
    turn_budget_reserve(client=chat.client, trace=open_trace(chat.client))  # 8,000 held
    chat.say("one")  # refused: 0 used + 8,000 reserved ≥ 5,000
    chat.say("two")  # refused again: no second alert
    assert llm.requests == []
    assert list(
        UsageAlert.objects.unscoped("test checks the database directly").values_list(
            "threshold", "metric"
        )
    ) == [(100, "tokens")]
    assert len([m for m in mail.outbox if "limit reached" in m.subject]) == 1


def test_one_turn_over_the_turn_budget_fires_once(chat, llm) -> None:
    budget(chat.client, turns=1)
    llm.script("assess", assess(response="Hi"))
    chat.say("one")  # 100 % of the turn budget after this turn
    chat.say("two")  # refused
    chat.say("three")  # refused again
    assert len(llm.requests) == 1
    assert set(
        UsageAlert.objects.unscoped("test checks the database directly").values_list(
            "threshold", flat=True
        )
    ) == {80, 100}
    assert len([m for m in mail.outbox if "limit reached" in m.subject]) == 1


def test_alerts_of_one_client_never_reach_another(shop, llm, webhook) -> None:
    from tests.support.shop import Chat  # noqa: F401

    other = make_shop("adaptive", webhook.url(), slug="other")
    budget(other, tokens=1000)
    make_turn(other, day=TODAY(), hour=0, calls=[Call("assess", 990, 10)])
    with pytest.raises(UsageLimitReached):
        turn_budget_reserve(client=other, trace=open_trace(other))
    assert not UsageAlert.objects.filter(client=shop).exists()
    assert UsageAlert.objects.get(client=other).threshold == 100


# -- concurrency (PostgreSQL row locks) ----------------------------------------------------------


def _wait_for_lock_waiters(count: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            # Activity is snapshotted per transaction and this one holds the lock: refresh it.
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            row = cursor.fetchone()
            if row and row[0] >= count:
                return
            time.sleep(0.01)
    raise AssertionError(f"fewer than {count} sessions ended up waiting on a lock")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("limit", ["tokens", "turns"])
def test_two_concurrent_turns_at_the_edge_of_the_budget_only_one_gets_through(
    llm, limit: str
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip(
            "needs PostgreSQL row locks (select_for_update is a no-op on SQLite); CI runs it "
            "with DATABASE_URL=postgres://…"
        )
    client = make_shop("adaptive", "http://127.0.0.1:9/hook", slug="edge")
    make_turn(client, day=TODAY(), hour=0, calls=[Call("assess", 9_000, 999)])
    if limit == "tokens":
        budget(client, tokens=10_000, cap=2_000)  # 9,999 used: room for one more turn
    else:
        budget(client, turns=2)  # 1 used: room for one more turn
    usage_counter_reconcile(client=client, month=periods.month_start(TODAY()))  # the row exists
    messages = []
    for text in ("first", "second"):
        conv, _ = conversation_create(client=client)
        messages.append(message_append(client=client, conversation=conv, role=Role.USER, text=text))

    finished = threading.Event()

    def slow_model(request: Any) -> dict[str, Any]:
        # The admitted turn holds its reservation while "thinking" until the other turn has
        # finished; if both were admitted, both wait here and both calls reach the server.
        finished.wait(3)
        return assess(response="Hi!")

    llm.default("assess", slow_model)
    errors: list[BaseException] = []

    def run(message_id: int) -> None:
        try:
            with tenant_scope(client.pk):
                turn_process(message_id=message_id)
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            finished.set()
            connection.close()

    # Force the race: hold this month's counter row until both turns wait on the database,
    # then let them go at once. With the row lock they queue and the second sees the first's
    # reservation; without it both would read the same numbers and both be admitted.
    threads = [threading.Thread(target=run, args=(m.pk,)) for m in messages]
    with transaction.atomic():
        UsageCounter.objects.select_for_update().get(client=client)
        for thread in threads:
            thread.start()
        _wait_for_lock_waiters(2)
    for thread in threads:
        thread.join(20)
    assert errors == []
    assert len(llm.requests) == 1
    assert list(
        Escalation.objects.unscoped("test checks the database directly").values_list(
            "reason", flat=True
        )
    ) == ["usage_limit"]
    c = counter(client)
    assert (c.tokens_reserved, c.turns_reserved) == (0, 0)
    assert c.turns_used == 2
