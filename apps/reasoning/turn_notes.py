"""Automatic notes: what a finished turn teaches the next ones (docs/architecture.md, notes).

Written after the turn's transaction commits, by a task (`reasoning.turn_notes`), never inside
the turn: a slow or failing note write cannot delay or lose a reply, and a turn that rolled
back leaves no note behind.

* SUCCESS — a tool ran and succeeded on a draft the model was confident in (≥ 8 of 10; standard
  mode has no self-assessed confidence, so it writes no SUCCESS notes).
* FAILURE — a tool call failed (error, unreachable, timed out, refused by the business), or the
  turn was escalated: the reason, the tool, the customer's request in one line. Escalations
  that say nothing about the conversation (usage limit, LLM/system failure, deadline) are not
  noted.

Note content is shown to the model in later conversations of the same client, so the
customer's words are cut to one short line and obvious personal data (e-mail addresses, phone
numbers, long digit runs) is masked.
"""

from __future__ import annotations

import logging
import re

from apps.escalations.models import Escalation, EscalationReason
from apps.notes.models import Note, NoteSource, NoteType
from apps.notes.services import note_add
from apps.reasoning.models import ReasoningTrace, TraceStatus
from apps.tools.models import ExecutionStatus, ToolExecution

logger = logging.getLogger(__name__)

SUCCESS_MIN_CONFIDENCE = 8
REQUEST_MAX_CHARS = 140
DETAIL_MAX_CHARS = 160
NOT_NOTED_REASONS = frozenset(
    {
        EscalationReason.USAGE_LIMIT,
        EscalationReason.LLM_FAILURE,
        EscalationReason.DEADLINE,
        EscalationReason.SYSTEM_FAILURE,
        EscalationReason.STAFF_TAKEOVER,
    }
)

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(\.[\w-]+)+")
_PHONE = re.compile(r"\+?\d[\d\s().-]{7,}\d")
_LONG_NUMBER = re.compile(r"\d{9,}")


def one_line(text: str, limit: int) -> str:
    """`text` on one line, at most `limit` characters, personal data masked."""
    text = _EMAIL.sub("[email]", text)
    text = _PHONE.sub("[phone]", text)
    text = _LONG_NUMBER.sub("[number]", text)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def turn_notes_write(*, trace_id: int, confidence: int | None = None) -> list[Note]:
    """Write the automatic notes of one finished turn; returns them. Safe to run twice: a turn
    that already has notes gets none again."""
    trace = (
        ReasoningTrace.objects.select_related("client__plan", "conversation", "user_message")
        .filter(pk=trace_id)
        .first()
    )
    if trace is None or trace.status == TraceStatus.PROCESSING:
        return []
    client = trace.client
    if not client.plan.notes_enabled:
        return []
    # Run before? Notes the model added with `add_note` during the turn predate finished_at.
    if (
        Note.objects.for_client(client)
        .filter(
            trace=trace,
            source=NoteSource.AI,
            type__in=(NoteType.SUCCESS, NoteType.FAILURE),
            created_at__gte=trace.finished_at,
        )
        .exists()
    ):
        return []

    request = one_line(trace.user_message.text, REQUEST_MAX_CHARS)

    def add(*, type: str, ref: str, content: str, confidence: float | None = None) -> Note:
        return note_add(
            client=client,
            type=type,
            ref=ref,
            content=content,
            confidence=confidence,
            language=trace.conversation.language,
            source=NoteSource.AI,
            conversation=trace.conversation,
            trace=trace,
        )

    written: list[Note] = []
    executions = list(
        ToolExecution.objects.for_client(client)
        .filter(trace=trace)
        .select_related("tool")
        .order_by("created_at", "pk")
    )
    for execution in executions:
        if execution.tool.builtin_handler.startswith("notes."):
            continue  # searching or adding notes is not itself worth a note
        tool = execution.tool.name
        if execution.status == ExecutionStatus.FAILED:
            kind = execution.failure_kind or "error"
            detail = one_line(execution.error or "no detail", DETAIL_MAX_CHARS)
            written.append(
                add(
                    type=NoteType.FAILURE,
                    ref=tool,
                    content=f"Tool {tool} failed ({kind}: {detail}) for the request “{request}”",
                )
            )
        elif (
            execution.status == ExecutionStatus.SUCCEEDED
            and confidence is not None
            and confidence >= SUCCESS_MIN_CONFIDENCE
        ):
            written.append(
                add(
                    type=NoteType.SUCCESS,
                    ref=tool,
                    confidence=confidence / 10,
                    content=f"Tool {tool} answered the request “{request}”",
                )
            )

    escalation = (
        Escalation.objects.for_client(client).filter(trace=trace).order_by("pk").first()
        if trace.escalated
        else None
    )
    if escalation is not None and escalation.reason not in NOT_NOTED_REASONS:
        tool = executions[-1].tool.name if executions else ""
        detail = one_line(escalation.detail or "", DETAIL_MAX_CHARS)
        written.append(
            add(
                type=NoteType.FAILURE,
                ref=tool or escalation.reason,
                content=(
                    f"Escalated to a person ({escalation.get_reason_display().lower()}"
                    f"{': ' + detail if detail else ''}); tool: {tool or 'none'}; "
                    f"the customer asked “{request}”"
                ),
            )
        )
    return written
