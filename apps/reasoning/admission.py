"""Turn admission and locking: which worker may run a customer message's turn, and when.

A turn runs under two guards. The conversation's turn lock (`turn_lock_until` on its row, taken
in message order by `turn_lock_take`) keeps two turns of one conversation from running at once;
the claim on the message's trace (`turn_claim`) keeps a redelivered task from answering twice.
Both are leases: a worker that died stops blocking once `turn_lease()` has passed. This module
is the only writer of the lock column; `apps/reasoning/services.py` runs the turn itself."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

from apps.conversations.events import conversation_changed
from apps.conversations.models import Conversation, Message, Role
from apps.conversations.services import typing_note
from apps.core.tenant_sql import sql_insert, sql_rows
from apps.reasoning.models import ReasoningTrace, TraceStatus
from apps.reasoning.modes import mode_that_runs

logger = logging.getLogger(__name__)

# The database went away (restart, failover, a pooler recycling connections): the turn is
# retried on a fresh connection (tasks.py), never answered from a half-written state.
DB_ERRORS: tuple[type[Exception], ...] = (OperationalError, InterfaceError)


def turn_claim(message: Message, *, traced: bool = True) -> tuple[ReasoningTrace, bool] | None:
    """Create or take over the turn of this message: (trace, whether this claim created it);
    None when it is done or in progress elsewhere (a redelivered task must not answer twice).
    `traced`: the message had a trace when it was read (False: try the one-INSERT claim)."""
    if not traced:
        trace = _claim_new(message)
        if trace is not None:
            return trace, True
    lease = turn_lease()
    with transaction.atomic():
        trace, created = ReasoningTrace.objects.select_for_update().get_or_create(
            user_message=message, defaults=_new_trace_fields(message)
        )
        if created:
            conversation_changed(  # typing starts
                message.conversation_id, message.client_id, note=_typing_note(message)
            )
            return trace, True
        if trace.status != TraceStatus.PROCESSING:
            return None
        if trace.updated_at > timezone.now() - lease:
            return None  # another worker is on it
        trace.save(update_fields=["updated_at"])  # take over a turn whose worker died
        return trace, False


def _new_trace_fields(message: Message) -> dict[str, Any]:
    return {
        "client": message.client,
        "conversation": message.conversation,
        # The mode that runs: recorded and billed.
        "mode": mode_that_runs(message.client.plan.ai_mode),
        "model": settings.LLM_MODEL if settings.OPENAI_API_KEY else "offline-demo",
    }


def _claim_new(message: Message) -> ReasoningTrace | None:
    """The common case, in one INSERT: the message had no trace when it was read. The unique
    `user_message` decides a race (None: another worker created it first — `turn_claim` then
    looks at that trace under its row lock)."""
    trace = ReasoningTrace(user_message=message, **_new_trace_fields(message))
    try:
        if connection.in_atomic_block:  # (tests, eager callers): keep the outer block usable
            with transaction.atomic():
                sql_insert("reasoning.trace_insert", trace)
        else:  # autocommit: the INSERT is its own transaction
            sql_insert("reasoning.trace_insert", trace)
    except IntegrityError:
        return None
    conversation_changed(  # typing starts
        message.conversation_id, message.client_id, note=_typing_note(message)
    )
    return trace


class TurnBusy(Exception):
    """An earlier turn of the same conversation is still queued or running; try again shortly."""


def turn_lease() -> timedelta:
    return timedelta(seconds=settings.REASONING_TURN_LEASE_SECONDS)


def fresh_connection() -> None:
    """After a database error: drop the (probably dead) connection so the next query opens a
    new one. Inside a transaction the connection is left alone (the transaction is lost
    anyway and its owner rolls back)."""
    if not connection.in_atomic_block:
        connection.close()


def on_fresh_connection(what: str, action: Any, *args: Any, **kwargs: Any) -> bool:
    """Run bookkeeping that must not be lost with a dead connection: once, and once more on a
    fresh connection if the database failed. False when the database is still unreachable
    (then the lease runs out and the sweeper finishes the job)."""
    for attempt in (1, 2):
        try:
            action(*args, **kwargs)
            return True
        except DB_ERRORS:
            fresh_connection()
            if attempt == 2:
                logger.warning("%s: database unreachable; left to the sweeper", what, exc_info=True)
    return False


def turn_lock_take(message: Message) -> bool:
    """Take the conversation's turn lock, in message order: not while an earlier customer
    message still waits for its turn (it has no trace yet), nor while another turn holds the
    lock. A lock or a queued message older than the lease belongs to a dead worker or a lost
    task and no longer blocks. One UPDATE: the earlier-message check is its NOT EXISTS.

    Plain SQL, not the ORM: every turn runs it, and building the ORM's negated subquery cost
    ≈ 1.5 ms of CPU against ≈ 0.2 ms for the statement itself (docs/benchmarks.md). The message
    and the conversation are matched on the client too."""
    now = timezone.now()
    lease = turn_lease()
    adapt = connection.ops.adapt_datetimefield_value
    taken = sql_rows(
        "reasoning.take_turn_lock",
        _take_turn_lock_sql(),
        [
            adapt(now + lease),
            message.conversation_id,
            message.client_id,
            adapt(now),
            message.client_id,
            message.conversation_id,
            Role.USER,
            message.seq,
            adapt(now - lease),
        ],
        client_id=message.client_id,
    )
    if len(taken) != 1:
        return False
    if Message.conversation.is_cached(message):  # brought up to date: the turn's start note
        message.conversation.last_seq, message.conversation.status = taken[0][1], taken[0][2]
    return True


def _typing_note(message: Message) -> dict[str, Any] | None:
    """The note a turn's start publishes (apps/conversations/events.py): the typing line is on,
    at the `seq` and status its conversation had when the turn lock was taken — None when the
    conversation was not read with the message (the streams then read)."""
    if not Message.conversation.is_cached(message):
        return None
    return typing_note(message.conversation)


@functools.cache
def _take_turn_lock_sql() -> str:
    conversation = Conversation._meta.db_table
    messages = Message._meta.db_table
    traces = ReasoningTrace._meta.db_table
    return (
        f"UPDATE {conversation} SET turn_lock_until = %s "  # noqa: S608 (table names only)
        "WHERE id = %s AND client_id = %s AND (turn_lock_until IS NULL OR turn_lock_until < %s) "
        f"AND NOT EXISTS (SELECT 1 FROM {messages} m WHERE m.client_id = %s "
        "AND m.conversation_id = %s AND m.role = %s AND m.seq < %s AND m.created_at > %s "
        f"AND NOT EXISTS (SELECT 1 FROM {traces} t WHERE t.user_message_id = m.id)) "
        "RETURNING id, last_seq, status"
    )


def turn_waiting_before(message_id: int) -> int | None:
    """The earliest customer message of the same conversation still waiting for its turn (no
    trace yet), before this one — what a `TurnBusy` may be waiting for."""
    message = (
        Message.objects.for_current_client()  # a turn's task runs in its client's scope
        .filter(pk=message_id)
        .values("conversation_id", "seq")
        .first()
    )
    if message is None:
        return None
    return (
        Message.objects.for_current_client()
        .filter(
            conversation_id=message["conversation_id"],
            role=Role.USER,
            seq__lt=message["seq"],
            turn__isnull=True,
            created_at__gt=timezone.now() - turn_lease(),
        )
        .order_by("seq")
        .values_list("pk", flat=True)
        .first()
    )


def turn_lock_release(message: Message) -> None:
    Conversation.objects.filter(pk=message.conversation_id, client_id=message.client_id).update(
        turn_lock_until=None
    )


@dataclass
class TurnLock:
    """The conversation's turn lock this worker holds (`turn_lock_take`). A turn that
    finishes releases it in its finishing transaction (`_finish`); otherwise `turn_process`
    releases it when it is done."""

    conversation_id: int
    held: bool = True


def lock_row_releasing_turn(conversation: Conversation) -> str:
    """In `_finish`'s transaction: lock the conversation's row, read its status and release the
    turn lock, in one statement (the ORM's update() cannot return the status)."""
    qn = connection.ops.quote_name
    rows = sql_rows(
        "reasoning.release_turn_lock",
        f"UPDATE {qn(Conversation._meta.db_table)} SET {qn('turn_lock_until')} = NULL "  # noqa: S608
        f"WHERE {qn('id')} = %s AND {qn('client_id')} = %s RETURNING {qn('status')}",
        [conversation.pk, conversation.client_id],
        client_id=conversation.client_id,
    )
    if not rows:
        raise Conversation.DoesNotExist(f"conversation {conversation.pk} does not exist")
    return str(rows[0][0])
