"""Reads of playground runs — always within one client — and their JSON shapes (shared by the
playground's event stream, its replay and `manage.py reason --json`)."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import QuerySet

from apps.clients.models import Client
from apps.playground.models import PlaygroundRun
from apps.reasoning.models import ReasoningStep
from apps.reasoning.rendering import step_json

RECENT_RUNS = 50


def run_list(*, client: Client, limit: int = RECENT_RUNS) -> QuerySet[PlaygroundRun]:
    return (
        PlaygroundRun.objects.for_client(client)
        .select_related("created_by", "conversation", "trace")
        .order_by("-created_at")[:limit]
    )


def run_get(*, client: Client, public_id: str | uuid.UUID) -> PlaygroundRun | None:
    """The client's run with this public id; None for a malformed, unknown or another client's
    id alike."""
    try:
        parsed = public_id if isinstance(public_id, uuid.UUID) else uuid.UUID(str(public_id))
    except ValueError:
        return None
    return (
        PlaygroundRun.objects.for_client(client)
        .select_related("conversation", "created_by", "trace")
        .filter(public_id=parsed)
        .first()
    )


def run_state(*, client: Client, run_id: int) -> PlaygroundRun | None:
    """The run with its trace (the figures), in one query."""
    return (
        PlaygroundRun.objects.for_client(client).select_related("trace").filter(pk=run_id).first()
    )


def steps_after(
    *, client: Client, run_id: int, after: int, limit: int = 200
) -> list[ReasoningStep]:
    """The steps of the run's trace after index `after`, in order."""
    return list(
        ReasoningStep.objects.for_client(client)
        .filter(trace__playground_run_id=run_id, index__gt=after)
        .order_by("index")[:limit]
    )


def run_json(run: PlaygroundRun, *, steps: list[ReasoningStep] | None = None) -> dict[str, Any]:
    """The run's state event: what the run is (question, status, result) with its trace's
    figures (calls, tokens, cost, time)."""
    trace = run.trace
    data: dict[str, Any] = {
        "id": str(run.public_id),
        "client": run.client.slug if run.client_id else None,
        "mode": run.mode,
        "rubric": run.rubric or None,
        "iterations": run.iterations,
        "question": run.question,
        "conversation": str(run.conversation.public_id) if run.conversation else None,
        "status": run.status,
        "stop_requested": run.stop_requested,
        "model": trace.model,
        "offline": run.offline,
        "progress": {"step": run.progress_step, "max_steps": run.progress_max},
        "final": run.final or None,
        "error": run.error,
        "llm_calls": trace.llm_calls,
        "prompt_tokens": trace.prompt_tokens,
        "completion_tokens": trace.completion_tokens,
        "tokens": trace.prompt_tokens + trace.completion_tokens,
        "cost_usd": str(trace.cost_usd),
        "billed_usd": str(trace.billed_usd),
        "duration_ms": trace.duration_ms,
        "created_at": run.created_at.isoformat() if run.created_at else None,
    }
    if steps is not None:
        data["steps"] = [step_json(s) for s in steps]
    return data
