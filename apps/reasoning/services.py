"""The turn pipeline's entry points.

`handle_turn` stores the customer's message (committed before any LLM call) and enqueues the
turn; `turn_process` runs it — from a Celery task, or eagerly when no broker is configured."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone, translation
from django.utils.translation import gettext_lazy

from apps.approvals.withdrawal import (
    WithdrawalReplies,
    approvals_open,
    approvals_withdraw,
    withdrawal_replies,
)
from apps.billing.services.budgets import UsageLimitReached
from apps.billing.services.visitors import (
    VISITOR_TOKENS,
    TurnLimits,
    conversation_visitor_record,
    turn_limits_admit,
    turn_limits_commit,
)
from apps.clients.models import Client
from apps.clients.rowcache import client_cached
from apps.conversations.events import conversation_changed
from apps.conversations.models import Conversation, ConversationStatus, Kind, Message, Role
from apps.conversations.reply_drafts import ReplyDraftWriter, reply_draft_clear
from apps.conversations.selectors import conversation_by_id, conversation_history
from apps.conversations.services import (
    conversation_lock,
    message_append,
    message_language,
    validate_customer_text,
)
from apps.core.deadlines import deadline_scope
from apps.core.languages import reply_language
from apps.core.outbound import TURN_REPLIED, emit
from apps.core.tenancy import TenantScopeError, current_tenant, tenant_scope
from apps.core.tenant_sql import model_columns, sql_models
from apps.escalations.models import EscalationReason
from apps.escalations.services import escalation_create
from apps.identity.services import (
    CheckStatus,
    email_code_in,
    otp_check,
    otp_check_text,
    redact_codes,
)
from apps.reasoning import dispatch, guards, knowledge
from apps.reasoning import evaluation as _evaluation  # noqa: F401  (registers the `evaluate` hook)
from apps.reasoning.admission import (
    DB_ERRORS,
    TurnBusy,
    TurnLock,
    fresh_connection,
    lock_row_releasing_turn,
    on_fresh_connection,
    turn_claim,
    turn_lease,
    turn_lock_release,
    turn_lock_take,
    turn_waiting_before,
)
from apps.reasoning.models import ReasoningStep, ReasoningTrace, TraceStatus
from apps.reasoning.modes import mode_that_runs
from apps.reasoning.reask import reask_outcome, record_settled
from apps.reasoning.run import (
    FALLBACK_TEXT,
    USAGE_LIMIT_TEXT,
    Failure,
    TurnSurface,
    run_turn,
    trace_finish,
    wants_human,
)
from apps.reasoning.traces import TurnRecorder
from apps.reasoning.turn import Escalate, Outcome, Reply, Turn
from apps.reasoning.turn_notes import turn_notes_write
from apps.tools.pending import (
    pending_expire_open,
    pending_mark_shown,
    pending_settle,
    pending_touched,
)
from apps.tools.selectors import tool_list_for_turn

logger = logging.getLogger(__name__)

# Fixed replies: msgids, rendered in the turn's reply language (`translation.override` around
# the turn and its posting).
# With no broker, a later message of a conversation whose earlier turn still runs in another
# request waits for it, looking again this often (`run_turn_in_process`).
EAGER_WAIT_STEP_SECONDS = 0.2

# Over the widget's token window (apps/platform/throttling.py): the message is kept and handed to
# staff — never a bare refusal. The widget then offers the e-mail field for their reply.
TOKEN_WINDOW_TEXT = gettext_lazy(
    "Thanks for your message! You've sent a lot in a short time, so I've passed your "
    "conversation to our team — a person will reply here. You can also leave your e-mail "
    "address to get their reply by e-mail."
)
# Over the plan's daily budget of one visitor (an address: an office or a mobile carrier may be
# many customers): the message is kept and handed to staff, like the token window.
VISITOR_LIMIT_TEXT = gettext_lazy(
    "Thanks for your message! This chat has reached today's limit of automatic answers, so "
    "I've passed your conversation to our team — a person will reply here. You can also leave "
    "your e-mail address to get their reply by e-mail."
)
# The hand-off notice when the turn names none (the same msgid as the escalations' default).
HANDOFF_NOTICE = gettext_lazy(
    "I've passed your conversation to our support team — a person will reply here as soon as "
    "possible."
)


def handle_turn(
    *,
    client: Client,
    conversation: Conversation,
    text: str,
    confirm: dict[str, Any] | None = None,
    token_window: dict[str, Any] | None = None,
    visitor: str = "",
) -> Message:
    """Store the customer's message and schedule its turn. The message is committed before any
    LLM call; while a human owns the conversation it just waits for staff.

    `token_window` is the widget's token window the message found reached
    (`TokenWindowReached.as_data()`), stored as `data["token_window"]`: its turn hands the
    conversation to staff without calling the model.

    `confirm` is the widget's Yes/No button press (`{"action", "digest", "answer"}`), stored on
    the message as `data["confirm"]`: the turn's confirmation rule settles exactly that question
    with it (`guards.confirmation_decision`), or none.

    `visitor` (the widget's keyed hash of the client address, `widget_visitor`) is recorded as
    the one the conversation's messages now come from; "" records nothing."""
    cleaned = validate_customer_text(text)
    if conversation.client_id != client.pk:
        raise ValueError("conversation belongs to another client")
    # The language the message gives clear evidence of — asked for, or clearly written in; ''
    # for "Order 12345", a name, "ok" — found before the row lock is taken (never raises).
    detected = message_language(client=client, text=cleaned)
    with transaction.atomic():
        # The row locked, its status, language and last seq brought up to date on `conversation`.
        locked = conversation_lock(client=client, conversation=conversation)
        _reopen_and_follow_language(locked, client=client, detected=detected)
        # The visitor the message comes from, whose budget and token windows its turn charges
        # (docs/billing.md): in this transaction, so a message costs one commit, not two.
        conversation_visitor_record(client=client, conversation=locked, visitor=visitor)
        # A code typed while the conversation waits for one (apps/identity): stored masked,
        # so no prompt ever carries it, and checked here — before any LLM call; the turn
        # replies from `data["email_code"]` without a model.
        code = email_code_in(client=client, conversation=locked, text=cleaned)
        if code is not None:
            locked.refresh_from_db()  # the check reads and writes the identity fields
        # Approval requests this message may touch (apps/approvals/withdrawal.py): marked on the
        # message, so the turn looks at them only when there are some. A typed e-mail code is
        # an identity step, not a new request: it withdraws nothing.
        open_approvals = approvals_open(client=client, conversation=locked) if code is None else []
        data = _message_data(confirm, open_approvals, token_window)
        message = message_append(
            client=client,
            conversation=locked,
            role=Role.USER,
            text=redact_codes(cleaned) if code else cleaned,
            language=detected,
            data=data or None,
            # Nothing else this transaction does shows on the event streams: the publish can
            # carry the message (apps/conversations/events.py).
            note=code is None and not open_approvals and locked.status == ConversationStatus.OPEN,
        )
        if code is not None:
            message.data = {**data, "email_code": _email_code_check(client, locked, code)}
            message.save(update_fields=["data", "updated_at"])
        if open_approvals:
            # A later customer message withdraws the waiting ones unless it is an explicit yes
            # to them — before any model runs.
            approvals_withdraw(
                client=client,
                conversation=locked,
                message=message,
                answer=guards.confirmation_answer,
                candidates=open_approvals,
            )
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
        if locked.status == ConversationStatus.OPEN:
            turn_queue_on_commit(message=message, client_id=client.pk)
    return message


def _reopen_and_follow_language(locked: Conversation, *, client: Client, detected: str) -> None:
    """A new message reopens a closed chat and may move the conversation's language."""
    changed = []
    if locked.status == ConversationStatus.CLOSED:
        locked.status = ConversationStatus.OPEN
        changed.append("status")
    if detected:
        # The language the conversation is now held in (sticky: it moves only on evidence).
        language = reply_language(detected=detected, client=client, current=locked.language)
        if language != locked.language:
            locked.language = language
            changed.append("language")
    if changed:
        locked.save(update_fields=[*changed, "updated_at"])


def _message_data(
    confirm: dict[str, Any] | None,
    open_approvals: list[Any],
    token_window: dict[str, Any] | None,
) -> dict[str, Any]:
    """What the turn reads off the stored message besides its text (`handle_turn`)."""
    data: dict[str, Any] = {}
    if confirm is not None:
        data["confirm"] = dict(confirm)
    if open_approvals:
        data["approvals"] = [str(a.public_id) for a in open_approvals]
    if token_window:
        data["token_window"] = dict(token_window)
    return data


def _email_code_check(client: Client, conversation: Conversation, code: str) -> dict[str, Any]:
    """`otp_check`'s outcome as stored on the message (no code, the address masked). A failure
    must not lose the message: it is recorded as an error the turn answers."""
    try:  # otp_check is atomic: a failure rolls back its savepoint, not the message
        return otp_check(client=client, conversation=conversation, code=code).data
    except DB_ERRORS:
        raise
    except Exception:
        logger.exception("checking an e-mail code failed", extra={"conversation": conversation.pk})
        return {"result": CheckStatus.ERROR}


def turn_queue_on_commit(*, message: Message, client_id: int) -> None:
    """Queue the turn of a stored customer message once the transaction commits; then
    `message.turn_queued` says whether a worker took it (False: it ran in this process)."""
    message_id = message.pk

    def enqueue() -> None:
        message.turn_queued = _enqueue(message_id, client_id)

    transaction.on_commit(enqueue)


def _enqueue(message_id: int, client_id: int) -> bool:
    """Queue the turn of a stored message: True when a worker will run it, False when it ran
    here. Never raises: the message is committed, and a turn that cannot run now is answered
    later (in-process here, or by the sweeper)."""
    with tenant_scope(client_id):
        return dispatch.queue_or_run_here(
            dispatch.TURN,
            message_id,
            client_id=client_id,
            here=lambda: run_turn_in_process(message_id),
        )


def _enqueue_turn_notes(trace_id: int, confidence: int | None, client_id: int) -> None:
    """Queue the automatic notes of a committed turn. Never raises: notes are an aid, the turn
    is done. No broker (or it is down): written here, in-process, after the commit."""

    def here() -> None:
        with tenant_scope(client_id):
            turn_notes_write(trace_id=trace_id, confidence=confidence)

    try:
        dispatch.queue_or_run_here(
            dispatch.TURN_NOTES, trace_id, confidence, client_id=client_id, here=here
        )
    except Exception:
        logger.exception("writing the turn's notes failed", extra={"trace_id": trace_id})


def run_turn_in_process(message_id: int) -> None:
    """No broker (the demo, or the broker is down): run the turn in this thread. Waits for the
    earlier turn of another request; a database error reconnects and retries once, then the
    customer gets the fallback reply and a hand-off. Never raises: the message is stored, and
    what cannot be answered now is left to the sweeper."""
    waited_until = time.monotonic() + settings.REASONING_TURN_LEASE_SECONDS
    db_retried = False
    while True:
        try:
            turn_process(message_id=message_id)
            return
        except TurnBusy:
            if time.monotonic() > waited_until:
                logger.warning("turn still busy after the lease", extra={"message_id": message_id})
                return
            # An earlier message waits for a turn no one may run (queued on a broker that went
            # down): run it first, here. If another thread is on it, it stays busy for us.
            earlier = turn_waiting_before(message_id)
            if earlier is not None:
                with contextlib.suppress(TurnBusy):
                    turn_process(message_id=earlier)
                    continue
            time.sleep(EAGER_WAIT_STEP_SECONDS)
        except DB_ERRORS as exc:
            fresh_connection()
            if db_retried:
                turn_give_up_after_error(message_id, f"database error, retried once: {exc!r}")
                return
            db_retried = True
            logger.warning("turn hit a database error; retrying once", exc_info=True)
        except Exception:  # a turn must never turn a stored message into an error page
            logger.exception("turn failed outside the pipeline", extra={"message_id": message_id})
            return


def turn_give_up_after_error(message_id: int, detail: str) -> None:
    """`turn_give_up` (a system failure) on a fresh database connection, after the database
    failed the turn through its retries."""
    on_fresh_connection(
        "turn give-up",
        turn_give_up,
        message_id=message_id,
        reason=EscalationReason.SYSTEM_FAILURE,
        detail=detail,
    )


def _customer_message(message_id: int) -> Message | None:
    """The customer message a turn is about, with what every turn reads of it — and the status
    of its trace, None when it has none yet (`turn_status`)."""
    client_id = current_tenant()  # a turn's task runs in its client's scope
    if client_id is None:
        raise TenantScopeError("a turn runs inside its client's tenant_scope()")
    # Plain SQL, the message and then its conversation: every turn reads them first, and the
    # ORM's building of the joined read cost ≈ 2 ms of CPU (`turn_profile.py --statements`).
    found = sql_models(
        "reasoning.customer_message",
        Message,
        f"SELECT {model_columns(Message, 'm')}, (SELECT t.status FROM {_TRACES} t"  # noqa: S608
        " WHERE t.client_id = m.client_id AND t.user_message_id = m.id) AS turn_status"
        f" FROM {_MESSAGES} m WHERE m.client_id = %s AND m.id = %s AND m.role = %s",
        [client_id, message_id, Role.USER.value],
        client_id=client_id,
    )
    if not found:
        return None
    message = found[0]
    conversation = conversation_by_id(client_id=client_id, pk=message.conversation_id)
    # The client and its plan from the process's row cache (apps/clients/rowcache.py).
    client = client_cached(pk=client_id)
    if conversation is None or client is None:
        return None
    message.conversation = conversation
    message.client = conversation.client = client
    return message


_MESSAGES = Message._meta.db_table
_TRACES = ReasoningTrace._meta.db_table


def turn_process(*, message_id: int) -> ReasoningTrace | None:
    """Run the turn of one customer message. Raises TurnBusy when an earlier turn of the same
    conversation has to go first (the task retries)."""
    message = _customer_message(message_id)
    if message is None:
        return None
    turn_status = getattr(message, "turn_status", None)  # annotated by _customer_message
    if turn_status in (TraceStatus.DONE, TraceStatus.SKIPPED):
        return None  # a redelivered task: this turn is done
    if not turn_lock_take(message):
        raise TurnBusy(message_id)
    lock = TurnLock(message.conversation_id)
    try:
        return _process_locked(message, traced=turn_status is not None, lock=lock)
    finally:
        if lock.held:  # (the turn's finish releases it with its commit)
            on_fresh_connection("turn unlock", turn_lock_release, message)


def _process_locked(message: Message, *, traced: bool, lock: TurnLock) -> ReasoningTrace | None:
    claimed = turn_claim(message, traced=traced)
    if claimed is None:
        return None
    trace, fresh = claimed
    started = time.perf_counter()
    try:
        # Every model call, webhook call and retry of the turn fits in its deadline.
        with deadline_scope(settings.REASONING_TURN_DEADLINE_SECONDS):
            return _process_claimed(message, trace, started, fresh=fresh, lock=lock)
    except DB_ERRORS as exc:
        # The connection died mid-turn. Note it and hand the claim back on a fresh connection
        # so the retry (tasks.py) takes the turn over at once; re-raise for that retry.
        logger.warning("turn interrupted by a database error", extra={"message_id": message.pk})
        fresh_connection()
        on_fresh_connection("turn release", _release_claim, trace, repr(exc))
        raise


def _release_claim(trace: ReasoningTrace, error: str) -> None:
    ReasoningTrace.objects.filter(
        pk=trace.pk, client_id=trace.client_id, status=TraceStatus.PROCESSING
    ).update(updated_at=timezone.now() - turn_lease() - timedelta(seconds=1))
    trace_note(trace, "interrupted", {"reason": "database error; the turn is retried"}, error)


def trace_note(trace: ReasoningTrace, name: str, output: dict[str, Any], error: str = "") -> None:
    """Append a step to a trace outside a running turn (sweeper, recovery)."""
    last = trace.steps.order_by("-index").values_list("index", flat=True).first()
    ReasoningStep.objects.create(
        client_id=trace.client_id,
        trace=trace,
        index=0 if last is None else last + 1,
        name=name,
        output=output,
        error=error[:4000],
    )


def _process_claimed(
    message: Message,
    trace: ReasoningTrace,
    started: float,
    *,
    fresh: bool = False,
    lock: TurnLock | None = None,
) -> ReasoningTrace:
    """`fresh`: the trace was created by this claim (no steps yet). The conversation's status
    is the one read with the message, just before the claim; it is re-checked before every LLM
    call and tool run (`TurnRecorder.ensure_open`) and under the row lock before posting."""
    client, conversation = message.client, message.conversation
    recorder = TurnRecorder(
        trace=trace, client=client, conversation=conversation, next_index=0 if fresh else None
    )

    if conversation.status != ConversationStatus.OPEN:
        recorder.step("skipped", output={"reason": f"conversation is {conversation.status}"})
        _finish(recorder, Outcome(), started, status=TraceStatus.SKIPPED, lock=lock)
        return trace
    recorder.open_just_read = True

    turn = Turn(
        client=client,
        plan=client.plan,
        conversation=conversation,
        user_message=message,
        rec=recorder,
        tools=tool_list_for_turn(client=client),
        history=_history(client=client, conversation=conversation, upto=message),
    )
    turn.on_progress = _progress_reporter(trace, conversation.pk)
    turn.reply_writer = ReplyDraftWriter(conversation_id=conversation.pk, turn_id=trace.pk)
    turn.question_touched = pending_touched(
        client=client, conversation=conversation, user_message=message
    )
    turn.confirmed, turn.declined = pending_settle(
        client=client,
        conversation=conversation,
        user_message=message,
        decide=guards.confirmation_decision,
        touched=turn.question_touched,
    )
    settled = turn.confirmed or turn.declined
    if settled is not None:
        record_settled(turn, settled)  # how the question was settled, and why

    # The turn's fixed replies (questions, fallbacks, the hand-off notice) are rendered in the
    # language it replies in; its prompts ask the model for that language (steps._shared).
    with translation.override(turn.language):
        _run_and_finish(turn, started, lock=lock)
    return trace


def _run_and_finish(turn: Turn, started: float, *, lock: TurnLock | None) -> None:
    result = run_turn(
        turn, deadline=settings.REASONING_TURN_DEADLINE_SECONDS, surface=_LiveSurface()
    )
    if result.failure == Failure.ABORTED:
        # Stopped by a takeover (`TurnRecorder.ensure_open`): the conversation is a person's.
        _finish(turn.rec, Outcome(), started, status=TraceStatus.SKIPPED, lock=lock)
    else:
        _finish(
            turn.rec,
            result.outcome,
            started,
            status=result.status,
            lock=lock,
            language=turn.language,
            error=result.error,
        )
    _forget_reply_draft(turn)


def _forget_reply_draft(turn: Turn) -> None:
    """The reply shown while it was written has been posted (or replaced): its draft goes."""
    writer = turn.reply_writer
    if writer is not None and writer.writes:
        reply_draft_clear(writer.conversation_id)


def _progress_reporter(trace: ReasoningTrace, conversation_id: int) -> Any:
    """Deliberative mode's progress → the trace (the widget's typing event shows "Thinking it
    through… step N", never the reasoning) and a wake-up for the conversation's streams."""

    def report(step: int, max_steps: int) -> None:
        progress = {"step": step, "max_steps": max_steps}
        ReasoningTrace.objects.filter(pk=trace.pk, client_id=trace.client_id).update(
            progress=progress, updated_at=timezone.now()
        )
        trace.progress = progress
        conversation_changed(conversation_id)

    return report


def turn_give_up(
    *, message_id: int, reason: str, detail: str, stale_only: bool = False
) -> ReasoningTrace | None:
    """Finish a turn that cannot run (the database failed through every retry; the sweeper
    found it stuck again after re-queuing it): the customer gets the fallback reply and a
    hand-off, staff see `reason` and `detail` on the escalation and the trace (status failed).
    Idempotent: a finished turn is left alone; with `stale_only`, so is one a worker holds."""
    message = _customer_message(message_id)
    if message is None:
        return None
    with transaction.atomic():
        trace, created = ReasoningTrace.objects.select_for_update().get_or_create(
            user_message=message,
            defaults={
                "client": message.client,
                "conversation": message.conversation,
                "mode": mode_that_runs(message.client.plan.ai_mode),
            },
        )
        if trace.status != TraceStatus.PROCESSING:
            return None
        if stale_only and not created and trace.updated_at > timezone.now() - turn_lease():
            return None  # a worker took it over meanwhile
        recorder = TurnRecorder(
            trace=trace, client=message.client, conversation=message.conversation
        )
        recorder.step("gave_up", output={"reason": reason}, error=detail)
        trace.error = detail[:2000]
        with translation.override(message.conversation.language):
            _finish(
                recorder,
                Outcome(escalate=(reason, detail), handoff_text=str(FALLBACK_TEXT)),
                time.perf_counter(),
                status=TraceStatus.FAILED,
            )
    return trace


class _LiveSurface(TurnSurface):
    """What a live turn adds around the shared run (`run_turn`): the fixed answers (a typed
    e-mail code, the token window, a confirmation asked again, the approval requests' words),
    the per-conversation and per-visitor limits and the monthly budget's reservation."""

    retries_db_errors = True  # retried on a fresh connection (see _process_locked)

    def __init__(self) -> None:
        self.approval_words = WithdrawalReplies()

    def answer_first(self, turn: Turn) -> Outcome | None:
        checked = (turn.user_message.data or {}).get("email_code")
        if not isinstance(checked, dict):
            return None
        # A typed one-time code, checked when the message was stored: a fixed reply, no LLM.
        turn.rec.step("email_code", output={"result": checked.get("result")})
        reply = Reply(text=otp_check_text(checked), data={"email_code": checked.get("result")})
        return Outcome(replies=[reply])

    def answer_without_model(self, turn: Turn) -> Outcome | None:
        window = (turn.user_message.data or {}).get("token_window")
        if isinstance(window, dict):
            # Over the widget's token window (the message was stored anyway): a person answers
            # it, no model call (docs/widget.md "Limits and throttles").
            turn.rec.step("token_window", output=window)
            raise Escalate(
                EscalationReason.USAGE_LIMIT,
                f"token window of the {window.get('window', '')} reached: "
                f"{int(window.get('used') or 0):,} tokens used in the last "
                f"{int(window.get('seconds') or 0):,} s (limit {int(window.get('limit') or 0):,})",
                handoff_text=str(TOKEN_WINDOW_TEXT),
            )
        # A typed answer to a confirmation that was no clear yes or no: the question again, with
        # its buttons, before any model runs (apps/reasoning/reask.py).
        asked_again = reask_outcome(turn)
        if asked_again is not None:
            return asked_again
        # What this message did to the conversation's approval requests (withdrawn by a no or a
        # new request, still waiting after a yes): fixed words, never left to the model.
        if (turn.user_message.data or {}).get("approvals"):
            self.approval_words = withdrawal_replies(
                client=turn.client,
                conversation=turn.conversation,
                message=turn.user_message,
                answer=guards.confirmation_answer,
                confirmed=turn.confirmed is not None,
            )
        words = self.approval_words
        if words.replies:
            turn.rec.step("approval_answer", output=words.as_data())
        if words.answer_only:
            return Outcome(replies=[Reply(text=text) for text in words.replies])
        return None

    def run_model(self, turn: Turn, draft: Callable[[], Outcome]) -> Outcome:
        rec, meter = turn.rec, turn.rec.meter
        limits = _limits_admit(turn)
        try:
            if limits.capped:
                _run_as(rec, limits.mode)
                rec.step("deliberative_cap", output={**limits.capped, "mode": limits.mode})
            # Monthly budgets (billing): reserve before any LLM call, commit what was used after
            # — also when the mode raised — so concurrent turns cannot overshoot by more than
            # one turn.
            try:
                reservation = meter.turn_reserve()
            except UsageLimitReached as exc:
                raise Escalate(
                    EscalationReason.USAGE_LIMIT, exc.detail, handoff_text=str(USAGE_LIMIT_TEXT)
                ) from exc
            try:
                # After the draft (the post-draft hooks ran), before the reply is stored and sent.
                outcome = draft()
                _attach_sources(turn, outcome)
                notes = [Reply(text=text) for text in self.approval_words.replies]
                outcome.replies[:0] = notes  # the withdrawal first, then the answer
                return outcome
            finally:
                if reservation is not None:
                    meter.turn_commit(reservation, llm_calls=rec.trace.llm_calls)
        finally:
            _limits_commit(turn, limits)


def _limits_admit(turn: Turn) -> TurnLimits:
    """Per-conversation and per-visitor limits (billing/services/visitors.py): the mode the turn
    may run in, and its hold on the visitor's day — before any LLM call."""
    rec = turn.rec
    try:
        return turn_limits_admit(
            client=turn.client,
            conversation=turn.conversation,
            trace=rec.trace,
            mode=mode_that_runs(rec.trace.mode),
        )
    except UsageLimitReached as exc:
        rec.step("usage_limit", output={"limit": exc.metric}, error=exc.detail)
        if exc.metric == VISITOR_TOKENS:
            # A visitor over their day is handed to a person, never left without one: behind one
            # address may be a whole office. Starting conversations is throttled per address,
            # so this fills the staff queue no faster than asking for a person does.
            raise Escalate(
                EscalationReason.USAGE_LIMIT, exc.detail, handoff_text=str(VISITOR_LIMIT_TEXT)
            ) from exc
        raise Escalate(
            EscalationReason.USAGE_LIMIT, exc.detail, handoff_text=str(USAGE_LIMIT_TEXT)
        ) from exc


def _attach_sources(turn: Turn, outcome: Outcome) -> None:
    """A knowledge answer carries the articles it came from (`data.sources`): the widget and
    the console list them under it (docs/widget.md, "Sources under an answer")."""
    if outcome.escalate:
        return
    answers = [reply for reply in outcome.replies if reply.kind == Kind.TEXT]
    if not answers:
        return
    sources = knowledge.answer_sources(turn)
    if sources:
        answers[-1].data = {**answers[-1].data, "sources": sources}


def _run_as(rec: TurnRecorder, mode: str) -> None:
    """The limits run this turn in another mode than the plan's: recorded, and billed, as it."""
    ReasoningTrace.objects.filter(pk=rec.trace.pk, client_id=rec.trace.client_id).update(mode=mode)
    rec.trace.mode = rec.mode = mode
    rec.meter.plan_cap_for(mode)


def _limits_commit(turn: Turn, limits: TurnLimits) -> None:
    """Never raises: the reply must not be lost over bookkeeping (a stale hold is settled by
    the visitor's next turn)."""
    try:
        turn_limits_commit(client=turn.client, limits=limits, tokens=turn.rec.meter.tokens_used)
    except Exception:
        logger.exception("limits commit failed", extra={"trace": turn.rec.trace.pk})


def _history(*, client: Client, conversation: Conversation, upto: Message) -> list[Message]:
    return conversation_history(
        client=client,
        conversation_id=conversation.pk,
        upto_seq=upto.seq,
        limit=settings.REASONING_HISTORY_MESSAGES,
    )


def _finish(
    rec: TurnRecorder,
    outcome: Outcome,
    started: float,
    status: str = TraceStatus.DONE,
    *,
    lock: TurnLock | None = None,
    language: str = "",
    error: str | None = None,
) -> None:
    """Post the replies, escalate if asked and close the trace — one transaction. With the turn
    `lock` this worker holds, the same transaction releases it. The replies are recorded as
    written in `language` (the turn's reply language); `error` (what failed, for staff) goes on
    the trace (None: left as it is)."""
    trace, client = rec.trace, rec.client
    with transaction.atomic():
        conversation = rec.conversation
        # Re-read under the row lock: a person may have taken over while the model was thinking.
        if lock is not None:
            conversation.status = lock_row_releasing_turn(conversation)
        else:
            conversation.status = (
                Conversation.objects.for_client(client)
                .select_for_update()
                .values_list("status", flat=True)
                .get(pk=conversation.pk)
            )
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
                language=language,
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
                handoff_text=outcome.handoff_text or str(HANDOFF_NOTICE),
            )
            trace.escalated = True
        if not replies:
            # Typing stops (event streams). A posted reply already woke them (message_append,
            # the same transaction), and a stream reads all that changed on one wake-up.
            conversation_changed(conversation.pk, client.pk)
        if replies or trace.escalated:
            # The replies this turn posted, for a channel that delivers them itself (the e-mail
            # channel mails them): an internal event, after this transaction commits.
            emit(
                TURN_REPLIED,
                client_id=client.pk,
                conversation=rec.conversation.public_id,
                data={
                    "conversation_id": conversation.pk,
                    "trace_id": trace.pk,
                    "channel": rec.conversation.channel,
                },
            )
        if status != TraceStatus.SKIPPED and (trace.tool_calls or trace.escalated):
            # What the turn teaches later ones — written once this transaction commits.
            trace_id, confidence, client_id = trace.pk, outcome.confidence, client.pk
            transaction.on_commit(lambda: _enqueue_turn_notes(trace_id, confidence, client_id))
        trace_finish(rec, status=status, started=started, error=error)
    if lock is not None:
        lock.held = False  # committed with the turn's replies


# FALLBACK_TEXT, USAGE_LIMIT_TEXT and wants_human live with the turn driver (run.py).
__all__ = [
    "FALLBACK_TEXT",
    "USAGE_LIMIT_TEXT",
    "Reply",
    "TurnBusy",
    "handle_turn",
    "turn_process",
    "wants_human",
]
