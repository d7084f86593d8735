"""The fleet's turn slots, shared by every worker process through Redis: a work-conserving, fair
scheduler for live turns and, at lower priorities, playground runs, simulation jobs and
background jobs (knowledge syncs).

*Capacity* is the fleet's worker threads: each worker process that runs turns (it consumes the
default queue) registers its thread count in Redis and renews it every few seconds
(`worker_register`, started from the worker's `worker_ready` signal); `TURN_SLOTS_CAPACITY`
overrides the sum. One slot = one thread running one job.

*Admission* (one Lua script, atomic across the fleet; C = capacity, R = reserve =
`TURN_SLOTS_RESERVE_PERCENT` of C, default 10 %):
- a live turn runs at once while the fleet holds fewer than C − R slots and its tenant holds
  fewer than C − R (`TURNS_PER_CLIENT_MAX` > 0 adds a fixed cap): a tenant alone uses C − R;
- the last R slots go only to a tenant holding fewer live slots than its share of the reserve
  (R ÷ tenants running turns, the asking tenant counted; at least 1). Tenants that already run
  their share stop at C − R slots together, however many they are, so a tenant that runs no
  turn (a newcomer) always finds a free slot while fewer than R newcomers arrive at once;
- a playground run takes a slot only when no live turn could use it: the fleet is below
  C − R and no admissible live turn waits; playground runs hold less than a quarter of the
  capacity (a run is long: live bursts must find the fleet free); and its tenant runs fewer
  than `PLAYGROUND_RUNS_PER_CLIENT` runs;
- a simulation job (one case run, apps/simulations) comes next: it takes a slot only when no
  live turn and no playground run could use it, under the same fleet condition; simulation jobs
  hold at most `SIMULATION_SLOTS_PERCENT` of the capacity (default 50 %) and its tenant runs
  fewer than `SIMULATION_JOBS_PER_CLIENT` of them;
- a background job (a knowledge sync) comes last, and only in a worker that also runs turns
  (one started without `-Q`): it takes a slot (`acquire`) only when no live turn, playground run
  or simulation job waiting could use it, under the same fleet condition; background jobs hold
  at most `BACKGROUND_SLOTS_PERCENT` of the capacity (default 10 %), a tenant at most
  `KNOWLEDGE_SYNCS_PER_CLIENT`. A background job is never parked: refused, its task asks again
  later. A worker of the `background` queue alone runs its jobs on its own threads, no slot.

A job that cannot run now is *parked* in its tenant's FIFO list in Redis and its Celery task
returns at once (its thread is free for other tenants' work). Queued turns are parked by the
web process as it sends their task (`park`), so the scheduler sees every waiting turn, not only
those a worker thread has fetched from the broker; the task then just wakes a thread.
Whenever a job ends, the thread that ran it takes the next admissible parked job — live before
playground before simulation, the tenant holding fewest slots first, first come first served
within a tenant — and runs it right away: no Celery countdown, no polling. Each worker's
heartbeat (every `HEARTBEAT_SECONDS`) also asks a free thread to run parked work that became
admissible without a job ending (e.g. a dead worker's slots expired), and the sweeper still
answers any turn whose job was lost.

A slot is a member of a sorted set scored by when it was taken; slots older than the lease (a
worker that died mid-job) stop counting. Without Redis (the demo runs turns in-process) every job
runs at once. A Redis error runs the job at once too: fairness must never stop turns."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from apps.core.tenancy import tenant_scope

logger = logging.getLogger(__name__)

LIVE = "live"
PLAYGROUND = "pg"
SIMULATION = "sim"
BACKGROUND = "bg"
KINDS = (LIVE, PLAYGROUND, SIMULATION)  # the kinds that may be parked (BACKGROUND never is)
PREFIX = "guidedesk:sched:"
HEARTBEAT_SECONDS = 5.0
WORKER_TTL_SECONDS = 20.0

_lock = threading.Lock()
_client: tuple[str, Any] | None = None
_runners: dict[str, Callable[[str], None]] = {}

# ARGV: 1 op, 2 now, 3 lease, 4 capacity override, 5 reserve %, 6 tenant cap, 7 playground runs
# per tenant, 8 fallback capacity, 9 a fresh slot id, 10 simulation jobs per tenant, 11 the
# simulations' share of the capacity (%), 12 background jobs per tenant, 13 the background
# jobs' share of the capacity (%); then the op's own arguments.
_SCRIPT = """
local P = KEYS[1]
local op = ARGV[1]
local now = tonumber(ARGV[2])
local lease = tonumber(ARGV[3])
local cap_override = tonumber(ARGV[4])
local reserve_pct = tonumber(ARGV[5])
local tenant_max = tonumber(ARGV[6])
local pg_max = tonumber(ARGV[7])
local fallback_cap = tonumber(ARGV[8])
local fresh = ARGV[9]
local sim_max = tonumber(ARGV[10])
local sim_pct = tonumber(ARGV[11])
local bg_max = tonumber(ARGV[12])
local bg_pct = tonumber(ARGV[13])

local function count(kind, t)
  return tonumber(redis.call('HGET', P .. 'n:' .. kind, t)) or 0
end

local function drop(m)
  if redis.call('ZREM', P .. 'held', m) == 1 then
    local t, k = string.match(m, '^([^|]*)|([^|]*)|')
    local h = P .. 'n:' .. k
    if redis.call('HINCRBY', h, t, -1) <= 0 then redis.call('HDEL', h, t) end
  end
end

local function purge()
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', P .. 'held', '-inf', now - lease)) do
    drop(m)
  end
end

local function capacity()
  if cap_override > 0 then return cap_override end
  for _, w in ipairs(redis.call('ZRANGEBYSCORE', P .. 'workers', '-inf', now)) do
    redis.call('ZREM', P .. 'workers', w)
    redis.call('HDEL', P .. 'threads', w)
  end
  local total = 0
  for _, v in ipairs(redis.call('HVALS', P .. 'threads')) do total = total + tonumber(v) end
  if total <= 0 then total = fallback_cap end
  return total
end

local function reserve(C)
  if C <= 1 then return 0 end
  return math.min(C - 1, math.ceil(C * reserve_pct / 100))
end

local function live_ok(t, C, R, used)
  if used >= C then return false end
  local mine = count('live', t)
  if mine >= C - R then return false end
  if tenant_max > 0 and mine >= tenant_max then return false end
  if used >= C - R then
    -- the last R slots: only for a tenant holding less than its share of the reserve
    -- (R / tenants running turns, the asking tenant counted; at least 1), so tenants that
    -- already run turns stop at C - R together and a newcomer finds a free slot
    local n = redis.call('HLEN', P .. 'n:live')
    if mine == 0 then n = n + 1 end
    if mine >= math.max(1, math.floor(R / n)) then return false end
  end
  return true
end

-- the lanes below live turns: never into the reserve, and at most `share` slots (at least 1)
-- held by the lane, every tenant together
local function lane_room(kind, C, R, used, share)
  if used >= C - R then return false end
  local all = 0
  for _, v in ipairs(redis.call('HVALS', P .. 'n:' .. kind)) do all = all + tonumber(v) end
  return all < math.max(1, share)
end

local function pg_ok(t, C, R, used)
  return lane_room('pg', C, R, used, math.floor(C / 4)) and count('pg', t) < pg_max
end

local function sim_ok(t, C, R, used)
  return lane_room('sim', C, R, used, math.floor(C * sim_pct / 100))
    and count('sim', t) < sim_max
end

local function bg_ok(t, C, R, used)
  return lane_room('bg', C, R, used, math.floor(C * bg_pct / 100))
    and (bg_max <= 0 or count('bg', t) < bg_max)
end

local function best_of(kind, C, R, used)
  local best, best_n, best_ts = nil, nil, nil
  for _, t in ipairs(redis.call('SMEMBERS', P .. 'w:' .. kind)) do
    local head = redis.call('LINDEX', P .. 'q:' .. kind .. ':' .. t, 0)
    if not head then
      redis.call('SREM', P .. 'w:' .. kind, t)
    else
      local ok
      if kind == 'live' then
        ok = live_ok(t, C, R, used)
      elseif kind == 'pg' then
        ok = pg_ok(t, C, R, used)
      else
        ok = sim_ok(t, C, R, used)
      end
      if ok then
        local n = count(kind, t)
        local ts = tonumber(string.match(head, '^([^|]*)|'))
        if best == nil or n < best_n or (n == best_n and ts < best_ts) then
          best, best_n, best_ts = t, n, ts
        end
      end
    end
  end
  return best
end

local function pick()
  purge()
  local C = capacity()
  local R = reserve(C)
  local used = redis.call('ZCARD', P .. 'held')
  local kind = 'live'
  local t = best_of('live', C, R, used)
  if t == nil then
    kind = 'pg'
    t = best_of('pg', C, R, used)
  end
  if t == nil then
    kind = 'sim'
    t = best_of('sim', C, R, used)
  end
  if t == nil then return false end
  local q = P .. 'q:' .. kind .. ':' .. t
  local item = redis.call('LPOP', q)
  if redis.call('LLEN', q) == 0 then redis.call('SREM', P .. 'w:' .. kind, t) end
  local member = t .. '|' .. kind .. '|' .. fresh
  redis.call('ZADD', P .. 'held', now, member)
  redis.call('HINCRBY', P .. 'n:' .. kind, t, 1)
  return {t, kind, string.match(item, '^[^|]*|(.*)$'), member}
end

if op == 'submit' or op == 'park' then
  local t, kind, job = ARGV[14], ARGV[15], ARGV[16]
  redis.call('RPUSH', P .. 'q:' .. kind .. ':' .. t, string.format('%.6f', now) .. '|' .. job)
  redis.call('SADD', P .. 'w:' .. kind, t)
  if op == 'park' then return 1 end
  return pick()
elseif op == 'acquire' then
  -- a background job takes a slot now or not at all (its task waits and asks again): only
  -- when no parked live turn, playground run or simulation job could use it
  purge()
  local t, job = ARGV[14], ARGV[15]
  local C = capacity()
  local R = reserve(C)
  local used = redis.call('ZCARD', P .. 'held')
  for _, kind in ipairs({'live', 'pg', 'sim'}) do
    if best_of(kind, C, R, used) ~= nil then return false end
  end
  if not bg_ok(t, C, R, used) then return false end
  local member = t .. '|bg|' .. fresh
  redis.call('ZADD', P .. 'held', now, member)
  redis.call('HINCRBY', P .. 'n:bg', t, 1)
  return {t, 'bg', job, member}
elseif op == 'release' then
  drop(ARGV[14])
  return pick()
elseif op == 'pick' then
  return pick()
elseif op == 'status' then
  purge()
  local C = capacity()
  local waiting = 0
  for _, kind in ipairs({'live', 'pg', 'sim'}) do
    for _, t in ipairs(redis.call('SMEMBERS', P .. 'w:' .. kind)) do
      waiting = waiting + redis.call('LLEN', P .. 'q:' .. kind .. ':' .. t)
    end
  end
  return {C, reserve(C), redis.call('ZCARD', P .. 'held'), waiting}
end
return redis.error_reply('unknown op ' .. op)
"""


@dataclass(frozen=True)
class Grant:
    """A slot taken for one job: run `job` (of `kind`, for `tenant`), then `release` it."""

    tenant: str
    kind: str
    job: str
    member: str  # the slot's id in Redis; "" when no slot was needed (no Redis, or an error)


@dataclass(frozen=True)
class Status:
    capacity: int
    reserve: int
    running: int
    waiting: int


def _redis() -> Any | None:
    """A Redis client for the slots (thread-safe, one per process), or None without Redis."""
    global _client
    url = str(settings.SLOTS_REDIS_URL or "")
    if not url.startswith(("redis://", "rediss://", "unix://")):
        return None
    with _lock:
        if _client is None or _client[0] != url:
            import redis

            client = redis.Redis.from_url(url, socket_timeout=5, health_check_interval=30)
            _client = (url, (client, client.register_script(_SCRIPT)))
        return _client[1]


def _call(op: str, *args: str) -> Any:
    found = _redis()
    if found is None:
        raise LookupError("no Redis for the slots")
    _, script = found
    return script(
        keys=[PREFIX],
        args=[
            op,
            repr(time.time()),
            str(float(settings.REASONING_TURN_LEASE_SECONDS)),
            str(int(settings.TURN_SLOTS_CAPACITY)),
            str(float(settings.TURN_SLOTS_RESERVE_PERCENT)),
            str(int(settings.TURNS_PER_CLIENT_MAX)),
            str(int(settings.PLAYGROUND_RUNS_PER_CLIENT)),
            str(int(settings.TURN_SLOTS_FALLBACK_CAPACITY)),
            uuid.uuid4().hex,
            str(int(settings.SIMULATION_JOBS_PER_CLIENT)),
            str(float(settings.SIMULATION_SLOTS_PERCENT)),
            str(int(settings.KNOWLEDGE_SYNCS_PER_CLIENT)),
            str(float(settings.BACKGROUND_SLOTS_PERCENT)),
            *args,
        ],
    )


def _grant(raw: Any) -> Grant | None:
    if not raw:
        return None
    tenant, kind, job, member = (v.decode() if isinstance(v, bytes) else str(v) for v in raw)
    return Grant(tenant=tenant, kind=kind, job=job, member=member)


def enabled() -> bool:
    return _redis() is not None


def _check(tenant: str, kind: str, job: str) -> None:
    if kind not in KINDS or "|" in tenant or "|" in job or not tenant:
        raise ValueError(f"bad job {kind}:{tenant}:{job}")


def park(*, tenant: str, kind: str, job: str) -> bool:
    """Queue `job` behind its tenant's parked jobs, to be run by the next thread that asks
    (`run_parked`): the web process parks a turn as it queues its Celery task, so the scheduler
    sees every waiting turn at once, not only those a worker thread has fetched. False: not
    parked (no Redis, or an error) — the task must then `run_fairly` its job itself."""
    _check(tenant, kind, job)
    if _redis() is None:
        return False
    try:
        return bool(_call("park", tenant, kind, job))
    except Exception:
        logger.warning("slots: Redis unavailable, %s not parked", job, exc_info=True)
        return False


def submit(*, tenant: str, kind: str, job: str) -> Grant | None:
    """Queue `job` behind its tenant's parked jobs and take a slot for the job that should run
    now, if any: this one, an earlier one of the tenant, or another tenant's. None: the job is
    parked and will be run by a thread when a slot it may use frees up."""
    _check(tenant, kind, job)
    if _redis() is None:
        return Grant(tenant=tenant, kind=kind, job=job, member="")
    try:
        return _grant(_call("submit", tenant, kind, job))
    except Exception:
        logger.warning("slots: Redis unavailable, running %s now", job, exc_info=True)
        return Grant(tenant=tenant, kind=kind, job=job, member="")


def release(grant: Grant) -> Grant | None:
    """Give the slot back and take one for the next parked job that may run, if any."""
    if not grant.member:
        return None
    try:
        return _grant(_call("release", grant.member))
    except Exception:  # the lease expires the slot
        logger.warning("slots: could not release %s", grant.member, exc_info=True)
        return None


def pick() -> Grant | None:
    """Take a slot for the next parked job that may run now, if any."""
    if _redis() is None:
        return None
    try:
        return _grant(_call("pick"))
    except Exception:
        logger.warning("slots: Redis unavailable", exc_info=True)
        return None


def status() -> Status | None:
    if _redis() is None:
        return None
    capacity, reserve, running, waiting = (int(v) for v in _call("status"))
    return Status(capacity=capacity, reserve=reserve, running=running, waiting=waiting)


def acquire(*, tenant: str, job: str) -> Grant | None:
    """Take a slot for a background job (`BACKGROUND`) now, or None: no slot it may take (the
    caller's task waits and asks again later; a background job is never parked). Without Redis,
    or on a Redis error, a slotless grant: the job runs."""
    if not tenant or "|" in tenant or "|" in job:
        raise ValueError(f"bad job {BACKGROUND}:{tenant}:{job}")
    if _redis() is None:
        return Grant(tenant=tenant, kind=BACKGROUND, job=job, member="")
    try:
        return _grant(_call("acquire", tenant, job))
    except Exception:
        logger.warning("slots: Redis unavailable, running %s now", job, exc_info=True)
        return Grant(tenant=tenant, kind=BACKGROUND, job=job, member="")


# Whether this process's threads also run live turns (it consumes the default queue). A worker
# that consumes only the background queue says so at start (`set_serves_live`): its threads are
# no turn's, so its background jobs take no slot and it adds nothing to the capacity.
_serves_live = True


def set_serves_live(serves: bool) -> None:
    global _serves_live
    _serves_live = bool(serves)


def serves_live() -> bool:
    return _serves_live


def consumes_live_queue(consumer: Any) -> bool:
    """Whether a starting Celery worker (`worker_ready`'s sender) consumes the default queue,
    where turns go: true unless its queues (`-Q`) leave that one out."""
    try:
        app = consumer.app
        names = {str(name) for name in app.amqp.queues.consume_from}
        return not names or str(app.conf.task_default_queue) in names
    except Exception:
        return True


def run_background[T](*, tenant: str, job: str, work: Callable[[], T]) -> tuple[bool, T | None]:
    """Run one background job of `tenant` in this thread when it may run now: at once in a
    background-only worker; in a worker that also runs live turns, only with a slot at the
    lowest priority (`acquire`), and once it is done the slot goes to the next parked job, run
    here too. (False, None): it may not run now — the caller re-queues it."""
    if not _serves_live:
        return True, work()
    grant = acquire(tenant=tenant, job=job)
    if grant is None:
        return False, None
    try:
        result = work()
    finally:
        nxt = release(grant)
        if nxt is not None:
            run_granted(nxt)
    return True, result


def register_runner(kind: str, runner: Callable[[str], None]) -> None:
    """`runner(job)` runs one job of `kind`; it must not raise (it answers or re-queues)."""
    _runners[kind] = runner


def run_fairly(*, tenant: str, kind: str, job: str) -> int:
    """Submit a job, then run jobs in this thread for as long as the scheduler hands it one:
    this job when it may run now, and after each job the next admissible parked one. Returns
    how many jobs ran here."""
    return run_granted(submit(tenant=tenant, kind=kind, job=job))


def run_parked() -> int:
    """Run parked jobs that may run now (the heartbeat's nudge). Returns how many ran."""
    return run_granted(pick())


def run_granted(grant: Grant | None) -> int:
    """Run a granted job, then, slot by slot, each next one the scheduler hands over."""
    ran = 0
    while grant is not None:
        try:
            with tenant_scope(int(grant.tenant), switch=True):
                _runners[grant.kind](grant.job)
        except Exception:  # a runner answers or re-queues its own failures; never leak a slot
            logger.exception("slots: job %s:%s failed", grant.kind, grant.job)
        ran += 1
        grant = release(grant)
    return ran


# --------------------------------------------------------------------------- the worker fleet


def worker_register(*, worker_id: str, threads: int) -> None:
    """Count `threads` of this worker process in the fleet's capacity for the next
    WORKER_TTL_SECONDS (the heartbeat renews it)."""
    found = _redis()
    if found is None:
        return
    client, _ = found
    pipe = client.pipeline()
    pipe.zadd(PREFIX + "workers", {worker_id: time.time() + WORKER_TTL_SECONDS})
    pipe.hset(PREFIX + "threads", worker_id, int(threads))
    pipe.execute()


def worker_unregister(*, worker_id: str) -> None:
    found = _redis()
    if found is None:
        return
    client, _ = found
    pipe = client.pipeline()
    pipe.zrem(PREFIX + "workers", worker_id)
    pipe.hdel(PREFIX + "threads", worker_id)
    pipe.execute()


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def heartbeat(*, threads: int, nudge: Callable[[], None], stop: threading.Event) -> None:
    """A worker's heartbeat thread: renew its capacity and, when parked jobs wait while the
    fleet has free slots, ask a free thread to run them (`nudge`, a Celery task)."""
    me = worker_id()
    while not stop.is_set():
        try:
            worker_register(worker_id=me, threads=threads)
            state = status()
            if state is not None and state.waiting and state.running < state.capacity:
                nudge()
        except Exception:
            logger.warning("slots: heartbeat failed", exc_info=True)
        stop.wait(HEARTBEAT_SECONDS)
    try:
        worker_unregister(worker_id=me)
    except Exception:
        logger.warning("slots: could not unregister %s", me, exc_info=True)
