"""How long the outcomes report takes (the console page, the admin page and GET
/api/v1/outcomes/ all run `outcome_report`): one client with N conversations over 30 days —
two to six messages each, one in ten handed off, one in five rated, one usage record each, one
visitor in four coming back; message times are their insert time) — and the report for the 30
days grouped by day, timed R times.

Run from the project root against a PostgreSQL database you can throw away (it migrates it and
deletes the benchmark's client afterwards):

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/gd_outcomes \\
        .venv/bin/python devtools/benchmarks/outcomes_report.py [--conversations 10000] [--runs 20]

Without DATABASE_URL it uses a throwaway SQLite file. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    workdir = tempfile.TemporaryDirectory()
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.test"
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{workdir.name}/bench.sqlite3")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from apps.billing.models import UsageRecord
    from apps.clients.models import Client, Plan
    from apps.conversations.models import Conversation, ConversationRating, Message
    from apps.core.tenant_sql import sql_rows
    from apps.escalations.models import Escalation
    from apps.outcomes.selectors import outcome_report

    call_command("migrate", verbosity=0, interactive=False)
    plan, _ = Plan.objects.get_or_create(slug="bench-outcomes", defaults={"name": "Bench"})
    Client.objects.filter(slug="bench-outcomes").delete()
    client = Client.objects.create(slug="bench-outcomes", name="Bench outcomes", plan=plan)
    rng = random.Random(26)  # noqa: S311  (repeatable synthetic data, not secrets)
    start = date(2026, 10, 1)
    base = datetime(2026, 10, 1, tzinfo=timezone.get_current_timezone())
    n = args.conversations
    try:
        conversations = Conversation.objects.bulk_create(
            Conversation(client=client, visitor_id=f"v{rng.randrange(n * 3 // 4)}")
            for _ in range(n)
        )
        starts = [base + timedelta(seconds=rng.randrange(30 * 86400)) for _ in conversations]
        for conversation, started in zip(conversations, starts, strict=True):
            conversation.created_at = started
        Conversation.objects.for_client(client).bulk_update(conversations, ["created_at"], 2000)
        messages, escalations, ratings, usage = [], [], [], []
        for conversation, started in zip(conversations, starts, strict=True):
            for seq in range(1, rng.randrange(2, 7) + 1):
                role = "user" if seq % 2 else "assistant"
                when = started + timedelta(seconds=seq * rng.randrange(2, 60))
                messages.append(
                    Message(
                        client=client,
                        conversation=conversation,
                        seq=seq,
                        role=role,
                        text=f"{role} {seq}",
                        created_at=when,
                    )
                )
            if rng.random() < 0.1:
                escalations.append(
                    Escalation(client=client, conversation=conversation, reason="customer_request")
                )
            if rng.random() < 0.2:
                ratings.append(
                    ConversationRating(
                        client=client, conversation=conversation, score=rng.randrange(1, 6)
                    )
                )
            usage.append(
                UsageRecord(
                    client=client,
                    conversation=conversation,
                    mode="adaptive",
                    step="assess",
                    model="gpt-4o-mini",
                    cost_usd=Decimal("0.0004"),
                    billed_usd=Decimal("0.0012"),
                )
            )
        Message.objects.bulk_create(messages, batch_size=5000)
        Escalation.objects.bulk_create(escalations)
        ConversationRating.objects.bulk_create(ratings)
        UsageRecord.objects.bulk_create(usage, batch_size=5000)
        if connection.vendor == "postgresql":
            sql_rows("benchmarks.analyze_all", "ANALYZE", client_id=None)
        timings = []
        for _ in range(args.runs):
            began = time.perf_counter()
            with CaptureQueriesContext(connection) as queries:
                report = outcome_report(
                    client=client, start=start, end=start + timedelta(days=29), group_by="day"
                )
            timings.append((time.perf_counter() - began) * 1000)
        timings.sort()
        p95 = timings[max(0, int(len(timings) * 0.95) - 1)]
        out = sys.stdout.write
        sql_ms = sum(float(q["time"]) for q in queries.captured_queries) * 1000
        out("| database | conversations | messages | queries | SQL ms | p50 ms | p95 ms |\n")
        out("|---|---:|---:|---:|---:|---:|---:|\n")
        out(
            f"| {connection.vendor} | {report.totals.conversations} | {len(messages)} | "
            f"{len(queries)} | {sql_ms:.0f} | {statistics.median(timings):.0f} | {p95:.0f} |\n"
        )
    finally:
        Client.objects.filter(pk=client.pk).delete()


if __name__ == "__main__":
    main()
