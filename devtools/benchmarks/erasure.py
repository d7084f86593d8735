"""Erasure benchmark (docs/benchmarks.md, "Erasing a customer"): one customer with N
conversations of T turns each — messages (customer, reply, three internal steps per turn),
traces with their steps, usage records, a tool run, a pending action, an escalation and a note
per conversation — erased by `subject_erase`, in a temporary database like `bench_modes`.
Reports the wall time (median and max of the rounds), the SQL statements and the rows touched."""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from apps.billing.models import UsageRecord
from apps.clients.models import Client, Plan
from apps.conversations.models import Conversation, Kind, Message, Role, Visibility
from apps.escalations.models import Escalation
from apps.notes.models import Note
from apps.privacy.selectors import SubjectMatch
from apps.privacy.services import subject_erase
from apps.reasoning.models import ReasoningStep, ReasoningTrace
from apps.tools.models import ClientTool, PendingAction, ToolExecution
from devtools.benchmarks.modes import temporary_database


@dataclass
class ErasureResult:
    conversations: int
    turns: int
    rows: int
    seconds: list[float]
    queries: int


def _customer(client: Client, tool: ClientTool, email: str, conversations: int, turns: int) -> None:
    now = timezone.now()
    for c in range(conversations):
        conv = Conversation.objects.create(
            client=client,
            contact_email=email,
            contact_email_confirmed_at=now,  # a search by e-mail takes confirmed ones only
            visitor_id=f"v-{email}",
            last_message_at=now,
        )
        messages: list[Message] = []
        seq = 0
        for t in range(turns):
            # Each customer's own order numbers (the erasure redacts them wherever they appear).
            order = f"TH-{email[:5].upper()}{c:03d}{t:02d}"
            for role, visibility, kind, text in (
                (Role.USER, Visibility.VISIBLE, Kind.TEXT, f"Order {order}, {email}"),
                (Role.ASSISTANT, Visibility.INTERNAL, Kind.ASSESSMENT, "assessment"),
                (Role.ASSISTANT, Visibility.INTERNAL, Kind.CRITIQUE, "critique"),
                (Role.SYSTEM, Visibility.INTERNAL, Kind.GUARD, "guard"),
                (
                    Role.ASSISTANT,
                    Visibility.VISIBLE,
                    Kind.TEXT,
                    f"Order {order} is on its way",
                ),
            ):
                seq += 1
                messages.append(
                    Message(
                        client=client,
                        conversation=conv,
                        seq=seq,
                        role=role,
                        visibility=visibility,
                        kind=kind,
                        text=text,
                        data={"params": {"order_id": f"TH-{c:03d}{t:02d}"}},
                    )
                )
        Message.objects.bulk_create(messages)
        users = [m for m in messages if m.role == Role.USER]
        traces = ReasoningTrace.objects.bulk_create(
            [
                ReasoningTrace(client=client, conversation=conv, user_message=m, mode="adaptive")
                for m in users
            ]
        )
        ReasoningStep.objects.bulk_create(
            [
                ReasoningStep(
                    client=client,
                    trace=trace,
                    index=i,
                    name=name,
                    input_summary=f"customer said: {email}",
                    output={"response": "reply", "params": {"email": email}},
                )
                for trace in traces
                for i, name in enumerate(("assess", "critique", "compose"))
            ]
        )
        UsageRecord.objects.bulk_create(
            [
                UsageRecord(
                    client=client,
                    conversation=conv,
                    trace=trace,
                    mode="adaptive",
                    step=step,
                    model="gpt-4o-mini",
                    prompt_tokens=600,
                    completion_tokens=50,
                    cost_usd=Decimal("0.0001200"),
                    billed_usd=Decimal("0.0001800"),
                )
                for trace in traces
                for step in ("assess", "critique")
            ]
        )
        pending = PendingAction.objects.create(
            client=client,
            conversation=conv,
            tool=tool,
            params={"order_id": f"TH-{email[:5].upper()}{c:03d}00"},
            params_hash="0" * 64,
            proposed_in=users[0],
            expires_at=now + timedelta(minutes=10),
            idempotency_key=f"pa-{uuid.uuid4().hex}",
        )
        ToolExecution.objects.create(
            client=client,
            conversation=conv,
            trace=traces[0],
            tool=tool,
            pending_action=pending,
            params=pending.params,
            idempotency_key=pending.idempotency_key,
            status="succeeded",
            result={"status": "cancelled", "email": email},
        )
        Escalation.objects.create(
            client=client, conversation=conv, reason="customer_request", detail=email
        )
        Note.objects.create(
            client=client,
            type="tip",
            content=f"{email} prefers e-mail",
            session_id="bench",
            conversation=conv,
            source="staff",
        )


def run(
    *, conversations: int, turns: int, rounds: int, progress: Callable[[str], None]
) -> ErasureResult:
    seconds: list[float] = []
    queries = rows = 0
    with temporary_database():
        plan = Plan.objects.create(slug="bench", name="Bench")
        for r in range(rounds):
            client = Client.objects.create(slug=f"bench-{r}", name=f"Bench {r}", plan=plan)
            tool = ClientTool.objects.create(
                client=client, name="cancel_order", kind="destructive", parameters={}
            )
            email = f"customer{r}@example.org"
            _customer(client, tool, email, conversations, turns)
            # Another customer of the same client, left alone: the erasure must not scan them.
            _customer(client, tool, f"other{r}@example.org", conversations, turns)
            with CaptureQueriesContext(connection) as captured:
                started = time.perf_counter()
                result = subject_erase(
                    client=client, match=SubjectMatch("email", email), channel="command"
                )
                seconds.append(time.perf_counter() - started)
            queries = len(captured.captured_queries)
            rows = sum(result.counts.values())
            progress(f"round {r + 1}: {seconds[-1]:.3f} s, {queries} queries, {rows} rows")
            slowest = sorted(captured.captured_queries, key=lambda q: -float(q["time"]))[:3]
            for q in slowest:
                progress(f"  {q['time']} s  {q['sql'][:110]}")
    return ErasureResult(conversations, turns, rows, seconds, queries)


def markdown(result: ErasureResult) -> str:
    median = statistics.median(result.seconds)
    return "\n".join(
        [
            "| conversations | turns each | rows erased | SQL | median s | max s |",
            "|---:|---:|---:|---:|---:|---:|",
            f"| {result.conversations} | {result.turns} | {result.rows:,} | {result.queries} "
            f"| {median:.3f} | {max(result.seconds):.3f} |",
        ]
    )
