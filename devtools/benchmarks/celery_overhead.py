"""Celery's own CPU per task (worker side) and per publish (web side) (docs/benchmarks.md,
"Celery per-task overhead").

It starts the Procfile's `worker` (its exact command line, production settings, thread pool)
against PostgreSQL and a broker of your choosing, then publishes N `core.ping` tasks — a task
that does nothing, so what the worker spends on it is Celery and kombu: receiving, the ack
emulation, the request, the trace, logging — from a few publisher threads in a separate process
that runs the same production settings (the web side's `task.delay()`). Per round it reports:

  worker CPU ms per task   user + system CPU of the worker's process group (from /proc) over the
                           round, divided by N (the round ends when the broker holds nothing
                           ready or unacknowledged)
  publish CPU ms           CPU of the publishing process over its N `delay()` calls, ÷ N
  tasks/s                  N ÷ the time from the first publish to the broker's being empty
  idle worker CPU ms/s     the worker's CPU while nothing is queued (its polling)

    .venv/bin/python devtools/benchmarks/celery_overhead.py \\
        --database-url postgres://postgres@127.0.0.1:5432/gd_hc \\
        --broker-url redis://127.0.0.1:6379/13 --tasks 2000 --publishers 4 --rounds 3

Variants, for comparing configurations (each is one run; a Markdown row per run):
  --worker-command CMD   instead of the Procfile's worker line (e.g. another -l or
                         --prefetch-multiplier); `$CELERY_CONCURRENCY` etc. expand as there
  --env NAME=VALUE       extra environment of the worker and the publisher
                         (e.g. CELERY_CONCURRENCY=50)
  --setting NAME=VALUE   a Django setting (Python literal) over the production settings, through
                         devtools/benchmarks/celery_overhead_settings.py (e.g.
                         CELERY_WORKER_DISABLE_RATE_LIMITS=True)
  --broker-url amqp://guest:guest@127.0.0.1:5672/VHOST   RabbitMQ as the broker (Redis stays the
                         pub/sub and cache store, --redis-url); the vhost must exist
                         (`rabbitmqctl add_vhost VHOST; rabbitmqctl set_permissions -p VHOST
                         guest '.*' '.*' '.*'`), and the unacknowledged count is read with
                         rabbitmqctl

Only the standard library, redis-py and kombu are used here; Django runs in the processes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.support import procfile  # noqa: E402
from tests.support.procfile import cpu_seconds  # noqa: E402

QUEUE = "celery"  # the default queue, where every task of this project goes
WARMUP_TASKS = 300


# --------------------------------------------------------------------------- the broker's view


class Broker:
    """How many messages of the queue are ready or unacknowledged, without touching the worker."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.amqp = url.startswith(("amqp://", "pyamqp://"))
        if not self.amqp:
            import redis

            self.redis = redis.Redis.from_url(url)

    def pending(self) -> int:
        if not self.amqp:
            # kombu's Redis transport: the queue is a list; delivered, unacknowledged messages
            # sit in the `unacked` hash until their ack.
            return int(self.redis.llen(QUEUE)) + int(self.redis.hlen("unacked"))
        ready = self._amqp_ready()
        if ready:
            return ready
        return self._amqp_ready_and_unacked()

    def _amqp_ready(self) -> int:
        from kombu import Connection

        with Connection(self.url) as conn:
            channel: Any = conn.default_channel
            _, count, _ = channel.queue_declare(QUEUE, passive=True)
            return int(count)

    def _amqp_ready_and_unacked(self) -> int:
        vhost = self.url.rsplit("/", 1)[1] or "/"
        command = ["rabbitmqctl", "list_queues", "-q", "-s", "-p", vhost, "name", "messages"]
        out = subprocess.run(  # noqa: S603
            command,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for line in out.splitlines():
            name, _, count = line.partition("\t")
            if name.strip() == QUEUE:
                return int(count)
        return 0

    def purge(self) -> None:
        if not self.amqp:
            self.redis.delete(QUEUE, "unacked", "unacked_index")
            return
        from kombu import Connection

        with Connection(self.url) as conn, contextlib.suppress(Exception):
            channel: Any = conn.default_channel
            channel.queue_purge(QUEUE)


def wait_drained(broker: Broker, worker: subprocess.Popen[bytes], log: Path, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if worker.poll() is not None:
            raise RuntimeError(f"the worker exited:\n{log.read_text()[-4000:]}")
        if broker.pending() == 0:
            return time.time()
        time.sleep(0.05)
    raise RuntimeError(f"{broker.pending()} tasks still queued after {timeout} s")


# ----------------------------------------------------------------------------- the publisher


def publish(tasks: int, publishers: int) -> None:
    """(Runs as `celery_overhead.py _publish` inside the deployment's settings.) `delay()` the
    ping `tasks` times from `publishers` threads; prints when it started and its CPU."""
    import django

    django.setup()
    from apps.core.tasks import ping

    ping.delay()  # connect (and declare the queue) before the clock starts
    per_thread = [tasks // publishers + (n < tasks % publishers) for n in range(publishers)]
    start = threading.Barrier(publishers + 1)

    def run(count: int) -> None:
        start.wait()
        for _ in range(count):
            ping.delay()

    threads = [threading.Thread(target=run, args=(count,)) for count in per_thread]
    for thread in threads:
        thread.start()
    cpu0, wall0 = time.process_time(), time.time()
    start.wait()
    for thread in threads:
        thread.join()
    cpu = time.process_time() - cpu0
    sys.stdout.write(
        json.dumps({"started": wall0, "cpu": cpu, "published_in": time.time() - wall0}) + "\n"
    )


# ------------------------------------------------------------------------------- the worker


def worker_env(args: argparse.Namespace) -> dict[str, str]:
    overrides = {
        "DJANGO_SETTINGS_MODULE": "config.settings.production",
        "SECRET_KEY": "celery-overhead-benchmark-secret-key-0123456789-abcdefgh",
        "ALLOWED_HOSTS": "127.0.0.1",
        "DATABASE_URL": args.database_url,
        "CELERY_BROKER_URL": args.broker_url,
        "REDIS_URL": args.redis_url or args.broker_url,
        "CACHE_URL": args.cache_url or "locmemcache://celery-overhead",
        "STATIC_ROOT": str(Path(tempfile.gettempdir()) / "guidedesk-celery-overhead-static"),
        "EMAIL_URL": "smtp://127.0.0.1:1",
        "OPENAI_API_KEY": "bench-key",
        "CELERY_CONCURRENCY": "100",
    }
    if args.setting:
        overrides["DJANGO_SETTINGS_MODULE"] = "devtools.benchmarks.celery_overhead_settings"
        overrides["CELERY_OVERHEAD_SETTINGS"] = json.dumps(
            dict(s.split("=", 1) for s in args.setting)
        )
    overrides.update(dict(item.split("=", 1) for item in args.env))
    return procfile.process_env(overrides)


def start_worker(command: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """Like tests/support/procfile.start, with the command line given."""
    return subprocess.Popen(  # noqa: S603 (the Procfile's line, or the one given)
        ["sh", "-c", command],  # noqa: S607
        cwd=ROOT,
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def run_publisher(env: dict[str, str], tasks: int, publishers: int) -> dict[str, float]:
    done = subprocess.run(  # noqa: S603 (this script)
        [
            sys.executable,
            __file__,
            "_publish",
            "--tasks",
            str(tasks),
            "--publishers",
            str(publishers),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the publisher failed:\n{done.stdout}\n{done.stderr[-4000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def measure(args: argparse.Namespace) -> dict[str, Any]:
    env = worker_env(args)
    command = args.worker_command or procfile.procfile_commands()["worker"]
    if args.release:
        procfile.run_release(env)
    logs = Path(tempfile.mkdtemp(prefix="guidedesk-celery-overhead-"))
    log = logs / "worker.log"
    broker = Broker(args.broker_url)
    broker.purge()
    worker = start_worker(command, env, log)
    try:
        # The warm-up waits for the worker to come up, and lets every thread run a task once.
        run_publisher(env, WARMUP_TASKS, args.publishers)
        wait_drained(broker, worker, log, timeout=120)
        time.sleep(2)
        idle0, idle_t0 = cpu_seconds(worker.pid), time.monotonic()
        time.sleep(args.idle_seconds)
        idle_ms_per_s = (cpu_seconds(worker.pid) - idle0) * 1000 / (time.monotonic() - idle_t0)
        rounds = []
        for _ in range(args.rounds):
            cpu0 = cpu_seconds(worker.pid)
            published = run_publisher(env, args.tasks, args.publishers)
            finished = wait_drained(broker, worker, log, timeout=600)
            time.sleep(0.5)  # the last acks' bookkeeping (the log lines) is done
            rounds.append(
                {
                    "worker_ms": (cpu_seconds(worker.pid) - cpu0) * 1000 / args.tasks,
                    "publish_ms": published["cpu"] * 1000 / args.tasks,
                    "tasks_per_s": args.tasks / (finished - published["started"]),
                }
            )
            time.sleep(1)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.pid, signal.SIGTERM)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(timeout=5)
    return {
        "label": args.label or command,
        "command": command,
        "broker": args.broker_url.split("://", 1)[0],
        "env": args.env,
        "settings": args.setting,
        "tasks": args.tasks,
        "publishers": args.publishers,
        "rounds": rounds,
        "worker_ms": statistics.median(r["worker_ms"] for r in rounds),
        "publish_ms": statistics.median(r["publish_ms"] for r in rounds),
        "tasks_per_s": statistics.median(r["tasks_per_s"] for r in rounds),
        "idle_ms_per_s": idle_ms_per_s,
        "log": str(log),
    }


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| configuration | worker CPU ms/task | publish CPU ms | tasks/s | idle worker CPU ms/s |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in results:
        spread = "–".join(
            f"{x['worker_ms']:.2f}"
            for x in sorted(r["rounds"], key=lambda x: x["worker_ms"])[
                :: max(1, len(r["rounds"]) - 1)
            ]
        )
        lines.append(
            f"| {r['label']} | {r['worker_ms']:.2f} ({spread}) | {r['publish_ms']:.2f} "
            f"| {r['tasks_per_s']:.0f} | {r['idle_ms_per_s']:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_publish":
        sub = argparse.ArgumentParser()
        sub.add_argument("_publish")
        sub.add_argument("--tasks", type=int, required=True)
        sub.add_argument("--publishers", type=int, required=True)
        parsed = sub.parse_args()
        publish(parsed.tasks, parsed.publishers)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--broker-url", required=True)
    parser.add_argument("--redis-url", default="", help="pub/sub and slots (default: the broker)")
    parser.add_argument("--cache-url", default="", help="the cache (default: in-process)")
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--publishers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3, help="the median round is reported")
    parser.add_argument("--idle-seconds", type=float, default=5.0)
    parser.add_argument("--worker-command", default="")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--setting", action="append", default=[], metavar="NAME=LITERAL")
    parser.add_argument("--label", default="")
    parser.add_argument("--no-release", dest="release", action="store_false")
    parser.add_argument("--json", type=Path, help="also append the result to this JSON-lines file")
    args = parser.parse_args()
    result = measure(args)
    if args.json:
        with args.json.open("a") as out:
            out.write(json.dumps(result) + "\n")
    sys.stdout.write(table([result]) + "\n")
    sys.stderr.write(f"worker log: {result['log']}\n")


if __name__ == "__main__":
    main()
