"""Automatic notes: what a finished turn teaches the next ones (docs/architecture.md, notes).

Written after the turn's transaction commits, by a task (`reasoning.turn_notes`), never inside
the turn: a slow or failing note write cannot delay or lose a reply, and a turn that rolled
back leaves no note behind.

* SUCCESS — a tool ran and succeeded on a draft the model was confident in (≥ 8 of 10; standard
  mode has no self-assessed confidence, so it writes no SUCCESS notes).
* FAILURE — a tool call failed (error, unreachable, timed out, refused by the business), or the
  turn was handed to a person. Hand-offs that say nothing about the conversation (usage limit,
  LLM/system failure, deadline, staff takeover) are not noted.

What the business learns, in the system's own words only: the tool's name and kind (both set by
the business), the kind of request that kind of tool answers, the outcome, the failure kind and
the hand-off reason — fixed categories. Never the customer's message, the tool's parameters
(order numbers), the webhook's error text (it may echo the customer's input) or the hand-off
detail. So these notes carry nothing a customer typed, and they are written `active`: they
reach later prompts without review, unlike everything the model or the insights job proposes
(`apps.notes.services.default_status`). Their text is still rendered as inert data like any
note (`apps.notes.selectors.format_note_line`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.core.cache import cache

from apps.escalations.models import Escalation, EscalationReason
from apps.notes.models import Note, NoteSource, NoteStatus, NoteType
from apps.notes.services import note_add
from apps.reasoning.models import ReasoningTrace, TraceStatus
from apps.tools.models import ClientTool, ExecutionStatus, FailureKind, ToolExecution, ToolKind

logger = logging.getLogger(__name__)

SUCCESS_MIN_CONFIDENCE = 8
NOTED_MARKER_SECONDS = 2 * 24 * 3600  # longer than the notes' 24-hour dedup window
NOT_NOTED_REASONS = frozenset(
    {
        EscalationReason.USAGE_LIMIT,
        EscalationReason.LLM_FAILURE,
        EscalationReason.DEADLINE,
        EscalationReason.SYSTEM_FAILURE,
        EscalationReason.STAFF_TAKEOVER,
    }
)

# The kind of request each kind of tool answers. Note text is for the model (like the prompts,
# in English); staff read it in admin → Notes.
REQUEST_KINDS: dict[str, str] = {
    ToolKind.READ: "a request for information",
    ToolKind.ACTION: "a request to change something",
    ToolKind.DESTRUCTIVE: "a request to cancel, delete or refund",
}
FAILURE_KINDS: dict[str, str] = {
    FailureKind.REFUSED: "refused by the business",
    FailureKind.ERROR: "integration error",
    FailureKind.UNAVAILABLE: "unreachable after retries",
    FailureKind.TIMED_OUT: "timed out",
}
HANDOFF_REASONS: dict[str, str] = {
    EscalationReason.CUSTOMER_REQUEST: "the customer asked for a human",
    EscalationReason.LOW_CONFIDENCE: "the assistant was not confident",
    EscalationReason.POLICY: "a policy or safety rule",
    EscalationReason.TOOL_FAILURE: "a tool failed",
}


def _tool_words(tool: ClientTool) -> str:
    return f"tool {tool.name} ({tool.kind})"


def success_text(*, tool: ClientTool, confidence: int) -> str:
    return (
        f"{REQUEST_KINDS.get(tool.kind, 'a request').capitalize()} was answered by "
        f"{_tool_words(tool)}: it succeeded and the reply was confident ({confidence}/10)."
    )


def tool_failure_text(*, tool: ClientTool, failure_kind: str) -> str:
    return (
        f"{REQUEST_KINDS.get(tool.kind, 'a request').capitalize()} went to "
        f"{_tool_words(tool)}: it failed ({FAILURE_KINDS.get(failure_kind, 'integration error')})."
    )


def handoff_text(*, reason: str, tool: ClientTool | None) -> str:
    why = HANDOFF_REASONS.get(reason, "another reason")
    ran = f"the last tool that ran: {_tool_words(tool)}" if tool else "no tool ran"
    return f"Handed to a person because {why}; {ran}."


@dataclass(frozen=True)
class NoteDraft:
    """One automatic note, before it is written (`_note_add`)."""

    type: str
    ref: str
    content: str
    confidence: float | None = None


def turn_notes_write(*, trace_id: int, confidence: int | None = None) -> list[Note]:
    """Write the automatic notes of one finished turn; returns them. Safe to run twice: a turn
    that already has notes gets none again."""
    trace = _trace_to_note(trace_id)
    if trace is None:
        return []
    # Run before? The same system-worded note of an earlier turn is deduplicated (its `hits`
    # goes up, its trace stays the earlier one), so a marker in the shared cache says this turn
    # was noted; a note this turn created itself also says so.
    done_key = f"notes:turn-noted:{trace.pk}:{trace.created_at.timestamp()}"
    if cache.get(done_key) or _has_own_notes(trace):
        return []
    executions = _noted_executions(trace)
    written = [
        _note_add(trace, draft)
        for draft in (_execution_note(e, confidence=confidence) for e in executions)
        if draft is not None
    ]
    handoff = _handoff_note(trace, executions)
    if handoff is not None:
        written.append(_note_add(trace, handoff))
    if written:
        cache.set(done_key, 1, NOTED_MARKER_SECONDS)
    return written


def _trace_to_note(trace_id: int) -> ReasoningTrace | None:
    """The finished turn's trace, when it is a conversation's and its plan keeps notes."""
    trace = (
        ReasoningTrace.objects.for_current_client()  # the task's client (TenantTask)
        .select_related("client__plan", "conversation")
        .filter(pk=trace_id)
        .first()
    )
    if trace is None or trace.status == TraceStatus.PROCESSING or trace.conversation is None:
        return None  # unfinished, or not a conversation's turn (a playground run's trace)
    if not trace.client.plan.notes_enabled:
        return None
    return trace


def _has_own_notes(trace: ReasoningTrace) -> bool:
    """Whether this turn already wrote its automatic notes. (Notes the model added with
    `add_note` during the turn predate finished_at.)"""
    return (
        Note.objects.for_client(trace.client)
        .filter(
            trace=trace,
            source=NoteSource.AI,
            type__in=(NoteType.SUCCESS, NoteType.FAILURE),
            created_at__gte=trace.finished_at,
        )
        .exists()
    )


def _noted_executions(trace: ReasoningTrace) -> list[ToolExecution]:
    """The turn's tool runs, in order, but for the notes tools themselves: searching or adding
    notes is not itself worth a note."""
    executions = (
        ToolExecution.objects.for_client(trace.client)
        .filter(trace=trace)
        .select_related("tool")
        .order_by("created_at", "pk")
    )
    return [e for e in executions if not e.tool.builtin_handler.startswith("notes.")]


def _execution_note(execution: ToolExecution, *, confidence: int | None) -> NoteDraft | None:
    """The note a tool run is worth: a failure always, a success only after a confident
    draft; None for anything else."""
    tool = execution.tool
    if execution.status == ExecutionStatus.FAILED:
        return NoteDraft(
            type=NoteType.FAILURE,
            ref=tool.name,
            content=tool_failure_text(tool=tool, failure_kind=execution.failure_kind),
        )
    if (
        execution.status == ExecutionStatus.SUCCEEDED
        and confidence is not None
        and confidence >= SUCCESS_MIN_CONFIDENCE
    ):
        return NoteDraft(
            type=NoteType.SUCCESS,
            ref=tool.name,
            confidence=confidence / 10,
            content=success_text(tool=tool, confidence=confidence),
        )
    return None


def _handoff_note(trace: ReasoningTrace, executions: list[ToolExecution]) -> NoteDraft | None:
    """The note a hand-off is worth, unless its reason says nothing
    about the conversation; None when the turn was not handed off."""
    escalation = (
        Escalation.objects.for_client(trace.client).filter(trace=trace).order_by("pk").first()
        if trace.escalated
        else None
    )
    if escalation is None or escalation.reason in NOT_NOTED_REASONS:
        return None
    last_tool = executions[-1].tool if executions else None
    return NoteDraft(
        type=NoteType.FAILURE,
        ref=last_tool.name if last_tool else escalation.reason,
        content=handoff_text(reason=escalation.reason, tool=last_tool),
    )


def _note_add(trace: ReasoningTrace, draft: NoteDraft) -> Note:
    conversation = trace.conversation
    assert conversation is not None  # `_trace_to_note` keeps only a conversation's turns
    return note_add(
        client=trace.client,
        type=draft.type,
        ref=draft.ref,
        content=draft.content,
        confidence=draft.confidence,
        language=conversation.language,
        source=NoteSource.AI,
        status=NoteStatus.ACTIVE,  # system words only: see the module docstring
        conversation=conversation,
        trace=trace,
    )
