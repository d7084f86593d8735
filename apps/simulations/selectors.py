"""Reads for simulations — always within one client: cases, runs, and the saved conversations a
replay can use with what happened in each of their turns."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Exists, F, OuterRef, QuerySet, Sum
from django.utils import timezone

from apps.clients.models import Client
from apps.conversations.models import Conversation, Kind, Message, Role
from apps.escalations.models import Escalation
from apps.reasoning.models import ReasoningStep, ReasoningTrace, TraceKind
from apps.simulations.models import CaseRun, RunStatus, SimCase, SimulationRun
from apps.tools.models import ExecutionStatus, PendingAction, ToolExecution
from apps.tools.pending import params_hash

__all__ = [
    "case_runs_of",
    "replay_conversations",
    "replay_customer_messages",
    "replay_turns",
    "runs_in_flight",
    "simcase_list",
    "simulation_run_get",
    "simulation_run_list",
    "tokens_held_by_runs_in_flight",
]


def _uuid(value: Any) -> uuid.UUID | None:
    try:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    except ValueError:
        return None


def simcase_list(
    *, client: Client, suite: str | None = None, tags: list[str] | None = None
) -> QuerySet[SimCase]:
    """The client's cases, in suite and name order; `tags`: cases carrying any of them (a JSON
    list: matched here, the same on every database)."""
    cases = SimCase.objects.for_client(client).order_by("suite", "name")
    if suite:
        cases = cases.filter(suite=suite)
    wanted = set(tags or [])
    if wanted:
        tagged = [pk for pk, have in cases.values_list("pk", "tags") if wanted & set(have or [])]
        cases = cases.filter(pk__in=tagged)
    return cases


def simulation_run_list(*, client: Client, limit: int | None = None) -> QuerySet[SimulationRun]:
    """The client's runs, newest first (`limit`: the most recent ones only)."""
    runs = (
        SimulationRun.objects.for_client(client)
        .select_related("created_by")
        .order_by("-created_at", "-id")
    )
    return runs[:limit] if limit else runs


def simulation_run_get(*, client: Client, public_id: str | uuid.UUID) -> SimulationRun | None:
    """The client's run with this public id; None for a malformed, unknown or another client's
    id alike."""
    parsed = _uuid(public_id)
    if parsed is None:
        return None
    return SimulationRun.objects.for_client(client).filter(public_id=parsed).first()


def case_runs_of(*, client: Client, run: SimulationRun) -> list[CaseRun]:
    return list(
        CaseRun.objects.for_client(client).filter(run=run).order_by("case_name", "side", "attempt")
    )


def replay_conversations(
    *,
    client: Client,
    since: datetime | None = None,
    until: datetime | None = None,
    escalated_only: bool = False,
    with_tool: bool = False,
    limit: int = 100,
) -> list[Conversation]:
    """The client's saved conversations a replay may use (newest first): those with at least
    one customer message, optionally in a period, escalated, or with a tool call (run or put to
    the customer)."""
    conversations = Conversation.objects.for_client(client).filter(
        Exists(
            Message.objects.for_client(client).filter(conversation=OuterRef("pk"), role=Role.USER)
        )
    )
    if since is not None:
        conversations = conversations.filter(created_at__gte=since)
    if until is not None:
        conversations = conversations.filter(created_at__lt=until)
    if escalated_only:
        conversations = conversations.filter(
            Exists(Escalation.objects.for_client(client).filter(conversation=OuterRef("pk")))
        )
    if with_tool:
        conversations = conversations.filter(
            Exists(ToolExecution.objects.for_client(client).filter(conversation=OuterRef("pk")))
            | Exists(PendingAction.objects.for_client(client).filter(conversation=OuterRef("pk")))
        )
    return list(conversations.order_by("-created_at", "-id")[: max(0, int(limit))])


@dataclass(frozen=True)
class _SavedConversation:
    """What a saved conversation recorded, read once for all its turns."""

    messages: list[Message]  # visible ones, in order
    traces: dict[int | None, ReasoningTrace]  # by the customer message that started the turn
    executions: list[ToolExecution]
    proposed: list[PendingAction]
    escalated_traces: set[int | None]


def _saved_conversation(*, client: Client, conversation: Conversation) -> _SavedConversation:
    return _SavedConversation(
        messages=list(
            Message.objects.for_client(client)
            .visible()
            .filter(conversation=conversation)
            .order_by("seq")
        ),
        traces={
            t.user_message_id: t
            for t in ReasoningTrace.objects.for_client(client).filter(
                kind=TraceKind.TURN, conversation=conversation
            )
        },
        executions=list(
            ToolExecution.objects.for_client(client)
            .filter(conversation=conversation)
            .select_related("tool", "trace")
            .order_by("created_at", "id")
        ),
        proposed=list(
            PendingAction.objects.for_client(client)
            .filter(conversation=conversation)
            .select_related("tool")
            .order_by("created_at", "id")
        ),
        escalated_traces=set(
            Escalation.objects.for_client(client)
            .filter(conversation=conversation, trace__isnull=False)
            .values_list("trace_id", flat=True)
        ),
    )


def _answers(messages: list[Message], position: int) -> list[Message]:
    """The assistant messages that answered the customer message at `position`."""
    answers = []
    for other in messages[position + 1 :]:
        if other.role == Role.USER:
            break
        if other.role == Role.ASSISTANT:
            answers.append(other)
    return answers


def _replay_turn(
    *, client: Client, conversation: Conversation, saved: _SavedConversation, position: int
) -> dict[str, Any]:
    """The customer message at `position`, the history before it and what its turn did."""
    messages = saved.messages
    message = messages[position]
    answers = _answers(messages, position)
    trace = saved.traces.get(message.pk)
    ran = [
        {
            "name": e.tool.name,
            "params": e.params,
            "ok": e.status == ExecutionStatus.SUCCEEDED,
            "result": e.result,
            "error": e.error,
        }
        for e in saved.executions
        if trace is not None and e.trace_id == trace.pk
    ]
    asked = [
        {"name": p.tool.name, "params": p.params}
        for p in saved.proposed
        if p.proposed_in_id == message.pk
    ]
    escalated = bool(
        trace is not None and (trace.escalated or trace.pk in saved.escalated_traces)
    ) or any(a.kind == Kind.HANDOFF for a in answers)
    reason = None
    if escalated:
        reason = (
            Escalation.objects.for_client(client)
            .filter(conversation=conversation, trace=trace)
            .values_list("reason", flat=True)
            .first()
        )
    return {
        "customer": message.text,
        "history": [{"role": m.role, "kind": m.kind, "text": m.text} for m in messages[:position]],
        "original": {
            "reply": "\n".join(a.text for a in answers),
            "tools_ran": ran,
            "tools_proposed": asked,
            "escalated": escalated,
            "escalation_reason": reason,
        },
    }


def replay_turns(*, client: Client, conversation: Conversation) -> dict[str, Any]:
    """A saved conversation as a replay reads it: each customer message with the visible
    history before it and what happened in its turn (`original`), and the tool results the
    conversation recorded (a replayed call with the same tool and params gets the same one)."""
    saved = _saved_conversation(client=client, conversation=conversation)
    turns = [
        _replay_turn(client=client, conversation=conversation, saved=saved, position=position)
        for position, message in enumerate(saved.messages)
        if message.role == Role.USER
    ]
    recorded = [
        {
            "name": e.tool.name,
            "params_hash": params_hash(e.params),
            "ok": e.status == ExecutionStatus.SUCCEEDED,
            "result": e.result if e.result is not None else {},
            "error": e.error,
            "failure_kind": e.failure_kind,
        }
        for e in saved.executions
        if e.status != ExecutionStatus.RUNNING
    ]
    return {"language": conversation.language, "turns": turns, "recorded": recorded}


def replay_customer_messages(
    *, client: Client, conversations: list[Conversation]
) -> dict[int, int]:
    """How many customer messages each conversation has (what a replay replays), by its pk."""
    rows = (
        Message.objects.for_client(client)
        .visible()
        .filter(conversation__in=[c.pk for c in conversations], role=Role.USER)
        .values("conversation")
        .annotate(n=Count("id"))
        .order_by()
    )
    return {int(row["conversation"]): int(row["n"]) for row in rows}


# A run queued or running but not changed for this long (its workers died) is not counted in
# flight: it holds no place and no budget (docs/simulations.md "Budget").
IN_FLIGHT_WINDOW = timedelta(hours=1)


def runs_in_flight(*, client: Client) -> QuerySet[SimulationRun]:
    """The client's runs still queued or running (and alive within `IN_FLIGHT_WINDOW`)."""
    return SimulationRun.objects.for_client(client).filter(
        status__in=(RunStatus.QUEUED, RunStatus.RUNNING),
        updated_at__gte=timezone.now() - IN_FLIGHT_WINDOW,
    )


def tokens_held_by_runs_in_flight(*, client: Client) -> int:
    """What the runs in flight may still use of the simulation budget: their estimates less
    what their finished case runs used (never below 0)."""
    runs = runs_in_flight(client=client)
    estimated = runs.aggregate(t=Sum("estimated_tokens"))["t"] or 0
    if not estimated:
        return 0
    spent = (
        CaseRun.objects.for_client(client)
        .filter(run__in=runs)
        .aggregate(p=Sum("prompt_tokens"), c=Sum("completion_tokens"))
    )
    return max(0, int(estimated) - int((spent["p"] or 0) + (spent["c"] or 0)))


def recent_turn_tokens_by_mode(
    *, client: Client, days: int = 30, calls_apart: tuple[str, ...] = ()
) -> dict[str, tuple[int, int]]:
    """{mode: (turns, tokens)} of the client's turns of the last `days` days — live customer
    turns and simulations' sandboxed turns, each turn one trace with the tokens its calls used
    (a simulation's usage records are not linked to its traces: billing would count them as
    customer turns; the trace sums them). A trace with a step in `calls_apart` (a case run's
    own simulated-customer and judge calls) is not a turn. One aggregate query."""
    apart = ReasoningStep.objects.filter(trace=OuterRef("pk"), name__in=list(calls_apart))
    rows = (
        ReasoningTrace.objects.for_client(client)
        .filter(
            kind__in=[TraceKind.TURN, TraceKind.SIMULATION],
            created_at__gte=timezone.now() - timedelta(days=days),
            llm_calls__gt=0,
        )
        .exclude(Exists(apart))
        .values("mode")
        .annotate(turns=Count("id"), tokens=Sum(F("prompt_tokens") + F("completion_tokens")))
    )
    return {str(r["mode"]): (int(r["turns"]), int(r["tokens"] or 0)) for r in rows}
