"""Read side of insights: the evidence a run reads (always one client's), and proposals."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

from apps.clients.models import Client
from apps.conversations.models import Conversation, Kind, Message
from apps.escalations.models import Escalation, EscalationReason
from apps.flags.models import MessageFlag
from apps.insights.models import InsightProposal, InsightRun, ProposalStatus
from apps.notes.models import Note, NoteStatus, NoteType
from apps.reasoning.models import ReasoningStep

# Escalations that say something about what customers ask. Operational ones (the model or a
# worker failed, the budget ran out, staff took over on their own) say nothing about a topic.
KNOWLEDGE_ESCALATIONS = (
    EscalationReason.CUSTOMER_REQUEST,
    EscalationReason.LOW_CONFIDENCE,
    EscalationReason.POLICY,
    EscalationReason.TOOL_FAILURE,
)


# The trace step in which a turn records a knowledge search: {"query", "hits": [{"article",
# "chunk", "score", …}], …} (apps/reasoning/knowledge.py). Absent when a turn never searched.
KNOWLEDGE_STEP = "knowledge"
KNOWLEDGE_SEARCHED = " (after a knowledge search)"


@dataclass(frozen=True)
class Evidence:
    """One thing that went wrong, as the insights step reads it."""

    # escalation | low_confidence | questioned | failure_note | tool_failure | no_knowledge
    # | flagged
    kind: str
    conversation: str  # the conversation's public id
    at: datetime
    text: str  # the customer's words
    detail: str  # why it counts (the escalation reason, the confidence, the evaluation)
    # The turn searched the knowledge base and still went wrong: the knowledge lacked the answer.
    searched: bool = False

    def as_hint(self, ref: str) -> dict[str, Any]:
        return {"conversation": ref, "kind": self.kind, "text": self.text, "detail": self.detail}


def _customer_words(message: Message | None) -> str:
    return " ".join((message.text if message is not None else "").split())


def _turn_evidence(
    record: Escalation | Message, *, kind: str, text: str, detail: str, searched: set[int]
) -> Evidence:
    """Evidence from what a turn left (an escalation, an assessment, an evaluation): its
    conversation and time, and whether the turn searched the knowledge base (`searched`: the
    traces that did)."""
    knowledge_searched = record.trace_id in searched
    return Evidence(
        kind=kind,
        conversation=str(record.conversation.public_id),
        at=record.created_at,
        text=text,
        detail=detail + (KNOWLEDGE_SEARCHED if knowledge_searched else ""),
        searched=knowledge_searched,
    )


def insight_evidence(*, client: Client, since: datetime, until: datetime) -> list[Evidence]:
    """Everything that went wrong in `client`'s conversations in [since, until), newest first:
    knowledge escalations, low-confidence assessments, questioned answers, FAILURE notes,
    knowledge gaps and the answers staff flagged.
    A handful of queries whatever the volume (each source one query, joins decided here)."""
    items: list[Evidence] = []
    window = {"created_at__gte": since, "created_at__lt": until}

    escalations = (
        Escalation.objects.for_client(client)
        .filter(reason__in=KNOWLEDGE_ESCALATIONS, **window)
        .select_related("conversation", "trace__user_message")
        .order_by("-created_at")
    )
    last_user = _last_customer_messages(client, [e.conversation for e in escalations])
    searched = _searched_traces(client, [e.trace_id for e in escalations])
    for escalation in escalations:
        turn_message = escalation.trace.user_message if escalation.trace else None
        message = turn_message or last_user.get(escalation.conversation_id)
        items.append(
            _turn_evidence(
                escalation,
                kind="tool_failure"
                if escalation.reason == EscalationReason.TOOL_FAILURE
                else "escalation",
                text=_customer_words(message),
                detail=f"{escalation.get_reason_display()}: {escalation.detail}".strip(": "),
                searched=searched,
            )
        )

    below = int(settings.INSIGHTS_LOW_CONFIDENCE_BELOW)
    internal = (
        Message.objects.for_client(client)
        .filter(**window)
        .select_related("conversation", "trace__user_message")
        .order_by("-created_at")
    )
    low = list(internal.filter(kind=Kind.ASSESSMENT, data__confidence__lt=below))
    doubted = list(internal.filter(kind=Kind.EVALUATION, data__outcome="questioned"))
    untraced = [m.conversation for m in [*low, *doubted] if m.trace is None]
    last_user.update(_last_customer_messages(client, untraced))
    searched |= _searched_traces(client, [m.trace_id for m in [*low, *doubted]])

    def words(message: Message) -> str:
        turn = message.trace.user_message if message.trace else None
        return _customer_words(turn or last_user.get(message.conversation_id))

    for message in [*low, *doubted]:
        if message.kind == Kind.ASSESSMENT:
            kind, detail = "low_confidence", f"confidence {message.data.get('confidence')}/10"
        else:
            kind = "questioned"
            detail = f"answer questioned: {message.data.get('evaluation') or message.text}"
        items.append(
            _turn_evidence(
                message, kind=kind, text=words(message), detail=detail, searched=searched
            )
        )
    items.extend(_failure_notes(client, window))
    items.extend(_knowledge_gaps(client, window))
    items.extend(_flagged_answers(client, window))
    items.sort(key=lambda item: item.at, reverse=True)
    return items


def _failure_notes(client: Client, window: dict[str, Any]) -> list[Evidence]:
    """FAILURE notes tied to a conversation (a note with none has no example to link), except
    archived ones."""
    notes = (
        Note.objects.for_client(client)
        .filter(type=NoteType.FAILURE, conversation__isnull=False, **window)
        .exclude(status=NoteStatus.ARCHIVED)
        .select_related("conversation")
        .order_by("-created_at")
    )
    return [
        Evidence(
            kind="failure_note",
            conversation=str(note.conversation.public_id),
            at=note.created_at,
            text=note.content,
            detail=f"failure note{f' ({note.ref})' if note.ref else ''}"
            + (f", seen {note.hits} times" if note.hits > 1 else ""),
        )
        for note in notes
        if note.conversation is not None
    ]


def _flagged_answers(client: Client, window: dict[str, Any]) -> list[Evidence]:
    """Assistant replies staff flagged (wrong, unhelpful, unsafe) in the window — also those
    flagged without a correction, which no proposal was made from. Two queries."""
    flags = list(
        MessageFlag.objects.for_client(client)
        .filter(**window)
        .select_related("conversation", "message__trace__user_message")
        .order_by("-created_at")
    )
    untraced = [f.conversation for f in flags if f.message.trace is None]
    last_user = _last_customer_messages(client, untraced)
    items = []
    for flag in flags:
        turn = flag.message.trace.user_message if flag.message.trace else None
        reply = " ".join(flag.message.text.split())[:200]
        items.append(
            Evidence(
                kind="flagged",
                conversation=str(flag.conversation.public_id),
                at=flag.created_at,
                text=_customer_words(turn or last_user.get(flag.conversation_id)),
                detail=f"staff flagged the answer as {flag.reason}: {reply}",
            )
        )
    return items


def _searched_traces(client: Client, trace_ids: list[int | None]) -> set[int]:
    """Those of `trace_ids` whose turn searched the knowledge base (one query)."""
    ids = {i for i in trace_ids if i is not None}
    if not ids:
        return set()
    steps = ReasoningStep.objects.for_client(client).filter(name=KNOWLEDGE_STEP, trace_id__in=ids)
    return set(steps.values_list("trace_id", flat=True))


def _best_score(output: Any) -> float | None:
    """The best score among a `knowledge` step's hits (None: it found nothing, or recorded no
    hits in the shape the retrieval step writes)."""
    hits = output.get("hits") if isinstance(output, dict) else None
    scores = [
        float(h["score"])
        for h in hits or []
        if isinstance(h, dict) and isinstance(h.get("score"), int | float)
    ]
    return max(scores) if scores else None


def _knowledge_gaps(client: Client, window: dict[str, Any]) -> list[Evidence]:
    """Conversation turns whose knowledge searches found no chunk scoring above
    INSIGHTS_KNOWLEDGE_MIN_SCORE: what the help centre does not cover. One item per turn (its
    best search counts); turns that never searched (no `knowledge` step) are not gaps."""
    threshold = float(settings.INSIGHTS_KNOWLEDGE_MIN_SCORE)
    steps = (
        ReasoningStep.objects.for_client(client)
        .filter(name=KNOWLEDGE_STEP, trace__conversation__isnull=False, **window)
        .select_related("trace__conversation", "trace__user_message")
        .order_by("-created_at", "-id")
    )
    best: dict[int, float | None] = {}
    newest: dict[int, ReasoningStep] = {}
    for step in steps:
        score = _best_score(step.output)
        known = best.get(step.trace_id)
        best[step.trace_id] = max((s for s in (known, score) if s is not None), default=None)
        newest.setdefault(step.trace_id, step)
    items: list[Evidence] = []
    for trace_id, step in newest.items():
        score = best[trace_id]
        if score is not None and score > threshold:
            continue
        trace = step.trace
        if trace.conversation is None:
            continue
        query = str(step.output.get("query", "")) if isinstance(step.output, dict) else ""
        found = "nothing" if score is None else f"nothing above {threshold:g} (best {score:g})"
        items.append(
            Evidence(
                kind="no_knowledge",
                conversation=str(trace.conversation.public_id),
                at=step.created_at,
                text=_customer_words(trace.user_message) or " ".join(query.split()),
                detail=f"knowledge search found {found}" + (f" for: {query}" if query else ""),
            )
        )
    return items


def _last_customer_messages(
    client: Client, conversations: list[Conversation]
) -> dict[int, Message]:
    """The latest customer message of each conversation (for escalations with no turn)."""
    ids = {c.pk for c in conversations}
    if not ids:
        return {}
    latest: dict[int, Message] = {}
    messages = (
        Message.objects.for_client(client)
        .filter(conversation_id__in=ids, role="user")
        .order_by("conversation_id", "-seq")
        .only("conversation_id", "text", "seq")
    )
    for message in messages:
        latest.setdefault(message.conversation_id, message)
    return latest


def proposals_for_client(
    *, client: Client, status: str | None = ProposalStatus.PENDING_REVIEW
) -> QuerySet[InsightProposal]:
    queryset = InsightProposal.objects.for_client(client).select_related(
        "run", "reviewed_by", "note"
    )
    return queryset.filter(status=status) if status else queryset


def conversations_by_public_id(*, client: Client, public_ids: list[str]) -> dict[str, Conversation]:
    """The client's conversations among `public_ids` (another tenant's id finds nothing)."""
    found = Conversation.objects.for_client(client).filter(public_id__in=public_ids)
    return {str(c.public_id): c for c in found}


FIRST_WEEK_DAYS = 7
TOP_UNANSWERED = 5


@dataclass(frozen=True)
class FirstWeek:
    """What a client's first week holds so far, counted from the data (no full day needed)."""

    since: datetime
    conversations: int
    handoffs: int
    flagged: int
    pending_proposals: int
    unanswered: list[
        tuple[str, int]
    ]  # the customers' questions the knowledge lacked, and how often


def first_week_summary(*, client: Client, now: datetime | None = None) -> FirstWeek | None:
    """The first-week view of `client`, or None once its first week is over."""
    now = now or timezone.now()
    since = client.created_at
    if since is None or now - since > timedelta(days=FIRST_WEEK_DAYS):
        return None
    counts: dict[str, int] = {}
    shown: dict[str, str] = {}
    for item in insight_evidence(client=client, since=since, until=now):
        if item.kind != "no_knowledge" and not item.searched:
            continue
        key = " ".join(item.text.casefold().split())
        if key:
            counts[key] = counts.get(key, 0) + 1
            shown.setdefault(key, item.text)
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_UNANSWERED]
    return FirstWeek(
        since=since,
        conversations=Conversation.objects.for_client(client).filter(created_at__gte=since).count(),
        handoffs=Escalation.objects.for_client(client).filter(created_at__gte=since).count(),
        flagged=MessageFlag.objects.for_client(client).filter(created_at__gte=since).count(),
        pending_proposals=proposals_for_client(client=client).count(),
        unanswered=[(shown[key], n) for key, n in top],
    )


def latest_run_now(*, client: Client) -> InsightRun | None:
    """The client's latest "Run insights now" run, for the status block."""
    return (
        InsightRun.objects.for_client(client).filter(on_demand=True).order_by("-created_at").first()
    )
