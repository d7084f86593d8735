"""Per-conversation and per-visitor limits (OWASP LLM10: denial of wallet).

The monthly budget (`budgets.py`) protects the platform from a client; these limits protect a
client from one visitor, so that no anonymous visitor can spend the client's monthly budget (and
hand every other customer of the month to staff) on their own. Per plan:

* `conversation_token_budget` — the most tokens one conversation may use. Its turns run one at
  a time (the conversation's turn lock), so what it used is simply the sum of its usage records;
  at the limit the conversation is handed to staff (reason `usage_limit`).
* `visitor_daily_token_budget` — the most tokens one visitor may use per day, over all their
  conversations. A visitor is the client address their widget messages come from
  (`apps.platform.throttling.visitor_key`: a keyed hash; IPv6 per /64); a new conversation does not
  make a new visitor. Their turns run concurrently, so this one is reserve → run → commit on a
  `VisitorUsage` row, like the monthly budget: each changes the row in one conditional `UPDATE`,
  the last statement of its transaction (customers behind one office address write at once
  without queueing on the row), and concurrent turns together pass the budget by at most the
  one turn admitted just under it. At the limit the conversation is handed to staff.
* `deliberative_turns_per_hour` — on a plan whose mode deliberates (`Mode.deliberates`), how
  many turns of one conversation per hour may run in it. The others run adaptive, as does a
  turn whose whole reservation no longer fits in what is left of the conversation's or the
  visitor's budget. A mode that deliberates only when needed ("deliberate when needed") counts
  the turns that deliberated, and a capped turn runs adaptive (it never deliberates).

Every turn of a known visitor also charges the tokens it used to its conversation's and its
address's token windows (`apps.platform.throttling.token_window_charge`), which the widget checks
before it stores a message (over one, the message is handed to staff).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from apps.billing import periods
from apps.billing.models import (
    ConversationVisitor,
    ReservationState,
    TurnAllowance,
    UsageRecord,
    VisitorUsage,
)
from apps.billing.services.budgets import (
    HoldSettle,
    UsageLimitReached,
    held_for_turn,
    stale_after,
    trace_tokens,
    turn_token_estimate,
)
from apps.clients import modes
from apps.clients.models import AIMode, Client
from apps.conversations.models import Conversation
from apps.core.tenant_sql import sql_rows, with_tables
from apps.platform.throttling import token_window_charge

CONVERSATION_TOKENS = "conversation_tokens"
VISITOR_TOKENS = "visitor_tokens"
DELIBERATIVE_WINDOW = timedelta(hours=1)


def may_deliberate(mode: str) -> bool:
    """Whether a turn of `mode` may deliberate (and so is capped per hour, and must fit a
    deliberative reservation): what the mode declares (`Mode.deliberates`)."""
    declared = modes.find(mode)
    return declared is not None and declared.may_deliberate


@dataclass
class TurnLimits:
    """What the limits let one turn do: the mode it runs in (`capped` says why it is not the
    plan's deliberative mode, when it is not), and its hold on the visitor's day."""

    mode: str
    visitor: str = ""
    conversation_id: int | None = None
    allowance: TurnAllowance | None = None
    capped: dict[str, Any] | None = None
    spent: dict[str, int] = field(default_factory=dict)


def conversation_visitor_record(*, client: Client, conversation: Any, visitor: str) -> None:
    """Note which visitor the conversation's next message comes from: one plain upsert that
    writes only when the visitor changed (every widget message runs it; almost all come from
    the visitor before, and the ORM's upsert cost ≈ 1.5 ms of CPU to build)."""
    if not visitor:
        return
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    sql_rows(
        "billing.conversation_visitor",
        _conversation_visitor_sql(),
        [now, now, client.pk, conversation.pk, visitor],
        client_id=client.pk,
    )


@functools.cache
def _conversation_visitor_sql() -> str:
    table = connection.ops.quote_name(ConversationVisitor._meta.db_table)
    return (
        f"INSERT INTO {table} (created_at, updated_at, client_id, conversation_id, visitor)"  # noqa: S608
        " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (conversation_id) DO UPDATE"
        " SET visitor = EXCLUDED.visitor, updated_at = EXCLUDED.updated_at"
        f" WHERE {table}.client_id = EXCLUDED.client_id AND {table}.visitor <> EXCLUDED.visitor"
    )


def _locked_visitor_usage(*, client: Client, day: Any, visitor: str) -> VisitorUsage:
    usage = (
        VisitorUsage.objects.select_for_update()
        .filter(client=client, day=day, visitor=visitor)
        .first()
    )
    if usage is not None:
        return usage
    try:
        with transaction.atomic():
            VisitorUsage.objects.create(client=client, day=day, visitor=visitor)
    except IntegrityError:
        pass  # another turn of this visitor created it first; lock theirs
    return VisitorUsage.objects.select_for_update().get(client=client, day=day, visitor=visitor)


def turn_limits_admit(*, client: Client, conversation: Any, trace: Any, mode: str) -> TurnLimits:
    """Admit one turn against its conversation's and visitor's limits and pick the mode it
    runs in; raise `UsageLimitReached` (metric `conversation_tokens` or `visitor_tokens`) when
    it may not call the model. A turn taken over from a worker that died keeps its hold."""
    plan = client.plan
    now = timezone.now()
    so_far = _conversation_so_far(
        client=client, conversation=conversation, trace=trace, now=now, deep=may_deliberate(mode)
    )
    used = int(so_far["tokens"] or 0)
    limits = TurnLimits(mode=mode, conversation_id=conversation.pk, spent={"conversation": used})
    budget = plan.conversation_token_budget
    if budget and used >= budget:
        raise UsageLimitReached(
            CONVERSATION_TOKENS,
            f"conversation token budget {budget:,} reached ({used:,} used)",
        )
    if may_deliberate(mode):
        per_hour = plan.deliberative_turns_per_hour
        if per_hour and so_far["deliberative"] >= per_hour:
            limits.capped = {
                "reason": "hourly_cap",
                "limit": per_hour,
                "deliberative_last_hour": so_far["deliberative"],
            }
        elif budget and used + turn_token_estimate(plan, mode) > budget:
            limits.capped = {"reason": "conversation_budget", "budget": budget, "used": used}
    limits.visitor = so_far["visitor"] or ""
    if limits.visitor and plan.visitor_daily_token_budget:
        _admit_visitor(client=client, trace=trace, limits=limits, now=now)
    if limits.capped:
        limits.mode = AIMode.ADAPTIVE
    return limits


def _conversation_so_far(
    *, client: Client, conversation: Any, trace: Any, now: Any, deep: bool
) -> dict[str, Any]:
    """In one query: the tokens the conversation used (this turn's earlier attempt included),
    its other deliberative turns of the last hour (only asked for a turn that may deliberate,
    `deep`), and its visitor. Its turns run one at a time (the conversation's turn lock), so
    nothing else of it is in flight.

    Plain SQL, not the ORM: every turn runs it, and building the ORM's subqueries cost ≈ 2 ms of
    CPU against ≈ 0.2 ms for the statement (docs/benchmarks.md). Every table is matched on the
    client."""
    always, when_needed = _deliberating_modes()
    params: list[Any] = [client.pk, conversation.pk, client.pk, conversation.pk]
    if deep:
        params += [client.pk, conversation.pk]
        params += [connection.ops.adapt_datetimefield_value(now - DELIBERATIVE_WINDOW)]
        params += [getattr(trace, "pk", None) or 0, *always, *when_needed]
    params += [conversation.pk, client.pk]
    rows = sql_rows(
        "billing.conversation_so_far",
        _so_far_sql(deep, len(always), len(when_needed)),
        params,
        client_id=client.pk,
    )
    row = rows[0] if rows else (None, None, None)
    return {
        "tokens": int(row[0] or 0),
        "visitor": row[1] or "",
        "deliberative": int(row[2] or 0) if deep else 0,
    }


def _deliberating_modes() -> tuple[list[str], list[str]]:
    """The modes whose every turn deliberates, and those that deliberate when needed (a turn of
    those deliberated when its trace records a trigger)."""
    always = [m.name for m in modes.modes() if m.deliberates is modes.Deliberation.ALWAYS]
    when_needed = [m.name for m in modes.modes() if m.deliberates is modes.Deliberation.WHEN_NEEDED]
    return always, when_needed


@functools.cache
def _so_far_sql(deep: bool, always: int, when_needed: int) -> str:
    records = UsageRecord._meta.db_table
    visitors = ConversationVisitor._meta.db_table
    traces = UsageRecord._meta.get_field("trace").related_model._meta.db_table
    asked = [
        f"(SELECT SUM(r.prompt_tokens + r.completion_tokens) FROM {records} r"  # noqa: S608
        " WHERE r.client_id = %s AND r.conversation_id = %s)",
        f"(SELECT v.visitor FROM {visitors} v"  # noqa: S608
        " WHERE v.client_id = %s AND v.conversation_id = %s LIMIT 1)",
    ]
    if deep:
        deliberated = [
            f"r.mode IN ({', '.join(['%s'] * always)})" if always else "",
            f"(r.mode IN ({', '.join(['%s'] * when_needed)}) AND t.deliberation_trigger > '')"
            if when_needed
            else "",
        ]
        asked.append(
            f"(SELECT COUNT(DISTINCT r.trace_id) FROM {records} r"  # noqa: S608
            f" LEFT JOIN {traces} t ON t.id = r.trace_id"
            " WHERE r.client_id = %s AND r.conversation_id = %s AND r.created_at >= %s"
            " AND r.trace_id <> %s"
            f" AND ({' OR '.join(part for part in deliberated if part) or '1 = 0'}))"
        )
    conversations = Conversation._meta.db_table
    return (
        f"SELECT {', '.join(asked)} FROM {conversations} c"  # noqa: S608
        " WHERE c.id = %s AND c.client_id = %s"
    )


def _admit_visitor(*, client: Client, trace: Any, limits: TurnLimits, now: Any) -> None:
    usage, held = _visitor_day(client=client, trace=trace, visitor=limits.visitor, now=now)
    if usage is not None:
        own: TurnAllowance | None = None
        stale: list[TurnAllowance] = []
        if held:
            own, stale = held_for_turn(
                TurnAllowance.objects.for_client(client), trace=trace, now=now, visitor_usage=usage
            )
        if not stale and (own is None or own.state != ReservationState.RESERVED):
            try:
                if _admit_visitor_at_once(
                    client=client, trace=trace, limits=limits, usage=usage, own=own
                ):
                    return
            except IntegrityError:
                pass  # another worker took this turn over at the same moment
    _admit_visitor_locked(client=client, trace=trace, limits=limits, now=now)


_DAY_FIELDS = ("id", "client_id", "visitor", "tokens_used", "tokens_reserved")


def _visitor_day(
    *, client: Client, trace: Any, visitor: str, now: Any
) -> tuple[VisitorUsage | None, bool]:
    """The visitor's row of today (None: not made yet), and whether `held_for_turn` would find
    anything there: this turn's own allowance (a turn taken over) or a dead worker's. One plain
    statement: every turn of a visitor runs it, and almost every one finds nothing held."""
    trace_id = getattr(trace, "pk", None)
    ops = connection.ops
    rows = sql_rows(
        "billing.visitor_day",
        _visitor_day_sql(),
        [
            client.pk,
            trace_id or 0,
            ReservationState.RESERVED.value,
            ops.adapt_datetimefield_value(now - stale_after()),
            client.pk,
            ops.adapt_datefield_value(periods.today()),
            visitor,
        ],
        client_id=client.pk,
    )
    if not rows:
        return None, True
    usage = VisitorUsage.from_db(connection.alias, _DAY_FIELDS, rows[0][: len(_DAY_FIELDS)])
    return usage, trace_id is None or bool(rows[0][-1])


@functools.cache
def _visitor_day_sql() -> str:
    qn = connection.ops.quote_name
    columns = ", ".join(f"u.{qn(name)}" for name in _DAY_FIELDS)
    return (
        f"SELECT {columns}, EXISTS (SELECT 1 FROM {qn(TurnAllowance._meta.db_table)} a"  # noqa: S608
        " WHERE a.client_id = %s AND (a.trace_id = %s OR (a.visitor_usage_id = u.id"
        " AND a.state = %s AND a.updated_at < %s)))"
        f" FROM {qn(VisitorUsage._meta.db_table)} u"
        " WHERE u.client_id = %s AND u.day = %s AND u.visitor = %s"
    )


class _NoRoom(Exception):
    """The conditional update found no room: roll the new allowance back."""


def _admit_visitor_at_once(
    *,
    client: Client,
    trace: Any,
    limits: TurnLimits,
    usage: VisitorUsage,
    own: TurnAllowance | None,
) -> bool:
    """The common case (the visitor's row exists; nothing of this turn or of a dead worker to
    settle): insert the allowance, then add it to the row in one conditional `UPDATE`, the
    transaction's last statement. False: no room by the row as it is now — the locked path
    decides (and words the refusal)."""
    plan = client.plan
    budget = plan.visitor_daily_token_budget
    held = usage.tokens_used + usage.tokens_reserved  # as read, unlocked: the cap is advisory
    if held >= budget:
        return False
    capped = limits.capped
    if (
        may_deliberate(limits.mode)
        and not capped
        and held + turn_token_estimate(plan, limits.mode) > budget
    ):
        capped = {"reason": "visitor_budget", "budget": budget, "used": held}
    estimate = turn_token_estimate(plan, AIMode.ADAPTIVE if capped else limits.mode)
    try:
        with transaction.atomic():
            allowance = own or TurnAllowance(client=client, trace=trace)
            allowance.visitor_usage, allowance.visitor = usage, limits.visitor
            allowance.state, allowance.tokens_reserved = ReservationState.RESERVED, estimate
            allowance.save()
            admitted = sql_rows(
                "billing.visitor_admit",
                _visitor_sql(
                    "UPDATE {days} SET tokens_reserved = tokens_reserved + %s,"
                    " turns = turns + %s, updated_at = %s"
                    " WHERE id = %s AND client_id = %s AND tokens_used < %s - tokens_reserved"
                    " RETURNING id"
                ),
                [
                    estimate,
                    int(own is None),
                    connection.ops.adapt_datetimefield_value(timezone.now()),
                    usage.pk,
                    client.pk,
                    budget,
                ],
                client_id=client.pk,
            )
            if not admitted:
                raise _NoRoom
    except _NoRoom:
        return False
    limits.spent["visitor"], limits.capped, limits.allowance = held, capped, allowance
    return True


def _admit_visitor_locked(*, client: Client, trace: Any, limits: TurnLimits, now: Any) -> None:
    """Admit the turn with the visitor's row locked: created on first use, this turn's own
    allowance (a taken-over turn) and any dead worker's settled, the refusal worded."""
    plan = client.plan
    budget = plan.visitor_daily_token_budget
    refused = ""
    with transaction.atomic():
        usage = _locked_visitor_usage(client=client, day=periods.today(), visitor=limits.visitor)
        own, stale = held_for_turn(
            TurnAllowance.objects.for_client(client), trace=trace, now=now, visitor_usage=usage
        )
        for dead in stale:  # its worker died: count what it spent, free what it held
            _settle(usage, dead, trace_tokens(dead.trace))
        if own is not None and own.state == ReservationState.RESERVED:
            own.save(update_fields=["updated_at"])  # alive again: not stale
            limits.allowance = own
            _save(usage)
            return
        held = usage.tokens_used + usage.tokens_reserved
        limits.spent["visitor"] = held
        if held >= budget:
            refused = (
                f"visitor's daily token budget {budget:,} reached ({usage.tokens_used:,} "
                f"used, {usage.tokens_reserved:,} reserved by turns in progress)"
            )
        else:
            if (
                may_deliberate(limits.mode)
                and not limits.capped
                and held + turn_token_estimate(plan, limits.mode) > budget
            ):
                limits.capped = {"reason": "visitor_budget", "budget": budget, "used": held}
            mode = AIMode.ADAPTIVE if limits.capped else limits.mode
            estimate = turn_token_estimate(plan, mode)
            if own is None:
                own = TurnAllowance(client=client, trace=trace)
                usage.turns += 1
            own.visitor_usage, own.visitor = usage, limits.visitor
            own.state, own.tokens_reserved = ReservationState.RESERVED, estimate
            own.save()
            usage.tokens_reserved += estimate
            limits.allowance = own
        _save(usage)
    if refused:
        raise UsageLimitReached(VISITOR_TOKENS, refused)


def turn_limits_commit(*, client: Client, limits: TurnLimits, tokens: int) -> None:
    """After the turn (also when it failed): swap its hold on the visitor's day for the tokens
    it used (`tokens`: all its calls, an earlier attempt's included) and charge the widget's
    token windows (its conversation's and its address's). Idempotent for the budget."""
    charged = tokens
    allowance = limits.allowance
    if allowance is not None and allowance.visitor_usage_id is not None:
        # The allowance is settled first, in one conditional `UPDATE` while it is still as this
        # turn holds it, else with its row locked (a second commit of the turn finds it
        # settled); the visitor's row changes in one `UPDATE`, the transaction's last statement.
        with transaction.atomic():
            held, committed = allowance.tokens_reserved, allowance.tokens_committed
            if _settle_as_held(allowance, tokens):
                charged = max(0, tokens - committed)
            else:
                current = (
                    TurnAllowance.objects.select_for_update()
                    .filter(pk=allowance.pk, client_id=allowance.client_id)
                    .first()
                )
                if current is None or current.state != ReservationState.RESERVED:
                    return
                held = current.tokens_reserved
                charged = max(0, tokens - current.tokens_committed)
                _settle_allowance(current, tokens)
            settled = sql_rows(
                "billing.visitor_settle",
                _visitor_sql(
                    "UPDATE {days} SET tokens_reserved = CASE WHEN tokens_reserved > %s"
                    " THEN tokens_reserved - %s ELSE 0 END, tokens_used = tokens_used + %s,"
                    " updated_at = %s WHERE id = %s AND client_id = %s RETURNING id"
                ),
                [
                    held,
                    held,
                    charged,
                    connection.ops.adapt_datetimefield_value(timezone.now()),
                    allowance.visitor_usage_id,
                    allowance.client_id,
                ],
                client_id=allowance.client_id,
            )
            if not settled:
                return  # the visitor's day is gone (erased): nothing to count it on
    if limits.visitor:  # a widget conversation: the windows the widget checks
        token_window_charge(
            client_id=client.pk,
            conversation_id=limits.conversation_id,
            visitor=limits.visitor,
            tokens=charged,
        )


def _settle(usage: VisitorUsage, allowance: TurnAllowance, tokens: int) -> None:
    usage.tokens_reserved = max(0, usage.tokens_reserved - allowance.tokens_reserved)
    usage.tokens_used += max(0, tokens - allowance.tokens_committed)
    _settle_allowance(allowance, tokens)


def _settle_allowance(allowance: TurnAllowance, tokens: int) -> None:
    """Mark one allowance committed with what its turn used (its visitor's row: the caller's)."""
    allowance.tokens_committed = max(tokens, allowance.tokens_committed)
    allowance.tokens_reserved = 0
    allowance.state = ReservationState.COMMITTED
    allowance.save(update_fields=["state", "tokens_reserved", "tokens_committed", "updated_at"])


def _settle_as_held(allowance: TurnAllowance, tokens: int) -> bool:
    """`_settle_allowance` in one statement, only if the row is still exactly as this turn
    holds it (`HoldSettle`). Plain SQL, as every turn of a visitor runs it."""
    settle = HoldSettle(
        allowance,
        {
            "state": ReservationState.COMMITTED,
            "tokens_reserved": 0,
            "tokens_committed": max(tokens, allowance.tokens_committed),
        },
        held=("tokens_reserved", "tokens_committed"),
    )
    return settle.possible and settle.done(
        sql_rows(
            "billing.allowance_settle", settle.sql, settle.params, client_id=allowance.client_id
        )
    )


def _visitor_sql(statement: str) -> str:
    """`statement` with the visitor's day and allowance tables filled in."""
    return with_tables(statement, days=VisitorUsage, allowances=TurnAllowance)


def _save(usage: VisitorUsage) -> None:
    usage.save(update_fields=["tokens_used", "tokens_reserved", "turns", "updated_at"])
