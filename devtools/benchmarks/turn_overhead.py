"""GuideDesk's own work per turn, without the model: SQL queries, CPU time of the pipeline and
Python function calls, for a one-call turn (standard `respond`, adaptive `assess`) and a
two-call turn (adaptive: `assess` → fetch a policy → `assess`).

Each turn runs through `turn_process` (what a worker runs) with the real `openai` SDK against the
test suite's fake OpenAI-compatible server answering with zero latency. CPU time is the turn
thread's own (`time.thread_time`: the fake server's threads and the wait for the model are not
in it), so it is steadier than wall time on a busy machine; the Python function-call count
(cProfile, one extra profiled turn per scenario) does not depend on the machine at all.

Run from the project root:

    .venv/bin/python devtools/benchmarks/turn_overhead.py [--turns 200]
    .venv/bin/python devtools/benchmarks/turn_overhead.py --database-url postgres://postgres@127.0.0.1:5432/postgres

By default it uses a throwaway SQLite file (never the project's database). With
`--database-url` (PostgreSQL, as in production) it connects to that server with the URL's
credentials and database, creates a throwaway database `bench_turn_overhead_<pid>` there, runs in
it and drops it at the end: it never writes to a database it did not create. It prints a
Markdown table. With `TURN_PROFILE_DIR=<dir>` it also writes each scenario's profiled turn there
(`<mode>-<calls>.prof`, for `python -m pstats` or snakeviz); `--show-queries` prints the SQL of
each scenario's last measured turn to stderr.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from devtools.benchmarks.bench_setup import instant_fake_llm, throwaway_django  # noqa: E402
from devtools.fake_llm import assess_reply  # noqa: E402

ANSWER = "We ship within one business day; standard delivery takes 3-7 days."
BUSINESS_INFO = {
    "about": {"description": "Outdoor gear."},
    "contact": {"hours": "9-5", "email": "help@bench.example"},
    "policies": {"shipping": "We ship within one business day. Delivery takes 3-7 days."},
    "faqs": [{"question": "Do you ship abroad?", "answer": "Yes, to 30 countries."}],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200, help="Turns per scenario.")
    parser.add_argument(
        "--database-url",
        default="",
        help="A PostgreSQL server to run on (postgres://user@host:port/db): a throwaway "
        "database is created there and dropped at the end. Default: a throwaway SQLite file.",
    )
    parser.add_argument(
        "--show-queries", action="store_true", help="Print each scenario's SQL to stderr."
    )
    args = parser.parse_args()

    with throwaway_django("guidedesk-overhead-", args.database_url):
        run(args)


def run(args: argparse.Namespace) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from apps.clients.models import AIMode, Client, Plan
    from apps.conversations.models import Role
    from apps.conversations.services import conversation_create, message_append
    from apps.core.tenancy import tenant_scope
    from apps.reasoning.models import ReasoningTrace
    from apps.reasoning.services import turn_process

    clients: dict[str, Client] = {
        mode: Client.objects.create(
            slug=f"bench-{mode}",
            name="Bench Outfitters",
            plan=Plan.objects.create(slug=f"bench-{mode}", name=mode, ai_mode=mode),
            business_info=BUSINESS_INFO,
        )
        for mode in (AIMode.STANDARD, AIMode.ADAPTIVE)
    }
    scenarios: list[tuple[str, str, list[tuple[str, dict[str, Any]]]]] = [
        ("one call", AIMode.STANDARD, [("respond", {"response": ANSWER, "tool_call": None})]),
        ("one call", AIMode.ADAPTIVE, [("assess", assess_reply(ANSWER))]),
        (
            "two calls",
            AIMode.ADAPTIVE,
            [
                ("assess", assess_reply(confidence=5, needs_more_context=["policies.shipping"])),
                ("assess", assess_reply(ANSWER)),
            ],
        ),
    ]
    rows = []
    with instant_fake_llm() as llm:

        def prepare(client: Client, script: list[tuple[str, dict[str, Any]]]) -> int:
            """A new conversation with one stored customer message; its replies queued."""
            for step, reply in script:
                llm.script(step, reply)
            conversation, _ = conversation_create(client=client)
            message = message_append(
                client=client, conversation=conversation, role=Role.USER, text="Shipping time?"
            )
            return message.pk

        def check(message_id: int, calls: int) -> None:
            trace = ReasoningTrace.objects.unscoped("the benchmark reads its own turn").get(
                user_message_id=message_id
            )
            if trace.llm_calls != calls or trace.escalated:
                raise SystemExit(f"turn did not run as scripted: {trace.llm_calls} calls")

        for label, mode, script in scenarios:
            client = clients[mode]
            for _ in range(5):  # warm-up
                message_id = prepare(client, script)
                with tenant_scope(client.pk):
                    turn_process(message_id=message_id)
                check(message_id, len(script))
            queries, cpu = [], []
            for _ in range(args.turns):
                message_id = prepare(client, script)
                connection.queries_log.clear()
                with CaptureQueriesContext(connection) as captured:
                    started = time.thread_time()
                    with tenant_scope(client.pk):
                        turn_process(message_id=message_id)
                    cpu.append((time.thread_time() - started) * 1000)
                queries.append(len(captured))
                check(message_id, len(script))
            if args.show_queries:
                sys.stderr.write(f"\n## {label}, {mode}: {len(captured)} queries\n")
                for query in captured.captured_queries:
                    sys.stderr.write(f"{query['sql'][:300]}\n")
            message_id = prepare(client, script)
            profile = cProfile.Profile()
            profile.enable()
            with tenant_scope(client.pk):
                turn_process(message_id=message_id)
            profile.disable()
            check(message_id, len(script))
            calls = pstats.Stats(profile).total_calls  # type: ignore[attr-defined]
            if os.environ.get("TURN_PROFILE_DIR"):
                profile.dump_stats(f"{os.environ['TURN_PROFILE_DIR']}/{mode}-{len(script)}.prof")
            rows.append((label, mode, statistics.mean(queries), statistics.median(cpu), calls))

    out = sys.stdout.write
    out(f"database: {connection.vendor}\n\n")
    out("| turn | mode | SQL queries/turn | pipeline CPU ms/turn (median) | Python calls/turn |\n")
    out("|---|---|---:|---:|---:|\n")
    for label, mode, sql, cpu_ms, calls in rows:
        out(f"| {label} | {mode} | {sql:.1f} | {cpu_ms:.1f} | {calls:,} |\n")


if __name__ == "__main__":
    main()
