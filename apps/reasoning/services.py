"""The turn pipeline's entry points.

`handle_turn` stores the customer's message (committed before any LLM call) and enqueues the
turn; `turn_process` runs it — from a Celery task, or eagerly when no broker is configured."""

from __future__ import annotations

import logging
import re
import time
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.billing.services.budgets import UsageLimitReached
from apps.clients.models import AIMode, Client
from apps.conversations.models import Conversation, ConversationStatus, Kind, Message, Role
from apps.conversations.services import message_append, validate_customer_text
from apps.escalations.models import EscalationReason
from apps.escalations.services import HANDOFF_TEXT, escalation_create
from apps.reasoning import guards
from apps.reasoning.hooks import run_post_draft_hooks
from apps.reasoning.llm import LLMError
from apps.reasoning.models import ReasoningTrace, TraceStatus
from apps.reasoning.modes import mode_that_runs
from apps.reasoning.modes.adaptive import run_adaptive
from apps.reasoning.modes.standard import run_standard
from apps.reasoning.traces import TokenCapExceeded, TurnAborted, TurnRecorder
from apps.reasoning.turn import Escalate, Outcome, Reply, Turn
from apps.tools.models import ClientTool
from apps.tools.pending import pending_expire_open, pending_mark_shown, pending_resolve
from apps.tools.selectors import pending_declined_by

logger = logging.getLogger(__name__)

HISTORY_LIMIT = 20
FALLBACK_TEXT = (
    "Sorry — I ran into a problem answering that. I've passed your conversation to our team so "
    "a person can help."
)
USAGE_LIMIT_TEXT = (
    "Thanks for your message! Our assistant is unavailable at the moment, so I've passed your "
    "conversation to our team — a person will reply here."
)
_WANTS_HUMAN = re.compile(
    r"\b(human|real person|live (agent|person|chat)|(talk|speak|chat) (to|with) (a |an )?"
    r"(person|someone|agent|representative|human)|customer service rep|representative)\b",
    re.IGNORECASE,
)

MODES = {AIMode.STANDARD: run_standard, AIMode.ADAPTIVE: run_adaptive}  # see modes.BUILT


def handle_turn(*, client: Client, conversation: Conversation, text: str) -> Message:
    """Store the customer's message and schedule its turn. The message is committed before any
    LLM call; while a human owns the conversation it just waits for staff."""
    cleaned = validate_customer_text(text)
    if conversation.client_id != client.pk:
        raise ValueError("conversation belongs to another client")
    with transaction.atomic():
        locked = Conversation.objects.select_for_update().get(pk=conversation.pk)
        if locked.status == ConversationStatus.CLOSED:
            locked.status = ConversationStatus.OPEN  # a new message reopens a closed chat
            locked.save(update_fields=["status", "updated_at"])
        message = message_append(client=client, conversation=locked, role=Role.USER, text=cleaned)
        if locked.status != ConversationStatus.OPEN:
            # A person owns the conversation: no LLM runs; the turn is recorded as skipped.
            ReasoningTrace.objects.create(
                client=client,
                conversation=locked,
                user_message=message,
                mode=mode_that_runs(client.plan.ai_mode),
                status=TraceStatus.SKIPPED,
                finished_at=timezone.now(),
            )
        conversation.status, conversation.last_seq = locked.status, locked.last_seq
        if locked.status == ConversationStatus.OPEN:
            message_id = message.pk
            transaction.on_commit(lambda: _enqueue(message_id))
    return message


def _enqueue(message_id: int) -> None:
    from apps.reasoning.tasks import process_turn

    try:
        process_turn.delay(message_id)
    except Exception:
        # The broker is unreachable. The message is stored; answer it in this process rather
        # than leave the customer waiting for a turn that was never queued.
        logger.exception(
            "could not queue the turn; running it in-process", extra={"message_id": message_id}
        )
        process_turn.apply(args=(message_id,))


def wants_human(text: str) -> bool:
    return bool(_WANTS_HUMAN.search(text))


def _claim(message: Message) -> ReasoningTrace | None:
    """Create or take over the turn of this message; None when it is done or in progress
    elsewhere (a redelivered task must not answer twice)."""
    lease = _turn_lease()
    with transaction.atomic():
        trace, created = ReasoningTrace.objects.select_for_update().get_or_create(
            user_message=message,
            defaults={
                "client": message.client,
                "conversation": message.conversation,
                # The mode that runs (a deliberative plan runs adaptive): recorded and billed.
                "mode": mode_that_runs(message.client.plan.ai_mode),
                "model": settings.LLM_MODEL if settings.OPENAI_API_KEY else "offline-demo",
            },
        )
        if created:
            return trace
        if trace.status != TraceStatus.PROCESSING:
            return None
        if trace.updated_at > timezone.now() - lease:
            return None  # another worker is on it
        trace.save(update_fields=["updated_at"])  # take over a turn whose worker died
        return trace


class TurnBusy(Exception):
    """An earlier turn of the same conversation is still queued or running; try again shortly."""


def _turn_lease() -> timedelta:
    return timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT)


def _lock_conversation(message: Message) -> bool:
    """Take the conversation's turn lock, in message order: not while an earlier customer
    message still waits for its turn (it has no trace yet), nor while another turn holds the
    lock. A lock or a queued message older than the lease belongs to a dead worker or a lost
    task and no longer blocks."""
    now = timezone.now()
    lease = _turn_lease()
    earlier_waiting = Message.objects.filter(
        conversation_id=message.conversation_id,
        role=Role.USER,
        seq__lt=message.seq,
        turn__isnull=True,
        created_at__gt=now - lease,
    ).exists()
    if earlier_waiting:
        return False
    taken = (
        Conversation.objects.filter(pk=message.conversation_id)
        .filter(Q(turn_lock_until__isnull=True) | Q(turn_lock_until__lt=now))
        .update(turn_lock_until=now + lease)
    )
    return taken == 1


def _unlock_conversation(message: Message) -> None:
    Conversation.objects.filter(pk=message.conversation_id).update(turn_lock_until=None)


def turn_process(*, message_id: int) -> ReasoningTrace | None:
    """Run the turn of one customer message. Raises TurnBusy when an earlier turn of the same
    conversation has to go first (the task retries)."""
    message = (
        Message.objects.select_related("conversation", "client", "client__plan")
        .filter(pk=message_id, role=Role.USER)
        .first()
    )
    if message is None:
        return None
    if ReasoningTrace.objects.filter(
        user_message=message, status__in=[TraceStatus.DONE, TraceStatus.SKIPPED]
    ).exists():
        return None  # a redelivered task: this turn is done
    if not _lock_conversation(message):
        raise TurnBusy(message_id)
    try:
        return _process_locked(message)
    finally:
        _unlock_conversation(message)


def _process_locked(message: Message) -> ReasoningTrace | None:
    message_id = message.pk
    trace = _claim(message)
    if trace is None:
        return None
    started = time.perf_counter()
    client, conversation = message.client, message.conversation
    recorder = TurnRecorder(trace=trace, client=client, conversation=conversation)

    conversation.refresh_from_db(fields=["status"])
    if conversation.status != ConversationStatus.OPEN:
        recorder.step("skipped", output={"reason": f"conversation is {conversation.status}"})
        _finish(recorder, Outcome(), started, status=TraceStatus.SKIPPED)
        return trace

    turn = Turn(
        client=client,
        plan=client.plan,
        conversation=conversation,
        user_message=message,
        rec=recorder,
        tools=list(ClientTool.objects.for_client(client).order_by("name")),
        history=_history(client=client, conversation=conversation, upto=message),
    )
    turn.confirmed = pending_resolve(
        client=client,
        conversation=conversation,
        user_message=message,
        decide=guards.confirmation_decision,
    )
    turn.declined = pending_declined_by(client=client, user_message=message)
    if turn.confirmed or turn.declined:
        settled = turn.confirmed or turn.declined
        assert settled is not None
        recorder.step(
            "confirmation", output={"pending_action": settled.pk, "status": settled.status}
        )

    try:
        outcome = _run(turn)
    except TurnAborted:
        _finish(recorder, Outcome(), started, status=TraceStatus.SKIPPED)
        return trace
    except Escalate as exc:
        outcome = Outcome(escalate=(exc.reason, exc.detail), handoff_text=exc.handoff_text)
    except TokenCapExceeded:
        outcome = Outcome(
            escalate=(EscalationReason.USAGE_LIMIT, "per-turn token cap reached"),
            handoff_text=USAGE_LIMIT_TEXT,
        )
    except LLMError as exc:
        outcome = Outcome(
            escalate=(
                EscalationReason.LLM_FAILURE,
                f"{exc.step} failed twice ({exc.kind}): {exc.message}",
            ),
            handoff_text=FALLBACK_TEXT,
        )
    except Exception as exc:  # a bug must not lose the customer: hand over to a person
        logger.exception("turn failed", extra={"message_id": message_id})
        recorder.step("error", error=repr(exc))
        outcome = Outcome(
            escalate=(EscalationReason.LLM_FAILURE, f"internal error: {exc!r}"),
            handoff_text=FALLBACK_TEXT,
        )
    _finish(recorder, outcome, started)
    return trace


def _run(turn: Turn) -> Outcome:
    if wants_human(turn.user_message.text):
        raise Escalate(EscalationReason.CUSTOMER_REQUEST, "The customer asked for a person.")
    # Monthly budgets (billing): reserve before any LLM call, commit what was used after —
    # also when the mode raised — so concurrent turns cannot overshoot by more than one turn.
    meter = turn.rec.meter
    try:
        reservation = meter.turn_reserve()
    except UsageLimitReached as exc:
        raise Escalate(
            EscalationReason.USAGE_LIMIT, exc.detail, handoff_text=USAGE_LIMIT_TEXT
        ) from exc
    mode = MODES[AIMode(mode_that_runs(turn.rec.trace.mode))]
    try:
        draft = mode(turn)
        # After the draft, before the reply is stored and sent (a no-op unless the plan has hooks).
        return run_post_draft_hooks(turn, draft)
    finally:
        if reservation is not None:
            meter.turn_commit(reservation, llm_calls=turn.rec.trace.llm_calls)


def _history(*, client: Client, conversation: Conversation, upto: Message) -> list[Message]:
    recent = (
        Message.objects.for_client(client)
        .visible()
        .filter(conversation=conversation, seq__lte=upto.seq)
        .order_by("-seq")[:HISTORY_LIMIT]
    )
    return list(reversed(recent))


def _finish(
    rec: TurnRecorder, outcome: Outcome, started: float, status: str = TraceStatus.DONE
) -> None:
    trace, client = rec.trace, rec.client
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(pk=rec.conversation.pk)
        rec.conversation.status = conversation.status
        replies = outcome.replies
        if replies and conversation.status != ConversationStatus.OPEN:
            # A person took over while the model was thinking: their conversation now.
            rec.step("reply_suppressed", output={"texts": [r.text for r in replies]})
            pending_expire_open(client=client, conversation=conversation)  # never shown
            replies, status = [], TraceStatus.SKIPPED
        for reply in replies:
            posted = message_append(
                client=client,
                conversation=rec.conversation,
                role=Role.ASSISTANT,
                kind=reply.kind,
                text=reply.text,
                data={
                    **reply.data,
                    "mode": trace.mode,
                    "model": rec.model or trace.model,
                    "offline": rec.offline,
                },
                trace=trace,
            )
            if reply.kind == Kind.CONFIRMATION_REQUEST and reply.data.get("pending_action"):
                # Shown now: from this message on, the customer's next answer can settle it.
                pending_mark_shown(
                    client=client, pending_id=reply.data["pending_action"], question=posted
                )
        if outcome.escalate and conversation.status == ConversationStatus.OPEN:
            reason, detail = outcome.escalate
            rec.step("escalate", output={"reason": reason, "detail": detail})
            escalation_create(
                client=client,
                conversation=rec.conversation,
                reason=reason,
                detail=detail,
                trace=trace,
                handoff_text=outcome.handoff_text or HANDOFF_TEXT,
            )
            trace.escalated = True
        trace.status = status
        trace.finished_at = timezone.now()
        trace.duration_ms = int((time.perf_counter() - started) * 1000)
        trace.llm_wait_ms = rec.llm_wait_ms
        if rec.model:
            trace.model = rec.model
        trace.save(
            update_fields=[
                "status",
                "finished_at",
                "duration_ms",
                "llm_wait_ms",
                "critique_triggered",
                "critique_reasons",
                "context_fetched",
                "escalated",
                "tool_calls",
                "model",
                "updated_at",
            ]
        )


__all__ = ["Reply", "handle_turn", "turn_process", "wants_human"]
