"""Load benchmark of the production deployment (docs/benchmarks.md).

It starts the Procfile's processes — `release` (migrate + collectstatic), `web` (gunicorn +
uvicorn workers, ASGI) and `worker` (Celery, thread pool) — under production settings against
PostgreSQL and Redis, with a local OpenAI-compatible model answering after `--latency` seconds
(devtools/fake_llm.py in its own process), and drives the widget API exactly like the
widget: start a conversation, open its event stream, send a message, wait for the reply **on
the stream**, think, send the next one.

    .venv/bin/python devtools/benchmarks/load.py \\
        --database-url postgres://postgres@127.0.0.1:5432/gd_h5 \\
        --redis-url redis://127.0.0.1:6379/5 --cache-url rediscache://127.0.0.1:6379/13 \\
        customers --customers 100 --messages 3 --think 5

Scenarios (sub-commands):
  customers  N customers × M messages with a think time; with `--slow K`, K extra customers
             send turns whose model calls take 10 × the latency (a 10-call turn)
  streams    S idle open event streams on ONE web process; meanwhile plain API GETs and a few
             customers' replies (latency from the reply's commit to its arrival on the stream)
  flood      F tenants flooded (C customers each, writing again as soon as answered, for D s,
             more turns than the fleet has threads) while P customers of one more tenant write
             now and then: that tenant's reply times are what fairness is judged by

One tenant's flash sale (100 customers of one shop writing at the same moment):

    .venv/bin/python devtools/benchmarks/load.py --tenants 1 --messages 3 --database-url … \\
        --redis-url … --cache-url … customers --customers 100 --together --think 5

(`--together`: the customers open the widget over `--ramp` seconds, then all send their first
message at the same moment; `--ramp 0` without it makes them also open it at the same moment.)

With `--first-token 0.3 --token-seconds 0.02 --latency 0` the model streams (0.3 s to its first
token, 20 ms per token) and each level also reports the time from the POST to the reply's first
word on the stream (the first `delta` event) against the model's own time to write that word.

Per level it reports: turns/s, reply time p50/p95 and ÷ model time, POST p50/p95, first event
after the POST (p50/p95), errors, unanswered messages, CPU ms per turn of the web and worker
process groups (from /proc), the kernel's part of it and the main threads' (event loops,
Celery consumers), and the load average. Every customer
comes from 127.0.0.1, so the processes run the production settings with the widget throttle
rates raised (and the token window off) through their environment variables
(THROTTLE_WIDGET_*), and the tenants' plans have no per-visitor daily budget; nothing else
differs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.support import procfile  # noqa: E402
from tests.support.procfile import cpu_seconds, cpu_split, main_thread_cpu_seconds  # noqa: E402

ORIGIN = "https://bench.example"
QUESTIONS = ["When do you ship?", "Do you ship to Canada?", "How do returns work?"]
SLOW_MARK = "[slow]"
REFERENCE = re.compile(r"ref-[0-9a-f]{10}")


# ------------------------------------------------------------------------------ measurement


def pct(samples: list[float], p: float) -> float:
    if not samples:
        return 0.0
    ordered = sorted(samples)
    rank = max(1, round(p / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def threads_of(pgid: int) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                raw = Path(f"/proc/{entry}/stat").read_text()
                fields = raw[raw.rindex(")") + 2 :].split()
                if int(fields[2]) == pgid:
                    count += int(fields[17])  # num_threads
    return count


@dataclass
class Stats:
    reply: list[float] = field(default_factory=list)
    post: list[float] = field(default_factory=list)
    first_event: list[float] = field(default_factory=list)
    typing: list[float] = field(default_factory=list)
    first_word: list[float] = field(default_factory=list)  # POST → the first `delta` event
    # Per streamed turn, by its message's reference: (POST sent, first `delta` seen), joined
    # afterwards with the model's own marks (fake_model.py MARKS).
    word_marks: dict[str, tuple[float, float]] = field(default_factory=dict)
    commit_to_stream: list[float] = field(default_factory=list)
    gets: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    unanswered: int = 0
    turns: int = 0


def error_counts(*stats: Stats) -> dict[str, Any]:
    """The errors (how many, of which kinds) and the unanswered messages of `stats` together,
    as a result reports them."""
    errors = [error for s in stats for error in s.errors]
    return {
        "errors": len(errors),
        "error_kinds": sorted(set(errors)),
        "unanswered": sum(s.unanswered for s in stats),
    }


# ---------------------------------------------------------------------------- the customers


class Stream:
    """One EventSource: reads events into a queue; reconnects with Last-Event-ID on end."""

    def __init__(self, http: Any, base: str, key: str, conversation: str, token: str) -> None:
        self.http, self.base = http, base
        self.url = f"{base}/api/v1/widget/conversations/{conversation}/events"
        self.params = {"key": key, "token": token}
        self.events: asyncio.Queue[tuple[float, str, dict[str, Any]]] = asyncio.Queue()
        self.last_id = 0
        self.opened = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.failures = 0

    def start(self) -> None:
        self.task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self.task:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task

    async def _run(self) -> None:
        while True:
            headers = {"Origin": ORIGIN, "Accept": "text/event-stream"}
            if self.last_id:
                headers["Last-Event-ID"] = str(self.last_id)
            try:
                async with self.http.stream(
                    "GET", self.url, params=self.params, headers=headers, timeout=None
                ) as response:
                    if response.status_code != 200:
                        self.failures += 1
                        await asyncio.sleep(2)
                        continue
                    event, data, event_id = "message", "", None
                    async for line in response.aiter_lines():
                        if line.startswith("retry:"):
                            self.opened.set()
                        elif line.startswith("event: "):
                            event = line[7:]
                        elif line.startswith("data: "):
                            data = line[6:]
                        elif line.startswith("id: "):
                            event_id = int(line[4:])
                        elif line == "" and data:
                            if event_id is not None:
                                self.last_id = event_id
                            self.events.put_nowait((time.time(), event, json.loads(data)))
                            event, data, event_id = "message", "", None
            except asyncio.CancelledError:
                raise
            except Exception:
                self.failures += 1
                await asyncio.sleep(1)


async def customer(
    http: Any,
    base: str,
    key: str,
    stats: Stats,
    *,
    messages: int,
    think: float,
    reply_timeout: float,
    slow: bool = False,
    start_delay: float = 0.0,
    until: float | None = None,
    send_at: float | None = None,
) -> None:
    await asyncio.sleep(start_delay)
    headers = {"Origin": ORIGIN, "X-Widget-Key": key}
    response = await http.post(f"{base}/api/v1/widget/conversations", json={}, headers=headers)
    if response.status_code != 201:
        stats.errors.append(f"start {response.status_code}")
        return
    conversation, token = response.json()["id"], response.json()["token"]
    stream = Stream(http, base, key, conversation, token)
    stream.start()
    try:
        await asyncio.wait_for(stream.opened.wait(), 30)
        if send_at is not None:  # the widget is open; everyone writes at the same moment
            await asyncio.sleep(max(0.0, send_at - time.time()))
        auth = {**headers, "Authorization": f"Bearer {token}"}
        for n in range(messages):
            if until is not None and time.time() > until:
                break
            text = QUESTIONS[n % len(QUESTIONS)] + (f" {SLOW_MARK}" if slow else "")
            reference = f"ref-{uuid.uuid4().hex[:10]}"
            text += f" ({reference})"  # joins this turn with the model's marks
            while not stream.events.empty():
                stream.events.get_nowait()
            sent = time.time()
            posted = await http.post(
                f"{base}/api/v1/widget/conversations/{conversation}/messages",
                json={"text": text},
                headers=auth,
            )
            stats.post.append(time.time() - sent)
            if posted.status_code not in (201, 202):
                stats.errors.append(f"post {posted.status_code}")
                return
            user_seq = posted.json()["message"]["seq"]
            first = typing = word = None
            deadline = sent + reply_timeout
            answered = False
            while time.time() < deadline:
                try:
                    at, event, data = await asyncio.wait_for(
                        stream.events.get(), deadline - time.time()
                    )
                except TimeoutError:
                    break
                first = first or at
                if event == "typing" and data.get("typing") and typing is None:
                    typing = at
                if event == "delta" and word is None:
                    word = at
                if event == "message" and data["seq"] > user_seq and data["role"] != "user":
                    if not slow:
                        stats.reply.append(at - sent)
                        stats.first_event.append((first or at) - sent)
                        if typing is not None:
                            stats.typing.append(typing - sent)
                        if word is not None:
                            stats.first_word.append(word - sent)
                            stats.word_marks[reference] = (sent, word)
                        created = datetime.fromisoformat(data["created_at"]).timestamp()
                        stats.commit_to_stream.append(at - created)
                        stats.turns += 1
                    answered = True
                    break
            if not answered:
                stats.unanswered += 1
            if think and n + 1 < messages:
                await asyncio.sleep(think)
    finally:
        await stream.stop()


# ------------------------------------------------------------------------------ deployment


@dataclass
class Deployment:
    base: str
    keys: list[str]
    web: subprocess.Popen[bytes]
    workers: list[subprocess.Popen[bytes]]
    model: subprocess.Popen[bytes]
    logs: Path
    marks: Path  # the model's marks of each streamed reply (fake_model.py MARKS)
    env: dict[str, str]  # the processes' environment (`load.py _marks` reads their database)


def _env(args: argparse.Namespace, model_url: str, port: int) -> dict[str, str]:
    return procfile.process_env(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings.production",
            # Every simulated customer connects from 127.0.0.1: per-address limits way up.
            "THROTTLE_WIDGET_IP": "1000000/min",
            "THROTTLE_WIDGET_KEY": "1000000/min",
            "THROTTLE_WIDGET_CONVERSATIONS": "1000000/min",
            "THROTTLE_WIDGET_TOKENS": "",  # off: one "visitor" here is every customer
            "THROTTLE_WIDGET_ADDRESS_TOKENS": "",
            "SECRET_KEY": "load-benchmark-secret-key-0123456789-abcdefghijklmnop",
            "ALLOWED_HOSTS": "127.0.0.1",
            "DATABASE_URL": args.database_url,
            "CELERY_BROKER_URL": args.redis_url,
            "CACHE_URL": args.cache_url,
            "STATIC_ROOT": str(Path(tempfile.gettempdir()) / "guidedesk-load-static"),
            "SECURE_SSL_REDIRECT": "False",
            "SECURE_HSTS_SECONDS": "0",
            "EMAIL_URL": "smtp://127.0.0.1:1",
            "OPENAI_API_KEY": "bench-key",
            "OPENAI_BASE_URL": model_url,
            "LLM_MODEL": "gpt-4o-mini",
            "LLM_MAX_RETRIES": "0",
            "LLM_TIMEOUT": "60",
            "LLM_STREAM_REPLIES": "false" if args.no_stream_replies else "true",
            "LOG_LEVEL": "WARNING",
            "WEB_CONCURRENCY": str(args.web_processes),
            "CELERY_CONCURRENCY": str(args.worker_threads),
            "CPU_AFFINITY": args.cpu_affinity,
            "PORT": str(port),
        }
    )


def deploy(args: argparse.Namespace) -> Deployment:
    logs = Path(tempfile.mkdtemp(prefix="guidedesk-load-"))
    model_log = logs / "model.log"
    marks = logs / "model-marks.jsonl"
    model = subprocess.Popen(  # noqa: S603 (our own script)
        [
            sys.executable,
            str(Path(__file__).with_name("fake_model.py")),
            str(args.latency),
            str(args.first_token),
            str(args.token_seconds),
            str(marks),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=model_log.open("ab"),
        start_new_session=True,
    )
    assert model.stdout is not None
    model_url = model.stdout.readline().decode().strip()
    port = procfile.free_port()
    env = _env(args, model_url, port)
    procfile.run_release(env)
    setup = subprocess.run(  # noqa: S603 (our own script)
        [sys.executable, str(Path(__file__)), "_setup", "--tenants", str(args.tenants)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    keys = json.loads(setup.stdout)["keys"]
    web = procfile.start("web", env, logs / "web.log")
    base = f"http://127.0.0.1:{port}"
    procfile.wait_for_http(base + "/healthz", web, logs / "web.log")
    workers = []
    if args.scenario in ("customers", "flood") or args.replies:
        # The Procfile's `worker`, scaled to --worker-processes copies (as an operator would).
        workers = [
            procfile.start("worker", env, logs / f"worker-{n}.log")
            for n in range(args.worker_processes)
        ]
        time.sleep(8)  # the workers connect to the broker
    return Deployment(
        base=base,
        keys=keys,
        web=web,
        workers=workers,
        model=model,
        logs=logs,
        marks=marks,
        env=env,
    )


def undeploy(deployment: Deployment) -> None:
    for process in (*deployment.workers, deployment.web, deployment.model):
        procfile.stop(process)


def setup_tenants(count: int) -> None:
    """(Runs as `load.py _setup` inside the deployment's settings.) Tenants on the adaptive
    plan, allowing ORIGIN; prints their widget keys."""
    import django

    django.setup()
    from apps.clients.models import Client, Plan
    from apps.provisioning.files import load_tenant_file
    from apps.provisioning.services import tenant_import

    # Read as `import_client` reads it: the help centre's article directory included.
    tenant = load_tenant_file(ROOT / "demo" / "tenant.json")
    template = tenant["clients"][0]
    keys = []
    for n in range(count):
        slug = f"load-{n}"
        found = Client.objects.filter(slug=slug).first()
        if found is None:
            client = {**template, "slug": slug, "name": f"Load shop {n}"}
            client["widget"] = {**template["widget"], "allowed_origins": [ORIGIN]}
            tenant_import(data={**tenant, "clients": [client]})
            found = Client.objects.get(slug=slug)
        # Every simulated customer is the same visitor (127.0.0.1): no per-visitor budget.
        Plan.objects.filter(pk=found.plan_id).update(visitor_daily_token_budget=0)
        keys.append(found.widget_key)
    sys.stdout.write(json.dumps({"keys": keys}))


def stored_marks() -> None:
    """(Runs as `load.py _marks` inside the deployment's settings.) For the message references
    read from stdin (a JSON list): when the web process stored the message and when a worker
    started its turn (its trace), as Unix times; prints {reference: [message, trace]}."""
    import django

    django.setup()
    from apps.conversations.models import Message
    from apps.reasoning.models import ReasoningTrace

    wanted = set(json.load(sys.stdin))
    why = "the load benchmark times its own turns"
    stored: dict[int, tuple[str, float]] = {}
    for pk, text, created in (
        Message.objects.unscoped(why)
        .filter(role="user", text__contains="(ref-")
        .values_list("pk", "text", "created_at")
    ):
        found = REFERENCE.findall(text)
        if found and found[-1] in wanted:
            stored[pk] = (found[-1], created.timestamp())
    result: dict[str, list[float]] = {}
    for message_id, started in (
        ReasoningTrace.objects.unscoped(why)
        .filter(user_message_id__in=list(stored))
        .values_list("user_message_id", "created_at")
    ):
        reference, stored_at = stored[message_id]
        result[reference] = [stored_at, started.timestamp()]
    sys.stdout.write(json.dumps(result))


# ------------------------------------------------------------------------------- scenarios


def _workers_cpu(deployment: Deployment) -> float:
    return sum(cpu_seconds(worker.pid) for worker in deployment.workers)


def _others_cpu(deployment: Deployment) -> tuple[float, float]:
    """CPU seconds so far of this load generator (the customers) and of the fake model."""
    return time.process_time(), cpu_seconds(deployment.model.pid)


def box_cpu() -> tuple[float, float]:
    """(busy, total) CPU ticks of the whole machine so far (/proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return float(sum(fields) - idle), float(sum(fields))


def _measure_start(deployment: Deployment) -> tuple[float, float, float]:
    return time.monotonic(), cpu_seconds(deployment.web.pid), _workers_cpu(deployment)


def _system_seconds(deployment: Deployment) -> float:
    """Kernel CPU so far of the web and worker processes (thread switches, sockets)."""
    groups = [deployment.web, *deployment.workers]
    return sum(cpu_split(process.pid)[1] for process in groups)


def _main_threads_cpu(deployment: Deployment) -> tuple[float, float]:
    """CPU seconds so far of the web's event loops and of the workers' Celery consumers (each
    process's main thread; the rest of its CPU is its thread pool: views, turns)."""
    workers = sum(main_thread_cpu_seconds(worker.pid) for worker in deployment.workers)
    return main_thread_cpu_seconds(deployment.web.pid), workers


def _cpu_ms(deployment: Deployment, started: tuple[float, float, float], turns: int):
    wall = time.monotonic() - started[0]
    web = cpu_seconds(deployment.web.pid) - started[1]
    worker = _workers_cpu(deployment) - started[2]
    per = max(turns, 1)
    return wall, web * 1000 / per, worker * 1000 / per


async def run_customers(args: argparse.Namespace, deployment: Deployment) -> dict[str, Any]:
    import httpx

    stats = Stats()
    slow = Stats()
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(limits=limits, timeout=120) as http:
        started = _measure_start(deployment)
        others_before = _others_cpu(deployment)
        box_before = box_cpu()
        system_before = _system_seconds(deployment)
        main_before = _main_threads_cpu(deployment)
        load_before = loadavg()
        together = getattr(args, "together", False)
        send_at = time.time() + args.ramp + 2.0 if together else None
        tasks = [
            customer(
                http,
                deployment.base,
                deployment.keys[n % len(deployment.keys)],
                stats,
                messages=args.messages,
                think=args.think,
                reply_timeout=args.reply_timeout,
                start_delay=args.ramp * n / max(args.customers, 1),
                send_at=send_at,
            )
            for n in range(args.customers)
        ] + [
            customer(
                http,
                deployment.base,
                deployment.keys[0],
                slow,
                messages=1,
                think=0,
                reply_timeout=args.reply_timeout,
                slow=True,
            )
            for _ in range(args.slow)
        ]
        await asyncio.gather(*tasks)
        wall, web_ms, worker_ms = _cpu_ms(deployment, started, stats.turns)
        loadgen_s, model_s = (
            after - before
            for after, before in zip(_others_cpu(deployment), others_before, strict=True)
        )
        box = box_cpu()
        system_ms = (_system_seconds(deployment) - system_before) * 1000 / max(stats.turns, 1)
        loop_ms, consumer_ms = (
            (after - before) * 1000 / max(stats.turns, 1)
            for after, before in zip(_main_threads_cpu(deployment), main_before, strict=True)
        )
    model_time = _model_seconds(args)
    streamed = _first_word(args, stats, deployment)
    return {
        **streamed,
        "worker_processes": args.worker_processes,
        "scenario": f"{args.customers} customers × {args.messages} msgs, think {args.think} s"
        + (", first messages all at once" if together else "")
        + (f", +{args.slow} slow 10-call turns" if args.slow else ""),
        "turns": stats.turns,
        "turns_per_s": round(stats.turns / wall, 2),
        "reply_p50_s": round(pct(stats.reply, 50), 3),
        "reply_p95_s": round(pct(stats.reply, 95), 3),
        "p95_over_model": round(pct(stats.reply, 95) / model_time, 2),
        "post_p50_ms": round(pct(stats.post, 50) * 1000),
        "post_p95_ms": round(pct(stats.post, 95) * 1000),
        "first_event_p50_ms": round(pct(stats.first_event, 50) * 1000),
        "first_event_p95_ms": round(pct(stats.first_event, 95) * 1000),
        "typing_p95_ms": round(pct(stats.typing, 95) * 1000),
        "commit_to_stream_p95_ms": round(pct(stats.commit_to_stream, 95) * 1000),
        **error_counts(stats, slow),
        "web_cpu_ms_per_turn": round(web_ms, 1),
        "worker_cpu_ms_per_turn": round(worker_ms, 1),
        # Of the two above, what the kernel spent for them (switching threads, sockets).
        "web_worker_system_ms_per_turn": round(system_ms, 1),
        # Of the two above, the main threads': the web's event loops (HTTP, streams), the
        # workers' Celery consumers (fetching and acknowledging tasks).
        "web_loop_cpu_ms_per_turn": round(loop_ms, 1),
        "worker_consumer_cpu_ms_per_turn": round(consumer_ms, 1),
        "loadgen_cpu_ms_per_turn": round(loadgen_s * 1000 / max(stats.turns, 1), 1),
        "model_cpu_ms_per_turn": round(model_s * 1000 / max(stats.turns, 1), 1),
        # The whole box (every process, other users' included): how near it was to its cores.
        "box_cpu_busy_pct": round(
            100 * (box[0] - box_before[0]) / max(box[1] - box_before[1], 1e-9), 1
        ),
        "wall_s": round(wall, 1),
        "load_before": load_before,
        "load_after": loadavg(),
    }


def _model_seconds(args: argparse.Namespace) -> float:
    """The model's time for one whole call: its latency, and when it streams, the reply's
    tokens."""
    if not args.first_token and not args.token_seconds:
        return float(args.latency)
    sys.path.insert(0, str(Path(__file__).parent))
    from fake_model import reply_tokens

    return args.latency + args.first_token + (reply_tokens() - 1) * args.token_seconds


def _first_word(args: argparse.Namespace, stats: Stats, deployment: Deployment) -> dict[str, Any]:
    """With a streaming model: the time from the POST to the reply's first word on the stream
    (the first `delta` event), against the model's own time to that word (its latency, first
    token, then the deciding fields' tokens). Where the difference goes, from the model's marks
    of each turn: POST → the model's request arrives (web, queue, worker, the turn up to its
    call; split at the message's and the turn's rows: the web process until the message is
    stored, then the queue until a worker starts the turn, then the turn until its call
    reaches the model), the model's own lateness (its first word written later than
    scheduled), and the first word written → its `delta` on the stream (worker, Redis, web)."""
    if not args.first_token and not args.token_seconds:
        return {}
    sys.path.insert(0, str(Path(__file__).parent))
    from fake_model import tokens_before_first_word

    model = args.latency + args.first_token + tokens_before_first_word() * args.token_seconds
    seen: dict[str, tuple[float, float]] = {}
    with contextlib.suppress(OSError):
        for line in deployment.marks.read_text().splitlines():
            mark = json.loads(line)
            found = REFERENCE.findall(mark["message"])
            if found and mark["arrived"] and mark["word_sent"]:
                seen[found[-1]] = (mark["arrived"], mark["word_sent"])
    rows = json.loads(
        subprocess.run(  # noqa: S603 (our own script)
            [sys.executable, str(Path(__file__)), "_marks"],
            input=json.dumps(list(stats.word_marks)),
            cwd=ROOT,
            env=deployment.env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    to_model, late, to_screen, web, queue, turn = [], [], [], [], [], []
    for reference, (sent, word) in stats.word_marks.items():
        if reference in seen:
            arrived, word_sent = seen[reference]
            to_model.append(arrived - sent)
            late.append(word_sent - arrived - model)
            to_screen.append(word - word_sent)
            if reference in rows:
                stored, started = rows[reference]
                web.append(stored - sent)
                queue.append(started - stored)
                turn.append(arrived - started)
    breakdown = {
        "marked_turns": len(to_model),
        "post_to_model_p50_ms": round(pct(to_model, 50) * 1000),
        "post_to_model_p95_ms": round(pct(to_model, 95) * 1000),
        **{
            f"{name}_p{p}_ms": round(pct(samples, p) * 1000)
            for name, samples in (("web", web), ("queue", queue), ("turn", turn))
            for p in (50, 95)
        },
        "model_late_p50_ms": round(pct(late, 50) * 1000),
        "model_late_p95_ms": round(pct(late, 95) * 1000),
        "word_to_screen_p50_ms": round(pct(to_screen, 50) * 1000),
        "word_to_screen_p95_ms": round(pct(to_screen, 95) * 1000),
    }
    return {
        "streamed_turns": len(stats.first_word),
        "model_first_word_ms": round(model * 1000),
        "first_word_p50_ms": round(pct(stats.first_word, 50) * 1000),
        "first_word_p95_ms": round(pct(stats.first_word, 95) * 1000),
        "first_word_p95_over_model_ms": round((pct(stats.first_word, 95) - model) * 1000),
        **breakdown,
    }


async def run_streams(args: argparse.Namespace, deployment: Deployment) -> dict[str, Any]:
    """S idle streams on one web process; then timed plain GETs and a few customers' turns."""
    import httpx

    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    stats = Stats()
    async with httpx.AsyncClient(limits=limits, timeout=60) as http:
        conversations = []
        for n in range(args.streams):
            key = deployment.keys[n % len(deployment.keys)]
            response = await http.post(
                f"{deployment.base}/api/v1/widget/conversations",
                json={},
                headers={"Origin": ORIGIN, "X-Widget-Key": key},
            )
            if response.status_code != 201:
                stats.errors.append(f"start {response.status_code}")
                continue
            conversations.append((key, response.json()["id"], response.json()["token"]))
        streams = [Stream(http, deployment.base, *c) for c in conversations]
        for n, stream in enumerate(streams):
            stream.start()
            if n % 50 == 49:
                await asyncio.sleep(0.2)
        opened = await asyncio.gather(
            *(asyncio.wait_for(s.opened.wait(), 120) for s in streams), return_exceptions=True
        )
        open_count = sum(1 for o in opened if o is True)
        await asyncio.sleep(3)
        threads = threads_of(deployment.web.pid)
        key, conversation, token = conversations[0]
        url = f"{deployment.base}/api/v1/widget/conversations/{conversation}/messages"
        headers = {"Origin": ORIGIN, "X-Widget-Key": key, "Authorization": f"Bearer {token}"}
        started = _measure_start(deployment)
        load_before = loadavg()
        for _ in range(args.gets):
            sent = time.monotonic()
            got = await http.get(url, headers=headers)
            stats.gets.append(time.monotonic() - sent)
            if got.status_code != 200:
                stats.errors.append(f"get {got.status_code}")
            await asyncio.sleep(0.05)
        wall_gets = time.monotonic() - started[0]
        web_idle_ms = (cpu_seconds(deployment.web.pid) - started[1]) * 1000 / wall_gets
        if args.replies:
            await asyncio.gather(
                *(
                    customer(
                        http,
                        deployment.base,
                        deployment.keys[n % len(deployment.keys)],
                        stats,
                        messages=args.messages,
                        think=1.0,
                        reply_timeout=args.reply_timeout,
                    )
                    for n in range(args.replies)
                )
            )
        failures = sum(s.failures for s in streams)
        still_open = sum(1 for s in streams if s.task and not s.task.done())
        for stream in streams:
            await stream.stop()
    return {
        "scenario": f"{args.streams} open streams on one web process",
        "streams_open": open_count,
        "streams_alive_at_end": still_open,
        "stream_failures": failures,
        "web_threads": threads,
        "get_p50_ms": round(pct(stats.gets, 50) * 1000, 1),
        "get_p95_ms": round(pct(stats.gets, 95) * 1000, 1),
        "web_cpu_ms_per_s_while_gets": round(web_idle_ms, 1),
        "replies": stats.turns,
        "reply_p95_s": round(pct(stats.reply, 95), 3),
        "commit_to_stream_p50_ms": round(pct(stats.commit_to_stream, 50) * 1000, 1),
        "commit_to_stream_p95_ms": round(pct(stats.commit_to_stream, 95) * 1000, 1),
        **error_counts(stats),
        "load_before": load_before,
        "load_after": loadavg(),
    }


async def run_flood(args: argparse.Namespace, deployment: Deployment) -> dict[str, Any]:
    """F tenants flooded for D seconds; P customers of tenant F+1 arrive once the flood runs."""
    import httpx

    flood, probe = Stats(), Stats()
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(limits=limits, timeout=120) as http:
        started = _measure_start(deployment)
        load_before = loadavg()
        until = time.time() + args.duration
        flooders = [
            customer(
                http,
                deployment.base,
                deployment.keys[n % args.flood_tenants],
                flood,
                messages=1_000_000,
                think=0.0,
                reply_timeout=args.reply_timeout,
                start_delay=0.5 * n / max(args.flood_customers * args.flood_tenants, 1),
                until=until,
            )
            for n in range(args.flood_customers * args.flood_tenants)
        ]
        probes = [
            customer(
                http,
                deployment.base,
                deployment.keys[args.flood_tenants],
                probe,
                messages=args.messages,
                think=args.think,
                reply_timeout=args.reply_timeout,
                start_delay=args.probe_after + n * args.think / max(args.probe_customers, 1),
            )
            for n in range(args.probe_customers)
        ]
        await asyncio.gather(*flooders, *probes)
        wall, web_ms, worker_ms = _cpu_ms(deployment, started, flood.turns + probe.turns)
    model_time = _model_seconds(args)
    capacity = args.worker_processes * args.worker_threads
    return {
        "scenario": f"{args.flood_tenants} tenants × {args.flood_customers} customers flooding "
        f"{args.duration:g} s (fleet: {capacity} threads) + {args.probe_customers} customers of "
        f"another tenant × {args.messages} msgs, think {args.think} s",
        "flood_turns": flood.turns,
        "flood_turns_per_s": round(flood.turns / wall, 2),
        "flood_reply_p95_s": round(pct(flood.reply, 95), 3),
        "probe_turns": probe.turns,
        "probe_reply_p50_s": round(pct(probe.reply, 50), 3),
        "probe_reply_p95_s": round(pct(probe.reply, 95), 3),
        "probe_p95_over_model": round(pct(probe.reply, 95) / model_time, 2),
        "probe_first_event_p95_ms": round(pct(probe.first_event, 95) * 1000),
        **error_counts(flood, probe),
        "web_cpu_ms_per_turn": round(web_ms, 1),
        "worker_cpu_ms_per_turn": round(worker_ms, 1),
        "wall_s": round(wall, 1),
        "load_before": load_before,
        "load_after": loadavg(),
    }


def warm_up(args: argparse.Namespace, deployment: Deployment) -> None:
    """A run not reported: every web and worker process imports the pipeline and fills its
    connection pools before the first measured one (two customers a tenant, one message each,
    arriving over a second)."""
    warm = argparse.Namespace(**{**vars(args), "customers": 2 * args.tenants, "slow": 0})
    warm.messages, warm.think, warm.ramp, warm.together = 1, 0.0, 1.0, False
    asyncio.run(run_customers(warm, deployment))


def add_service_arguments(parser: argparse.ArgumentParser) -> None:
    """The services a deployment runs on, and the fake model's latency."""
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--redis-url", required=True, help="broker and pub/sub")
    parser.add_argument("--cache-url", required=True)
    parser.add_argument("--latency", type=float, default=1.0, help="model seconds per call")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_setup":
        setup_tenants(int(sys.argv[3]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "_marks":
        stored_marks()
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_service_arguments(parser)
    parser.add_argument(
        "--first-token",
        type=float,
        default=0.0,
        help="a streamed reply's first token after this many seconds (after --latency)",
    )
    parser.add_argument(
        "--token-seconds", type=float, default=0.0, help="a streamed reply's next tokens' pace"
    )
    parser.add_argument(
        "--no-stream-replies",
        action="store_true",
        help="LLM_STREAM_REPLIES=false: replies are shown only once posted (the comparison)",
    )
    parser.add_argument("--tenants", type=int, default=10)
    parser.add_argument("--web-processes", type=int, default=2)
    parser.add_argument("--worker-threads", type=int, default=100)
    parser.add_argument(
        "--worker-processes",
        type=int,
        default=os.cpu_count() or 1,
        help="copies of the Procfile's worker (default: one per core, as docs/deployment.md says)",
    )
    parser.add_argument(
        "--cpu-affinity",
        choices=("off", "spread"),
        default="off",
        help="CPU_AFFINITY of the web and worker processes (docs/deployment.md)",
    )
    parser.add_argument("--reply-timeout", type=float, default=60.0)
    parser.add_argument("--messages", type=int, default=3)
    sub = parser.add_subparsers(dest="scenario", required=True)
    c = sub.add_parser("customers")
    c.add_argument("--customers", type=int, action="append", required=True)
    c.add_argument("--think", type=float, default=5.0)
    c.add_argument("--ramp", type=float, default=5.0, help="seconds over which customers arrive")
    c.add_argument("--slow", type=int, default=0, help="extra customers with 10-call turns")
    c.add_argument(
        "--together",
        action="store_true",
        help="customers open the widget over --ramp s, then all send their first message at the "
        "same moment (a flash sale)",
    )
    f = sub.add_parser("flood")
    f.add_argument("--flood-tenants", type=int, default=4)
    f.add_argument("--flood-customers", type=int, default=20, help="per flooded tenant")
    f.add_argument("--duration", type=float, default=40.0, help="seconds the flood lasts")
    f.add_argument("--probe-customers", type=int, default=5)
    f.add_argument("--probe-after", type=float, default=8.0, help="seconds into the flood")
    f.add_argument("--think", type=float, default=3.0, help="the probe customers' think time")
    s = sub.add_parser("streams")
    s.add_argument("--streams", type=int, default=1000)
    s.add_argument("--gets", type=int, default=200)
    s.add_argument("--replies", type=int, default=10)
    args = parser.parse_args()
    if args.scenario == "streams":
        args.web_processes = 1
    else:
        args.replies = 0
    if args.scenario == "flood":
        args.tenants = args.flood_tenants + 1
    deployment = deploy(args)
    results = []
    try:
        if args.scenario == "customers":
            levels = args.customers
            warm_up(args, deployment)
            for level in levels:
                args.customers = level
                results.append(asyncio.run(run_customers(args, deployment)))
                sys.stdout.write(json.dumps(results[-1]) + "\n")
                sys.stdout.flush()
        elif args.scenario == "flood":
            warm_up(args, deployment)
            results.append(asyncio.run(run_flood(args, deployment)))
            sys.stdout.write(json.dumps(results[-1]) + "\n")
        else:
            results.append(asyncio.run(run_streams(args, deployment)))
            sys.stdout.write(json.dumps(results[-1]) + "\n")
    finally:
        undeploy(deployment)
    sys.stderr.write(f"logs: {deployment.logs}\n")
    if results and statistics.mean([r["errors"] for r in results]) > 0:
        sys.stderr.write("errors seen — see the logs\n")


if __name__ == "__main__":
    main()
