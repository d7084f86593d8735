"""Latency of the widget's `POST /api/v1/widget/conversations/<id>/messages`, end to end in one
process: Django's test client → widget API (key, origin, token, throttles) → the turn pipeline
run eagerly (adaptive plan, one `assess` call, no tool) → the real `openai` SDK → a local fake
OpenAI-compatible server answering with zero added latency. So the numbers are GuideDesk's own
overhead per customer message, not a model's.

Run from the project root:

    .venv/bin/python devtools/benchmarks/widget_latency.py [--requests 200] [--warmup 10]

It uses a throwaway SQLite file (never the project's database) and prints a small table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from devtools.benchmarks.bench_setup import (  # noqa: E402
    instant_fake_llm,
    throwaway_django,
    unthrottled,
    widget_send,
    widget_start,
    widget_tenant,
)
from devtools.fake_llm import assess_reply  # noqa: E402

MESSAGES_PER_CONVERSATION = 10  # keeps the history (and so the prompt) at a realistic size
ORIGIN = "https://bench.example"
ANSWER = assess_reply("We ship within one business day; standard delivery takes 3-7 days.")


def percentile(samples: list[float], pct: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(samples)
    rank = max(1, round(pct / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def progress(done: int, total: int) -> None:
    width = 30
    filled = width * done // total
    sys.stderr.write(f"\r  [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()

    with throwaway_django("guidedesk-bench-"):
        bench(args)


def bench(args: argparse.Namespace) -> None:
    from django.conf import settings
    from django.db import connection
    from django.test.utils import (
        CaptureQueriesContext,
        setup_test_environment,
    )

    from apps.conversations.models import Message
    from apps.reasoning.models import ReasoningTrace

    setup_test_environment()
    _, http = widget_tenant(ORIGIN)
    rest = unthrottled(settings.REST_FRAMEWORK)

    with instant_fake_llm(REST_FRAMEWORK=rest) as llm:
        llm.default("assess", ANSWER)
        state: dict[str, str] = {}

        def post(n: int) -> tuple[float, int]:
            """Send message number n (every 10th starts a new conversation first)."""
            if n % MESSAGES_PER_CONVERSATION == 0:
                state.update(widget_start(http))
            text = f"When will order TH-{10000 + n} ship?"
            begin = time.perf_counter()
            response = widget_send(http, state, text)
            elapsed = (time.perf_counter() - begin) * 1000
            if response.status_code != 201 or len(response.json()["replies"]) != 1:
                raise SystemExit(f"unexpected answer {response.status_code}: {response.content!r}")
            return elapsed, response.status_code

        sys.stderr.write(f"Warming up ({args.warmup} requests)…\n")
        for n in range(args.warmup):
            post(n)
        # The queries of one message (the conversation already started), read before the next
        # request resets Django's query log.
        n = args.warmup + (1 if args.warmup % MESSAGES_PER_CONVERSATION == 0 else 0)
        with CaptureQueriesContext(connection) as captured:
            post(n)
        queries_per_message = len(captured)
        llm_calls_before = len(llm.requests)

        sys.stderr.write(f"Measuring {args.requests} × POST …/messages\n")
        samples: list[float] = []
        wall = time.perf_counter()
        for i in range(args.requests):
            samples.append(post(n + 1 + i)[0])
            progress(i + 1, args.requests)
        wall = time.perf_counter() - wall
        llm_calls = len(llm.requests) - llm_calls_before

    turns = (
        ReasoningTrace.objects.unscoped("the benchmark counts what it stored")
        .filter(status="done")
        .count()
    )
    rows = [
        ("requests", f"{len(samples)}"),
        ("LLM calls per message", f"{llm_calls / len(samples):.1f}"),
        ("DB queries per message", f"{queries_per_message}"),
        ("p50", f"{percentile(samples, 50):.1f} ms"),
        ("p95", f"{percentile(samples, 95):.1f} ms"),
        ("p99", f"{percentile(samples, 99):.1f} ms"),
        ("mean", f"{statistics.fmean(samples):.1f} ms"),
        ("max", f"{max(samples):.1f} ms"),
        ("throughput (1 thread)", f"{len(samples) / wall:.0f} msg/s"),
    ]
    sys.stderr.flush()
    out = sys.stdout
    out.write("\nPOST /api/v1/widget/conversations/<id>/messages — eager adaptive turn, fake LLM\n")
    out.write(
        f"(Python {sys.version.split()[0]}, SQLite, {turns} turns, "
        f"{Message.objects.unscoped('the benchmark counts what it stored').count()} "
        "messages stored)\n\n"
    )
    width = max(len(name) for name, _ in rows)
    out.write(f"  {'metric'.ljust(width)}  value\n  {'-' * width}  {'-' * 12}\n")
    for name, value in rows:
        out.write(f"  {name.ljust(width)}  {value}\n")


if __name__ == "__main__":
    main()
