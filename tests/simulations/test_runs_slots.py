"""Simulation jobs in the fleet's slots (apps/platform/slots.py) against a real Redis: they come
after live turns and playground runs, hold at most SIMULATION_SLOTS_PERCENT of the fleet and at most
SIMULATION_JOBS_PER_CLIENT per tenant. Skipped without Redis (CELERY_BROKER_URL=redis://…)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from apps.platform import slots
from tests.support.broker import NEEDS_REDIS, REDIS_URL
from tests.support.slots import slots_clear

pytestmark = NEEDS_REDIS


@pytest.fixture
def fleet(settings: Any) -> Iterator[None]:
    settings.SLOTS_REDIS_URL = REDIS_URL
    settings.TURN_SLOTS_CAPACITY = 4
    settings.TURN_SLOTS_RESERVE_PERCENT = 25  # reserve 1: capacity − reserve = 3
    settings.TURNS_PER_CLIENT_MAX = 0
    settings.PLAYGROUND_RUNS_PER_CLIENT = 2
    settings.SIMULATION_JOBS_PER_CLIENT = 8
    settings.SIMULATION_SLOTS_PERCENT = 50
    slots_clear()
    yield
    slots_clear()


def test_a_free_slot_goes_to_live_then_playground_then_simulation(fleet):
    held = [slots.submit(tenant="1", kind=slots.LIVE, job=f"1-{n}") for n in range(3)]
    assert all(g is not None for g in held)
    assert slots.submit(tenant="2", kind=slots.SIMULATION, job="case-1") is None
    assert slots.submit(tenant="2", kind=slots.PLAYGROUND, job="run-1") is None
    assert slots.submit(tenant="3", kind=slots.LIVE, job="3-0") is not None  # the reserve
    assert slots.submit(tenant="4", kind=slots.LIVE, job="4-0") is None  # the fleet is full
    after_live = slots.release(held[0])
    assert after_live is not None and after_live.kind == slots.LIVE
    assert slots.release(held[1]) is None  # live turns still fill capacity − reserve
    first = slots.release(after_live)
    assert first is not None and (first.kind, first.job) == (slots.PLAYGROUND, "run-1")
    second = slots.release(held[2])
    assert second is not None and (second.kind, second.job) == (slots.SIMULATION, "case-1")


def test_simulation_jobs_hold_at_most_their_share_of_the_fleet(fleet, settings):
    settings.TURN_SLOTS_CAPACITY = 8
    settings.TURN_SLOTS_RESERVE_PERCENT = 0
    grants = [slots.submit(tenant="1", kind=slots.SIMULATION, job=f"c-{n}") for n in range(6)]
    assert [g is not None for g in grants] == [True] * 4 + [False] * 2  # 50 % of 8
    live = [slots.submit(tenant="2", kind=slots.LIVE, job=f"2-{n}") for n in range(4)]
    assert all(g is not None for g in live)  # the other half stays the live turns'


def test_a_tenant_runs_at_most_its_simulation_jobs_at_once(fleet, settings):
    settings.TURN_SLOTS_CAPACITY = 20
    settings.SIMULATION_JOBS_PER_CLIENT = 2
    mine = [slots.submit(tenant="1", kind=slots.SIMULATION, job=f"1-{n}") for n in range(3)]
    assert [g is not None for g in mine] == [True, True, False]
    assert slots.submit(tenant="2", kind=slots.SIMULATION, job="2-0") is not None
    nxt = slots.release(mine[0])
    assert nxt is not None and nxt.job == "1-2"
