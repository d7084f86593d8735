"""The fleet's turn slots (apps/platform/slots.py) against a real Redis: work-conserving (one tenant
alone uses the idle fleet), fair (a newcomer always gets a slot while others flood), live turns
before playground runs, at most PLAYGROUND_RUNS_PER_CLIENT runs per tenant, parked jobs run in
order by the thread that frees a slot — and a real turn goes through it end to end.

The tests use the Redis the suite was given (CELERY_BROKER_URL, e.g. redis://127.0.0.1:6379/7)
and skip without one; they only touch the scheduler's keys (`guidedesk:sched:*`)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from apps.conversations.models import Message
from apps.conversations.services import conversation_create
from apps.platform import slots
from apps.reasoning import tasks
from apps.reasoning.services import handle_turn
from tests.support.broker import NEEDS_REDIS, REDIS_URL
from tests.support.shop import assess
from tests.support.slots import slots_clear

pytestmark = NEEDS_REDIS
OLD_FIXED_CAP = 25  # main's TURNS_PER_CLIENT_MAX


@pytest.fixture
def fleet(settings: Any) -> Iterator[None]:
    """Two worker processes of 50 threads each: capacity 100, reserve 10."""
    settings.SLOTS_REDIS_URL = REDIS_URL
    settings.TURN_SLOTS_CAPACITY = 0
    settings.TURN_SLOTS_RESERVE_PERCENT = 10
    settings.TURNS_PER_CLIENT_MAX = 0
    settings.PLAYGROUND_RUNS_PER_CLIENT = 2
    slots_clear()
    slots.worker_register(worker_id="w1", threads=50)
    slots.worker_register(worker_id="w2", threads=50)
    yield
    slots_clear()


def flood(tenant: str, count: int, kind: str = slots.LIVE) -> list[slots.Grant | None]:
    return [slots.submit(tenant=tenant, kind=kind, job=f"{tenant}-{n}") for n in range(count)]


def running(grants: list[slots.Grant | None]) -> list[slots.Grant]:
    return [g for g in grants if g is not None]


def test_capacity_is_the_registered_worker_threads(fleet):
    state = slots.status()
    assert state is not None and (state.capacity, state.reserve) == (100, 10)
    slots.worker_unregister(worker_id="w2")
    assert slots.status().capacity == 50


def test_one_tenant_alone_uses_the_idle_fleet_beyond_the_old_fixed_cap(fleet):
    grants = flood("1", 100)
    started = running(grants)
    # 90 = capacity − reserve run at once (main stopped at 25 and retried the rest later)
    assert len(started) == 90 > OLD_FIXED_CAP
    assert [g.job for g in started] == [f"1-{n}" for n in range(90)]
    assert slots.status().waiting == 10


def test_a_newcomer_gets_a_slot_at_once_while_one_tenant_floods(fleet):
    flood("1", 150)
    grant = slots.submit(tenant="2", kind=slots.LIVE, job="2-0")
    assert grant is not None and grant.job == "2-0"


def _flooding(tenants: list[str], each: int) -> dict[str, list[slots.Grant]]:
    """`tenants` flood the fleet, their customers arriving interleaved."""
    held: dict[str, list[slots.Grant]] = {t: [] for t in tenants}
    for n in range(each):
        for tenant in tenants:
            grant = slots.submit(tenant=tenant, kind=slots.LIVE, job=f"{tenant}-{n}")
            if grant is not None:
                held[grant.tenant].append(grant)
    return held


@pytest.mark.parametrize("flooding", [4, 5, 10])
def test_with_tenants_flooding_the_reserve_holds_for_a_newcomer(fleet, flooding):
    """Tenants that already run turns stop at capacity − reserve together (the old script let
    n tenants at capacity ÷ n each fill every slot, the reserve included), so a newcomer's
    first turn — and a second newcomer's — runs at once, not after a flooding turn ends."""
    tenants = [str(n) for n in range(1, flooding + 1)]
    held = _flooding(tenants, 60)
    assert sum(len(g) for g in held.values()) == 90  # capacity − reserve
    counts = sorted(len(g) for g in held.values())
    assert counts[-1] - counts[0] <= 1  # shared evenly
    # a flooding turn ends: the fleet is below capacity − reserve, the flood takes the slot
    refill = slots.release(held["1"].pop())
    assert refill is not None and refill.tenant in tenants
    assert slots.status().running == 90
    for newcomer in ("new-1", "new-2", "new-3"):
        grant = slots.submit(tenant=newcomer, kind=slots.LIVE, job=f"{newcomer}-0")
        assert grant is not None and grant.job == f"{newcomer}-0"
    assert slots.status().running == 93


def test_a_newcomer_takes_no_more_than_its_share_of_the_reserve(fleet):
    _flooding(["1", "2", "3", "4"], 60)
    first = running(flood("new", 10))
    assert len(first) == 2  # 10 reserve slots ÷ 5 tenants running turns
    assert running(flood("other", 3))  # the next newcomer still finds room
    assert slots.status().running < 100


def test_parked_turns_of_a_tenant_run_in_arrival_order(fleet, settings):
    settings.TURN_SLOTS_CAPACITY = 3
    settings.TURN_SLOTS_RESERVE_PERCENT = 0
    grants = flood("1", 6)
    first = running(grants)
    assert [g.job for g in first] == ["1-0", "1-1", "1-2"]
    order = []
    for grant in first:
        nxt = slots.release(grant)
        assert nxt is not None
        order.append(nxt.job)
    assert order == ["1-3", "1-4", "1-5"]


def test_a_playground_run_never_takes_a_slot_a_live_turn_needs(fleet):
    flood("1", 90)  # live turns up to capacity − reserve
    assert slots.submit(tenant="2", kind=slots.PLAYGROUND, job="run-1") is None  # waits
    live = slots.submit(tenant="2", kind=slots.LIVE, job="2-0")
    assert live is not None and live.kind == slots.LIVE  # the reserve is the live turns'


def test_a_free_slot_goes_to_a_waiting_live_turn_before_a_waiting_playground_run(fleet, settings):
    settings.TURN_SLOTS_CAPACITY = 4
    settings.TURN_SLOTS_RESERVE_PERCENT = 25  # reserve 1: capacity − reserve = 3
    held = running(flood("1", 3))
    assert slots.submit(tenant="2", kind=slots.PLAYGROUND, job="run-1") is None
    reserve = slots.submit(tenant="2", kind=slots.LIVE, job="2-0")
    assert reserve is not None
    assert slots.submit(tenant="3", kind=slots.LIVE, job="3-0") is None  # the fleet is full
    nxt = slots.release(held[0])
    assert nxt is not None and (nxt.kind, nxt.job) == (slots.LIVE, "3-0")
    # not while live turns fill capacity − reserve; as soon as they leave room below it, yes
    assert slots.release(nxt) is None
    after = slots.release(reserve)
    assert after is not None and (after.kind, after.job) == (slots.PLAYGROUND, "run-1")


def test_a_tenant_runs_at_most_two_playground_runs_at_once(fleet):
    mine = flood("1", 3, kind=slots.PLAYGROUND)
    assert [g is not None for g in mine] == [True, True, False]
    theirs = slots.submit(tenant="2", kind=slots.PLAYGROUND, job="2-run")
    assert theirs is not None  # another tenant's bound is its own
    nxt = slots.release(running(mine)[0])
    assert nxt is not None and nxt.job == "1-2"


def test_playground_runs_hold_at_most_a_quarter_of_the_fleet(fleet, settings):
    settings.TURN_SLOTS_CAPACITY = 8
    settings.TURN_SLOTS_RESERVE_PERCENT = 0
    first = slots.submit(tenant="1", kind=slots.PLAYGROUND, job="1-run")
    second = slots.submit(tenant="2", kind=slots.PLAYGROUND, job="2-run")
    assert first is not None and second is not None
    assert slots.submit(tenant="3", kind=slots.PLAYGROUND, job="3-run") is None  # 8 ÷ 4 = 2
    assert len(running(flood("4", 6))) == 6  # the other six slots stay the live turns'


def test_a_dead_workers_slots_expire_after_the_lease(fleet, settings):
    settings.TURN_SLOTS_CAPACITY = 2
    settings.TURN_SLOTS_RESERVE_PERCENT = 0
    settings.REASONING_TURN_LEASE_SECONDS = 0.5
    running(flood("1", 2))  # never released: their worker died
    assert slots.submit(tenant="2", kind=slots.LIVE, job="2-0") is None
    time.sleep(0.6)
    assert slots.pick() is not None  # the parked turn gets a slot


def test_without_redis_every_job_runs_at_once(settings):
    settings.SLOTS_REDIS_URL = ""
    grant = slots.submit(tenant="1", kind=slots.LIVE, job="1-0")
    assert grant is not None and grant.member == "" and slots.release(grant) is None


@pytest.mark.django_db
def test_a_parked_turn_is_answered_by_the_thread_that_frees_a_slot(fleet, settings, request):
    """A real turn (real pipeline, the fake OpenAI-compatible server): with the fleet full it
    waits parked, its Celery task returns at once, and the thread whose job ends runs it."""
    store, model = request.getfixturevalue("shop"), request.getfixturevalue("llm")
    settings.TURN_SLOTS_CAPACITY = 1
    settings.TURN_SLOTS_RESERVE_PERCENT = 0
    other = slots.submit(tenant="999999", kind=slots.LIVE, job="0:0:0.000")
    assert other is not None  # another tenant's turn holds the only slot
    conv = conversation_create(client=store)[0]
    message = handle_turn(client=store, conversation=conv, text="When do you ship?")
    model.script("assess", assess(response="We ship within 2 days."))

    # the worker's task (run as a worker calls it): parked, returns at once
    tasks.process_turn(message.pk, client_id=store.pk)
    assert not Message.objects.filter(conversation=conv, role="assistant").exists()
    assert slots.status().waiting == 1

    nxt = slots.release(other)  # the other turn ends; its thread takes the parked turn
    assert nxt is not None and nxt.tenant == str(store.pk)
    assert slots.run_granted(nxt) == 1
    replies = Message.objects.filter(conversation=conv, role="assistant").visible()
    assert [m.text for m in replies] == ["We ship within 2 days."]
    assert slots.status().running == 0


@pytest.mark.django_db
def test_queueing_a_turn_parks_it_and_the_message_only_wakes_a_thread(
    fleet, settings, request, monkeypatch
):
    """What the web process does on a customer's message (TurnTask.apply_async): the turn is
    parked in the scheduler and the Celery message carries no turn, only `parked`; the worker
    thread that takes the message runs whichever parked turn should run now."""
    from celery.app.task import Task

    store, model = request.getfixturevalue("shop"), request.getfixturevalue("llm")
    published: list[tuple[Any, Any]] = []
    monkeypatch.setattr(  # Celery's publish (not ours): keep the message instead of sending it
        Task,
        "apply_async",
        lambda self, args=None, kwargs=None, **o: published.append((args, kwargs)),
    )
    monkeypatch.setitem(tasks.process_turn.app.conf, "task_always_eager", False)
    conv = conversation_create(client=store)[0]
    message = handle_turn(client=store, conversation=conv, text="When do you ship?")

    tasks.process_turn.delay(message.pk)
    assert published == [((), {"parked": True})]
    assert slots.status().waiting == 1

    model.script("assess", assess(response="We ship within 2 days."))
    tasks.process_turn(**published[0][1])  # the worker thread that takes the message
    replies = Message.objects.filter(conversation=conv, role="assistant").visible()
    assert [m.text for m in replies] == ["We ship within 2 days."]
    assert (slots.status().waiting, slots.status().running) == (0, 0)


@pytest.mark.django_db
def test_a_playground_run_waits_for_a_slot_live_turns_leave_idle(fleet, settings, client_a):
    """The console's run goes through the same slots: with the only slot held by a live turn
    it waits (not started, nothing spent), and the thread whose turn ends runs it."""
    from apps.playground.models import PlaygroundRun, RunStatus
    from apps.playground.services import playground_run_create
    from apps.playground.tasks import execute_run

    settings.TURN_SLOTS_CAPACITY = 1
    settings.TURN_SLOTS_RESERVE_PERCENT = 0
    settings.OPENAI_API_KEY = ""  # the offline demo model
    live = slots.submit(tenant=str(client_a.pk), kind=slots.LIVE, job="0:0:0.000")
    assert live is not None
    run = playground_run_create(client=client_a, question="Hi", mode="adaptive", enqueue=False)

    # the worker's task: no slot a live turn leaves idle, so it waits
    execute_run(run.pk, client_id=client_a.pk)
    run.refresh_from_db()
    assert (run.status, run.trace.model, run.trace.llm_calls) == (RunStatus.RUNNING, "", 0)

    nxt = slots.release(live)
    assert nxt is not None and (nxt.kind, nxt.job) == (slots.PLAYGROUND, str(run.pk))
    slots.run_granted(nxt)
    assert (
        PlaygroundRun.objects.unscoped("test checks the database directly").get(pk=run.pk).status
        == RunStatus.DONE
    )


# --------------------------------------------------------------------- the background lane


@pytest.fixture
def background(fleet, settings):
    settings.KNOWLEDGE_SYNCS_PER_CLIENT = 2
    settings.BACKGROUND_SLOTS_PERCENT = 10
    slots.set_serves_live(True)
    yield
    slots.set_serves_live(True)


def test_background_jobs_hold_their_share_and_two_per_tenant(background):
    mine = [slots.acquire(tenant="1", job=f"sync:{n}") for n in range(3)]
    assert [g is not None and g.kind == slots.BACKGROUND for g in mine] == [True, True, False]
    others = [slots.acquire(tenant=str(t), job=f"sync:{t}") for t in range(2, 12)]
    assert len(running(others)) == 8  # 10 % of 100 slots, two of them tenant 1's
    assert slots.status().waiting == 0  # refused, not parked: the task asks again later


def test_while_background_jobs_run_a_live_turn_is_admitted_at_once(background):
    jobs = running([slots.acquire(tenant=str(t), job=f"sync:{t}") for t in range(1, 6)])
    assert len(jobs) == 5
    held = _flooding(["7", "8"], 60)  # live turns take every slot left below the reserve
    assert sum(len(g) for g in held.values()) == 85
    # background work never takes a slot a waiting live turn could use: a sync that ends hands
    # its slot to a parked turn, and a new sync is refused
    nxt = slots.release(jobs[0])
    assert nxt is not None and nxt.kind == slots.LIVE
    assert slots.acquire(tenant="1", job="sync:again") is None
    newcomer = slots.submit(tenant="9", kind=slots.LIVE, job="9-0")  # the reserve is free
    assert newcomer is not None and newcomer.kind == slots.LIVE


def test_a_background_job_waits_while_a_parked_live_turn_could_run(background, settings):
    settings.TURN_SLOTS_CAPACITY = 4
    settings.TURN_SLOTS_RESERVE_PERCENT = 0
    assert slots.park(tenant="1", kind=slots.LIVE, job="1-0")  # no thread has asked yet
    assert slots.acquire(tenant="2", job="sync:1") is None
    assert slots.pick() is not None
    assert slots.acquire(tenant="2", job="sync:1") is not None


def test_run_background_runs_the_parked_turn_that_its_slot_frees(background, settings):
    settings.TURN_SLOTS_CAPACITY = 2
    settings.TURN_SLOTS_RESERVE_PERCENT = 0
    ran: list[str] = []
    slots.register_runner(slots.PLAYGROUND, ran.append)
    other = slots.submit(tenant="3", kind=slots.LIVE, job="3-0")
    assert other is not None

    def sync() -> str:  # while the sync runs, a playground run arrives and finds no slot
        assert slots.submit(tenant="4", kind=slots.PLAYGROUND, job="run-1") is None
        return "synced"

    assert slots.run_background(tenant="2", job="sync:1", work=sync) == (True, "synced")
    assert ran == ["run-1"]  # the sync's thread ran it next
    slots.release(other)
    assert slots.status().running == 0


def test_a_background_only_worker_runs_its_jobs_without_a_slot(background, settings):
    settings.TURN_SLOTS_CAPACITY = 1
    settings.TURN_SLOTS_RESERVE_PERCENT = 0
    assert slots.submit(tenant="3", kind=slots.LIVE, job="3-0") is not None  # the fleet is full
    assert slots.run_background(tenant="2", job="sync:1", work=lambda: 1) == (False, None)
    slots.set_serves_live(False)
    assert slots.run_background(tenant="2", job="sync:1", work=lambda: 1) == (True, 1)
    assert slots.status().running == 1
