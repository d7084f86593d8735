"""Capacity: Redis, the fleet's turn slots and how playground runs, simulations and
background jobs share them, web threads."""

from django.core.exceptions import ImproperlyConfigured

from config.settings.parts.celery import CELERY_BROKER_URL
from config.settings.parts.core import env

# Redis for the live event streams (pub/sub, docs/widget.md) and the per-tenant turn slots;
# defaults to the broker when that is Redis. Unset (the demo): streams poll, no slots.
REDIS_URL = env("REDIS_URL", default="") or (
    CELERY_BROKER_URL if CELERY_BROKER_URL.startswith(("redis://", "rediss://")) else ""
)
SLOTS_REDIS_URL = REDIS_URL
# The fleet's turn slots (apps/platform/slots.py, docs/deployment.md "Fairness"): capacity = the
# worker threads registered by every worker process (TURN_SLOTS_CAPACITY > 0 overrides it; the
# fallback counts while no worker has registered); one tenant may hold capacity − reserve slots,
# and the reserve goes only to tenants holding less than their share of it (tenants already
# running turns stop at capacity − reserve together); TURNS_PER_CLIENT_MAX > 0 adds a fixed
# per-tenant cap (0 = none).
TURN_SLOTS_CAPACITY = env.int("TURN_SLOTS_CAPACITY", default=0)
TURN_SLOTS_FALLBACK_CAPACITY = 100  # the Procfile's CELERY_CONCURRENCY, until a worker registers
TURN_SLOTS_RESERVE_PERCENT = env.float("TURN_SLOTS_RESERVE_PERCENT", default=10.0)
TURNS_PER_CLIENT_MAX = env.int("TURNS_PER_CLIENT_MAX", default=0)
# Playground runs share the slots at a lower priority: at most this many run at once per client
# (more wait), and at most PLAYGROUND_RUNS_QUEUED_PER_CLIENT more may wait; beyond, a new run is
# refused with a message (docs/playground.md).
PLAYGROUND_RUNS_PER_CLIENT = env.int("PLAYGROUND_RUNS_PER_CLIENT", default=2)
PLAYGROUND_RUNS_QUEUED_PER_CLIENT = env.int("PLAYGROUND_RUNS_QUEUED_PER_CLIENT", default=5)
# Simulation jobs (one case run each, apps/simulations) come after live turns and playground
# runs: at most SIMULATION_JOBS_PER_CLIENT run at once per client, and all of them together hold
# at most SIMULATION_SLOTS_PERCENT of the fleet's slots (docs/simulations.md). With no broker
# (the demo) a run goes through a background thread of the web process
# (SIMULATION_EAGER_THREAD), or the caller's thread with that off (tests).
SIMULATION_JOBS_PER_CLIENT = env.int("SIMULATION_JOBS_PER_CLIENT", default=16)
# At most this many simulation runs queued or running per client; a run beyond is refused (429).
SIMULATION_RUNS_IN_FLIGHT_PER_CLIENT = env.int("SIMULATION_RUNS_IN_FLIGHT_PER_CLIENT", default=2)
SIMULATION_SLOTS_PERCENT = env.float("SIMULATION_SLOTS_PERCENT", default=50.0)
SIMULATION_EAGER_THREAD = env.bool("SIMULATION_EAGER_THREAD", default=True)
# Background jobs (knowledge syncs) come after everything else in a worker that also runs
# turns: they take a slot only while nothing else waits for it, and hold at most this share of
# the fleet's slots (a worker of the `background` queue alone runs them on its own threads).
BACKGROUND_SLOTS_PERCENT = env.float("BACKGROUND_SLOTS_PERCENT", default=10.0)
# Threads per web process for the synchronous part of API requests and stream set-ups served by
# apps/platform/asgi.StreamingPaths (they give their database connection back when done).
WEB_THREADS = env.int("WEB_THREADS", default=32)

# `spread`: each web, worker and background process pins its threads to a core no other process
# of its kind holds on this box (apps/platform/affinity.py, docs/deployment.md "One core per
# process"); `off` (the default) leaves the kernel to place them, as where each process has a
# container.
CPU_AFFINITY = env.str("CPU_AFFINITY", default="off").strip().lower()
if CPU_AFFINITY not in ("off", "spread"):
    raise ImproperlyConfigured(f"CPU_AFFINITY must be 'off' or 'spread', not {CPU_AFFINITY!r}")
