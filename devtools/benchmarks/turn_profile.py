"""Where the CPU of a widget message goes: the web's `POST …/messages` and the worker's adaptive
turn, measured apart, in one process, and profiled.

Each message is POSTed through Django's test client (widget key, origin, visitor token,
throttles, the serializer, the message stored) with the turn's queueing captured instead of
run, so the POST returns its 202 like the web process does; the turn then runs through
`turn_process` (what a worker thread runs) with the real `openai` SDK against the test suite's
fake OpenAI-compatible server answering an adaptive `assess` at once. CPU is the calling
thread's own (`time.thread_time`: the fake server's threads are not in it). SQL queries are
counted per POST and per turn. Then one more batch of each runs under cProfile and the top
functions by own time and by cumulative time are printed.

Run from the project root:

    .venv/bin/python devtools/benchmarks/turn_profile.py [--messages 200] [--top 25]
    .venv/bin/python devtools/benchmarks/turn_profile.py --database-url postgres://postgres@127.0.0.1:5432/postgres

SQLite (a throwaway file) by default; with `--database-url` a throwaway database is created on
that PostgreSQL server and dropped at the end (as in turn_overhead.py). With
`--profile-out <dir>` the two profiles are also written there (`post.prof`, `turn.prof`).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import pstats
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "devtools" / "benchmarks"))  # its sibling

from turn_overhead import BUSINESS_INFO  # noqa: E402

from devtools.benchmarks.bench_setup import (  # noqa: E402
    instant_fake_llm,
    throwaway_django,
    unthrottled,
    widget_send,
    widget_start,
    widget_tenant,
)
from devtools.fake_llm import assess_reply  # noqa: E402

ORIGIN = "https://bench.example"
MESSAGES_PER_CONVERSATION = 6
ANSWER = assess_reply("We ship within one business day; standard delivery takes 3-7 days.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=200, help="Measured messages.")
    parser.add_argument("--profiled", type=int, default=20, help="Profiled messages.")
    parser.add_argument("--top", type=int, default=25, help="Rows of each profile table.")
    parser.add_argument("--database-url", default="", help="A PostgreSQL server (throwaway db).")
    parser.add_argument("--profile-out", default="", help="Write post.prof / turn.prof here.")
    parser.add_argument("--no-profile", action="store_true", help="Only the CPU/SQL table.")
    parser.add_argument(
        "--show-queries", action="store_true", help="Print one POST's and one turn's SQL."
    )
    parser.add_argument(
        "--statements",
        action="store_true",
        help="Per statement of the measured POSTs and turns: the thread's CPU since the "
        "previous one ended (the ORM building it, and the code between), median.",
    )
    parser.add_argument(
        "--monthly-token-budget",
        type=int,
        default=0,
        help="Give the plan this monthly token budget (0: none), so each turn reserves and "
        "commits against the month's counter as a budgeted shop's turns do (load.py's shops).",
    )
    parser.add_argument(
        "--visitor-daily-token-budget",
        type=int,
        default=0,
        help="Give the plan this daily token budget per visitor (0: none, as load.py runs it; "
        "a new plan's default holds one), so each turn is admitted against the visitor's day.",
    )
    args = parser.parse_args()

    with throwaway_django("guidedesk-profile-", args.database_url):
        run(args)


class StatementGaps:
    """One part's statements in order (the POST's or the turn's), each with the thread's CPU from
    the end of the one before (the first: from the part's start) to its own start: what building
    it cost, with the code between."""

    def __init__(self) -> None:
        self.by_position: dict[tuple[int, str], list[float]] = {}

    @contextlib.contextmanager
    def measure(self, connection: Any) -> Iterator[None]:
        mark = [time.thread_time()]
        position = [0]

        def wrapper(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
            gap = (time.thread_time() - mark[0]) * 1000
            key = (position[0], " ".join(sql.split())[:90])
            self.by_position.setdefault(key, []).append(gap)
            position[0] += 1
            try:
                return execute(sql, params, many, context)
            finally:
                mark[0] = time.thread_time()

        with connection.execute_wrapper(wrapper):
            yield

    def print(self, out: Any, part: str) -> None:
        out(f"{part}:\n\n| # | CPU ms before it (median) | runs | statement |\n")
        out("|---:|---:|---:|---|\n")
        for (position, sql), gaps in sorted(self.by_position.items()):
            out(f"| {position} | {statistics.median(gaps):.2f} | {len(gaps)} | `{sql}` |\n")
        out("\n")


def run(args: argparse.Namespace) -> None:
    from django.conf import settings
    from django.db import connection
    from django.test.utils import (
        CaptureQueriesContext,
        setup_test_environment,
    )

    from apps.core.tenancy import tenant_scope
    from apps.reasoning import services as reasoning_services
    from apps.reasoning.models import ReasoningTrace, TraceStatus

    setup_test_environment()
    client, http = widget_tenant(ORIGIN, business_info=BUSINESS_INFO)
    client.plan.monthly_token_budget = args.monthly_token_budget
    client.plan.visitor_daily_token_budget = args.visitor_daily_token_budget
    client.plan.save(update_fields=["monthly_token_budget", "visitor_daily_token_budget"])
    rest = unthrottled(settings.REST_FRAMEWORK)
    rest["DEFAULT_THROTTLE_RATES"]["widget_tokens"] = ""  # the token window off, as load.py runs it

    # The web process queues the turn for a worker; here the queueing is captured so the POST
    # and the turn are measured apart.
    queued: list[int] = []

    def enqueue(message_id: int, client_id: int) -> bool:
        queued.append(message_id)
        return True  # queued for a worker, as the broker answers

    reasoning_services._enqueue = enqueue

    state: dict[str, str] = {}

    def post(n: int) -> int:
        if n % MESSAGES_PER_CONVERSATION == 0:
            state.update(widget_start(http))
        response = widget_send(http, state, f"When will order TH-{10000 + n} ship?")
        if response.status_code != 202:
            raise SystemExit(f"unexpected answer {response.status_code}: {response.content!r}")
        return queued.pop()

    def turn(message_id: int) -> None:
        with tenant_scope(client.pk):
            reasoning_services.turn_process(message_id=message_id)

    def check(message_id: int) -> None:
        trace = ReasoningTrace.objects.unscoped("bench").get(user_message_id=message_id)
        if trace.status != TraceStatus.DONE or trace.llm_calls != 1 or trace.escalated:
            raise SystemExit(f"turn did not run as scripted: {trace.status} {trace.llm_calls}")

    with instant_fake_llm(REST_FRAMEWORK=rest) as llm:
        llm.default("assess", ANSWER)
        n = 0
        for _ in range(10):  # warm-up
            message_id = post(n)
            turn(message_id)
            check(message_id)
            n += 1
        if n % MESSAGES_PER_CONVERSATION == 0:
            n += 1  # measure the queries of a message of a started conversation
        with CaptureQueriesContext(connection) as captured:
            message_id = post(n)
        post_queries = len(captured)
        if args.show_queries:
            sys.stderr.write(f"\n## POST: {post_queries} queries\n")
            for query in captured.captured_queries:
                sys.stderr.write(f"{query['sql'][:300]}\n")
        with CaptureQueriesContext(connection) as captured:
            turn(message_id)
        check(message_id)
        turn_queries = len(captured)
        if args.show_queries:
            sys.stderr.write(f"\n## turn: {turn_queries} queries\n")
            for query in captured.captured_queries:
                sys.stderr.write(f"{query['sql'][:300]}\n")
        n += 1

        post_cpu, turn_cpu = [], []
        gaps = {"POST": StatementGaps(), "turn": StatementGaps()}
        for _ in range(args.messages):
            started = time.thread_time()
            if args.statements:
                with gaps["POST"].measure(connection):
                    message_id = post(n)
            else:
                message_id = post(n)
            post_cpu.append((time.thread_time() - started) * 1000)
            started = time.thread_time()
            if args.statements:
                with gaps["turn"].measure(connection):
                    turn(message_id)
            else:
                turn(message_id)
            turn_cpu.append((time.thread_time() - started) * 1000)
            check(message_id)
            n += 1

        # (Wall clock: cProfile's times include the wait for the fake model, `poll`.)
        profiles = {"post": cProfile.Profile(), "turn": cProfile.Profile()}
        if not args.no_profile:
            for _ in range(args.profiled):
                profiles["post"].enable()
                message_id = post(n)
                profiles["post"].disable()
                profiles["turn"].enable()
                turn(message_id)
                profiles["turn"].disable()
                check(message_id)
                n += 1

    out = sys.stdout.write
    out(f"database: {connection.vendor}; {args.messages} messages (adaptive, one `assess`)\n\n")
    if args.statements:
        for part, part_gaps in gaps.items():
            part_gaps.print(out, part)
    out("| part | SQL queries | CPU ms median | CPU ms mean | CPU ms p90 | Python calls |\n")
    out("|---|---:|---:|---:|---:|---:|\n")
    for label, name, sql, cpu in (
        ("POST …/messages (web)", "post", post_queries, post_cpu),
        ("turn (worker)", "turn", turn_queries, turn_cpu),
    ):
        p90 = sorted(cpu)[int(len(cpu) * 0.9) - 1]
        calls = (
            "—"
            if args.no_profile
            else f"{pstats.Stats(profiles[name]).total_calls / args.profiled:,.0f}"  # type: ignore[attr-defined]
        )
        out(
            f"| {label} | {sql} | {statistics.median(cpu):.2f} | "
            f"{statistics.fmean(cpu):.2f} | {p90:.2f} | {calls} |\n"
        )
    if args.no_profile:
        return
    for name, profile in profiles.items():
        if args.profile_out:
            Path(args.profile_out).mkdir(parents=True, exist_ok=True)
            profile.dump_stats(f"{args.profile_out}/{name}.prof")
        for order in ("tottime", "cumulative"):
            buffer = io.StringIO()
            stats = pstats.Stats(profile, stream=buffer)
            stats.strip_dirs().sort_stats(order).print_stats(args.top)
            out(f"\n## {name}: top {args.top} by {order} ({args.profiled} messages)\n")
            out(buffer.getvalue().split("\n", 4)[-1])


if __name__ == "__main__":
    main()
