"""Monthly budgets and usage alerts (OWASP LLM10: unbounded consumption).

A plan may cap each client's monthly tokens and monthly turns. Every turn of a budgeted client
goes through reserve → run → commit against one `UsageCounter` row per client and month:

* `turn_budget_reserve` refuses when used + reserved ≥ budget, otherwise holds an estimate of
  one turn (the plan's per-turn token cap, else `BILLING_TURN_TOKEN_RESERVE`) and one turn;
* `turn_budget_commit` (always called, also when the turn failed) swaps the estimate for the
  tokens the turn actually used.

Both change the row in one conditional `UPDATE`, the last statement of their transaction,
so the row is locked only from that statement to the commit: a shop whose hundred customers
write at once does not queue its turns behind one lock held across round trips. Concurrent turns
are still admitted one at a time against the same numbers, so together they can pass the budget
by at most one turn's usage — the turn admitted just under it. A turn taken over from a worker
that died, or one that finds another dead worker's reservation, takes the slow path, which locks
the row (`select_for_update`) while it settles them. Alerts at 80 % and 100 % are e-mailed to
the client's support address once per month each.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, connection, transaction
from django.db.models import Field, Model, Q, QuerySet
from django.utils import timezone

from apps.billing import periods
from apps.billing.models import (
    AlertMetric,
    ReservationState,
    TurnAllowance,
    UsageAlert,
    UsageCounter,
    UsageReservation,
)
from apps.billing.selectors import month_usage_totals
from apps.clients import modes
from apps.clients.models import Client, Plan
from apps.core.tenant_sql import sql_rows, with_tables

logger = logging.getLogger(__name__)

ALERT_THRESHOLDS = (80, 100)


class UsageLimitReached(Exception):
    """The client's monthly budget is used up: the turn must not call the model."""

    def __init__(self, metric: str, detail: str) -> None:
        super().__init__(detail)
        self.metric = metric
        self.detail = detail


def plan_is_budgeted(plan: Plan) -> bool:
    return bool(plan.monthly_token_budget or plan.monthly_turn_budget)


def turn_token_estimate(plan: Plan, mode: str | None = None) -> int:
    """What one turn is assumed to use until it has run: the reserve its mode declares
    (`Mode.token_reserve`: a deliberative turn makes many more calls than the others', it
    reserves `BILLING_DELIBERATIVE_TURN_TOKEN_RESERVE`). `mode`: the mode the turn runs in
    (default: the plan's; the per-visitor limits may run a deliberative plan's turn in adaptive
    mode). A mode no longer registered reserves a plain turn's tokens."""
    declared = modes.find(mode or plan.ai_mode)
    reserve = declared.token_reserve if declared is not None else modes.TokenReserve.TURN
    if reserve == modes.TokenReserve.DELIBERATIVE:
        return int(plan.per_turn_token_cap or settings.BILLING_DELIBERATIVE_TURN_TOKEN_RESERVE)
    return int(plan.per_turn_token_cap or settings.BILLING_TURN_TOKEN_RESERVE)


def held_for_turn[Held: (UsageReservation, TurnAllowance)](
    held: QuerySet[Held], *, trace: Any, now: Any, **holder: Any
) -> tuple[Held | None, list[Held]]:
    """Of the client's reservations (or allowances) `held`: the one `trace` holds (a turn taken
    over from a worker that died finds its own), and those of `holder` still reserved by a
    worker that died (untouched for `stale_after()`), to settle."""
    found = list(
        held.select_related("trace").filter(
            Q(trace=trace)
            | Q(**holder, state=ReservationState.RESERVED, updated_at__lt=now - stale_after())
        )
    )
    own = next((r for r in found if r.trace_id == trace.pk), None)
    return own, [r for r in found if r is not own]


def stale_after() -> timedelta:
    """A reservation not committed after this long belongs to a worker that died."""
    return timedelta(seconds=int(settings.BILLING_RESERVATION_STALE_SECONDS))


# ---------------------------------------------------------------------------------------------
# The counter
# ---------------------------------------------------------------------------------------------


def _locked_counter(*, client: Client, month: Any) -> UsageCounter:
    """This month's counter, locked until the end of the caller's transaction. Created on first
    use, seeded from the month's usage so far (a budget switched on mid-month counts it)."""
    counter = UsageCounter.objects.select_for_update().filter(client=client, month=month).first()
    if counter is not None:
        return counter
    totals = month_usage_totals(client=client, month=month)
    try:
        with transaction.atomic():
            UsageCounter.objects.create(
                client=client, month=month, tokens_used=totals.tokens, turns_used=totals.turns
            )
    except IntegrityError:
        pass  # another worker created it first; lock theirs
    return UsageCounter.objects.select_for_update().get(client=client, month=month)


def _refusal(plan: Plan, counter: UsageCounter) -> tuple[str, str] | None:
    """(metric, detail) when the budget leaves no room for another turn, else None."""
    budget, turn_budget = plan.monthly_token_budget, plan.monthly_turn_budget
    if budget and counter.tokens_used + counter.tokens_reserved >= budget:
        return AlertMetric.TOKENS, (
            f"monthly token budget {budget:,} reached ({counter.tokens_used:,} used, "
            f"{counter.tokens_reserved:,} reserved by turns in progress)"
        )
    if turn_budget and counter.turns_used + counter.turns_reserved >= turn_budget:
        return AlertMetric.TURNS, (
            f"monthly turn budget {turn_budget:,} reached ({counter.turns_used:,} used, "
            f"{counter.turns_reserved:,} in progress)"
        )
    return None


def turn_budget_reserve(*, client: Client, trace: Any) -> UsageReservation | None:
    """Admit one turn against the client's monthly budgets, or raise `UsageLimitReached`.

    Returns None for a plan without budgets (nothing to hold). A turn taken over from a worker
    that died finds its own reservation and is not counted twice."""
    plan = client.plan
    if not plan_is_budgeted(plan):
        return None
    month = periods.month_start(periods.today())
    now = timezone.now()
    own: UsageReservation | None = None
    stale: list[UsageReservation] = []
    if _anything_held(client=client, trace=trace, month=month, now=now):
        own, stale = held_for_turn(
            UsageReservation.objects.for_client(client), trace=trace, now=now, month=month
        )
    if not stale and (own is None or own.state != ReservationState.RESERVED):
        try:
            return _reserve_at_once(client=client, trace=trace, own=own, month=month)
        except IntegrityError:
            pass  # another worker took this turn over at the same moment: settle it locked
    return _reserve_locked(client=client, trace=trace, month=month, now=now)


class _Refused(Exception):
    """The conditional update found no room: roll the new reservation back."""


def _reserve_at_once(
    *, client: Client, trace: Any, own: UsageReservation | None, month: Any
) -> UsageReservation | None:
    """The common case (no reservation of this turn or of a dead worker to settle): insert the
    reservation, then add it to the counter in one conditional `UPDATE`, the transaction's last
    statement. Raises `UsageLimitReached` when the budget leaves no room."""
    plan = client.plan
    estimate = turn_token_estimate(plan, getattr(trace, "mode", None))
    for _ in range(2):  # a second time only after creating the month's counter
        try:
            with transaction.atomic():
                reservation = own or UsageReservation(client=client, trace=trace)
                reservation.month, reservation.state = month, ReservationState.RESERVED
                reservation.tokens_reserved = estimate
                reservation.save()
                if _counter_admit(client=client, month=month, plan=plan, tokens=estimate):
                    return reservation
                raise _Refused
        except _Refused:
            pass
        counter = UsageCounter.objects.for_client(client).filter(month=month).first()
        if counter is not None:
            refused = _refusal(plan, counter)
            if refused is not None:
                with transaction.atomic():
                    _alerts_fire(
                        client=client, counter=counter, thresholds=[100], refused_metric=refused[0]
                    )
                raise UsageLimitReached(*refused)
            continue  # a turn ended between the update and the read: try again
        with transaction.atomic():
            _locked_counter(client=client, month=month)  # creates it
    return _reserve_locked(client=client, trace=trace, month=month, now=timezone.now())


def _anything_held(*, client: Client, trace: Any, month: Any, now: Any) -> bool:
    """Whether `held_for_turn` would find anything: this turn's own reservation (a turn taken
    over) or a dead worker's. Almost every turn finds neither; this one plain statement tells
    it for a fifth of the ORM's CPU (docs/benchmarks.md), and only a hit reads the rows."""
    if getattr(trace, "pk", None) is None:
        return True  # no trace row to match on: let the ORM's query decide
    ops = connection.ops
    found = sql_rows(
        "billing.reservation_held",
        _sql(
            "SELECT 1 FROM {reservations} WHERE client_id = %s AND (trace_id = %s"
            " OR (month = %s AND state = %s AND updated_at < %s)) LIMIT 1"
        ),
        [
            client.pk,
            trace.pk,
            ops.adapt_datefield_value(month),
            ReservationState.RESERVED.value,
            ops.adapt_datetimefield_value(now - stale_after()),
        ],
        client_id=client.pk,
    )
    return bool(found)


def _counter_admit(*, client: Client, month: Any, plan: Plan, tokens: int) -> bool:
    """Add one turn and `tokens` to the reserved figures of the client's counter for `month`,
    only while the budgets leave room. False: no room, or no counter yet. Plain SQL: every
    budgeted turn runs it (docs/benchmarks.md)."""
    room, params = "", []
    if plan.monthly_token_budget:
        room += " AND tokens_used < %s - tokens_reserved"
        params.append(plan.monthly_token_budget)
    if plan.monthly_turn_budget:
        room += " AND turns_used < %s - turns_reserved"
        params.append(plan.monthly_turn_budget)
    admitted = sql_rows(
        "billing.counter_admit",
        _sql(
            "UPDATE {counters} SET tokens_reserved = tokens_reserved + %s,"
            " turns_reserved = turns_reserved + 1, updated_at = %s"
            " WHERE client_id = %s AND month = %s{room} RETURNING id",
            room=room,
        ),
        [
            tokens,
            connection.ops.adapt_datetimefield_value(timezone.now()),
            client.pk,
            connection.ops.adapt_datefield_value(month),
            *params,
        ],
        client_id=client.pk,
    )
    return len(admitted) == 1


def _reserve_locked(*, client: Client, trace: Any, month: Any, now: Any) -> UsageReservation | None:
    """Admit the turn with the month's counter locked while this turn's own reservation (a
    taken-over turn) and any dead worker's are settled."""
    plan = client.plan
    refused: tuple[str, str] | None = None
    with transaction.atomic():
        counter = _locked_counter(client=client, month=month)
        own, stale = held_for_turn(
            UsageReservation.objects.for_client(client), trace=trace, now=now, month=month
        )
        for dead in stale:  # its worker died: count what it spent, free what it held
            _settle(counter, dead, trace_tokens(dead.trace), _trace_calls(dead.trace))
        if own is not None and own.state == ReservationState.RESERVED:
            if own.month == counter.month:
                own.save(update_fields=["updated_at"])  # alive again: not stale
                _save_counter(counter)
                return own
            # held on last month's counter: settle there, hold afresh on this month's
            _commit_elsewhere(own)
        refused = _refusal(plan, counter)
        if refused is None:
            estimate = turn_token_estimate(plan, getattr(trace, "mode", None))
            if own is None:
                own = UsageReservation(client=client, trace=trace)
            own.month, own.state, own.tokens_reserved = month, ReservationState.RESERVED, estimate
            own.save()
            counter.tokens_reserved += estimate
            counter.turns_reserved += 1
        else:
            _alerts_fire(
                client=client, counter=counter, thresholds=[100], refused_metric=refused[0]
            )
        _save_counter(counter)
    if refused is not None:
        raise UsageLimitReached(*refused)
    return own


def turn_budget_commit(
    *, client: Client, reservation: UsageReservation, tokens: int, llm_calls: int
) -> UsageReservation:
    """Replace the turn's estimate with what it used (`tokens` over all its calls, including
    any earlier attempt of a taken-over turn). Idempotent: committing twice changes nothing.

    The common case, a reservation still as this turn holds it, is marked committed in one
    conditional `UPDATE`; otherwise (another worker settled or took it over) its row is locked
    and read first, and a commit that finds it committed changes nothing. The counter changes
    in one `UPDATE`, the transaction's last statement."""
    with transaction.atomic():
        held, committed, counted = (
            reservation.tokens_reserved,
            reservation.tokens_committed,
            reservation.turn_counted,
        )
        current = reservation
        if not _settle_as_held(client, reservation, tokens, llm_calls):
            locked = (
                UsageReservation.objects.for_client(client)
                .select_for_update()
                .filter(pk=reservation.pk)
                .first()
            )
            if locked is None or locked.state != ReservationState.RESERVED:
                return locked or reservation
            current = locked
            held, committed, counted = (
                current.tokens_reserved,
                current.tokens_committed,
                current.turn_counted,
            )
            _settle_reservation(current, tokens, llm_calls)
        used, turn = max(0, tokens - committed), current.turn_counted and not counted
        figures = _counter_settle(
            client=client, month=current.month, held=held, used=used, turn=turn
        )
        if figures is None:
            _locked_counter(client=client, month=current.month)  # gone: a new one, seeded
            figures = _counter_settle(
                client=client, month=current.month, held=held, used=used, turn=turn
            )
    # Alerts are judged by the figures this commit left (each threshold fires once: its key).
    if figures is not None:
        tokens_used, turns_used = figures
        counter = UsageCounter(
            client=client, month=current.month, tokens_used=tokens_used, turns_used=turns_used
        )
        with transaction.atomic():
            _alerts_check(client=client, counter=counter)
    return current


def _counter_settle(
    *, client: Client, month: Any, held: int, used: int, turn: bool
) -> tuple[int, int] | None:
    """Move one turn's hold (`held` tokens and the turn) from reserved to used (`used` tokens;
    the turn itself when `turn`) on the month's counter, in one statement; the counter's tokens
    and turns used after it (the alerts' figures, without reading the row again). None: there
    is no counter. Plain SQL: every budgeted turn runs it, and the ORM's update cannot return."""
    rows = sql_rows(
        "billing.counter_settle",
        _sql(
            "UPDATE {counters} SET tokens_reserved = CASE WHEN tokens_reserved > %s"
            " THEN tokens_reserved - %s ELSE 0 END,"
            " turns_reserved = CASE WHEN turns_reserved > 0 THEN turns_reserved - 1 ELSE 0 END,"
            " tokens_used = tokens_used + %s, turns_used = turns_used + %s, updated_at = %s"
            " WHERE client_id = %s AND month = %s RETURNING tokens_used, turns_used"
        ),
        [
            held,
            held,
            used,
            int(turn),
            connection.ops.adapt_datetimefield_value(timezone.now()),
            client.pk,
            connection.ops.adapt_datefield_value(month),
        ],
        client_id=client.pk,
    )
    return (int(rows[0][0]), int(rows[0][1])) if rows else None


def _sql(statement: str, **parts: str) -> str:
    """`statement` with this module's tables filled in (and `parts`: conditions written here)."""
    return with_tables(statement, counters=UsageCounter, reservations=UsageReservation, **parts)


def usage_budget_check(*, client: Client) -> None:
    """Admit one LLM call made outside a customer turn (a playground run, a batch job), or raise
    `UsageLimitReached` when the month's token budget is used up (together with what running
    turns hold). Turn budgets count customer turns only and do not apply."""
    plan = client.plan
    if not plan.monthly_token_budget:
        return
    month = periods.month_start(periods.today())
    refused: tuple[str, str] | None = None
    with transaction.atomic():
        counter = _locked_counter(client=client, month=month)
        if counter.tokens_used + counter.tokens_reserved >= plan.monthly_token_budget:
            refused = _refusal(plan, counter)
            assert refused is not None
            _alerts_fire(
                client=client, counter=counter, thresholds=[100], refused_metric=refused[0]
            )
    if refused is not None:
        raise UsageLimitReached(*refused)


def usage_budget_add(*, client: Client, tokens: int) -> None:
    """Count the tokens of one LLM call made outside a customer turn on the month's counter
    (a turn counts its tokens when it commits its reservation)."""
    if not plan_is_budgeted(client.plan) or tokens <= 0:
        return
    month = periods.month_start(periods.today())
    with transaction.atomic():
        counter = _locked_counter(client=client, month=month)
        counter.tokens_used += tokens
        _save_counter(counter)
        _alerts_check(client=client, counter=counter)


def _settle(counter: UsageCounter, reservation: UsageReservation, tokens: int, calls: int) -> None:
    """Move one reservation from `reserved` to `used` on `counter` (already locked)."""
    counter.tokens_reserved = max(0, counter.tokens_reserved - reservation.tokens_reserved)
    counter.turns_reserved = max(0, counter.turns_reserved - 1)
    counter.tokens_used += max(0, tokens - reservation.tokens_committed)
    if calls and not reservation.turn_counted:
        counter.turns_used += 1
    _settle_reservation(reservation, tokens, calls)


def _settle_as_held(client: Client, reservation: UsageReservation, tokens: int, calls: int) -> bool:
    """`_settle_reservation` in one statement, only if the row is still exactly as this turn
    holds it (`HoldSettle`). Plain SQL, as every budgeted turn runs it."""
    settled = _settled_fields(reservation, tokens, calls)
    settle = HoldSettle(
        reservation,
        {**settled, "updated_at": settled["committed_at"]},
        held=("tokens_reserved", "tokens_committed", "turn_counted"),
    )
    return (
        settle.possible
        and reservation.client_id == client.pk
        and settle.done(
            sql_rows("billing.reservation_settle", settle.sql, settle.params, client_id=client.pk)
        )
    )


class HoldSettle:
    """One conditional `UPDATE` that writes `settled` (field → value) to a turn's hold — its
    month's reservation or its visitor's allowance — only while the row is still exactly as the
    turn holds it: reserved, each `held` field as `hold` has it. The caller runs `sql` with
    `params` under its reviewed site when the hold is `possible`, and `done(rows)` says whether
    it was written (`hold` then has the values too). Not written: settled as a dead worker's,
    taken over or gone, and nothing changed; the caller takes the locked path."""

    def __init__(
        self,
        hold: UsageReservation | TurnAllowance,
        settled: dict[str, Any],
        *,
        held: tuple[str, ...],
    ) -> None:
        self.hold = hold
        self.values = {"updated_at": timezone.now(), **settled}
        self.possible = hold.pk is not None and hold.state == ReservationState.RESERVED
        qn = connection.ops.quote_name
        self.sql = with_tables(
            "UPDATE {table} SET {sets} WHERE id = %s AND client_id = %s AND state = %s{same}"
            " RETURNING id",
            table=type(hold),
            sets=", ".join(f"{qn(name)} = %s" for name in self.values),
            same="".join(f" AND {qn(name)} = %s" for name in held),
        )
        self.params = [
            *(_db_value(hold, name, value) for name, value in self.values.items()),
            hold.pk,
            hold.client_id,
            ReservationState.RESERVED.value,
            *(_db_value(hold, name, getattr(hold, name)) for name in held),
        ]

    def done(self, rows: list[tuple[Any, ...]]) -> bool:
        if len(rows) != 1:
            return False
        for name, value in self.values.items():
            setattr(self.hold, name, value)
        return True


def _db_value(row: Model, name: str, value: Any) -> Any:
    field = type(row)._meta.get_field(name)
    assert isinstance(field, Field)
    return field.get_db_prep_save(value, connection)


def _settle_reservation(reservation: UsageReservation, tokens: int, calls: int) -> None:
    """Mark one reservation committed with what its turn used (its counter is the caller's)."""
    settled = _settled_fields(reservation, tokens, calls)
    for name, value in settled.items():
        setattr(reservation, name, value)
    reservation.save(update_fields=[*settled, "updated_at"])


def _settled_fields(reservation: UsageReservation, tokens: int, calls: int) -> dict[str, Any]:
    """What a committed reservation holds: its turn counted once it made a call, the most
    tokens any attempt of the turn used, nothing reserved."""
    return {
        "state": ReservationState.COMMITTED,
        "tokens_reserved": 0,
        "tokens_committed": max(tokens, reservation.tokens_committed),
        "turn_counted": reservation.turn_counted or bool(calls),
        "committed_at": timezone.now(),
    }


def _commit_elsewhere(reservation: UsageReservation) -> None:
    with transaction.atomic():
        other = _locked_counter(client=reservation.client, month=reservation.month)
        _settle(
            other, reservation, trace_tokens(reservation.trace), _trace_calls(reservation.trace)
        )
        _save_counter(other)


def trace_tokens(trace: Any) -> int:
    return int(trace.prompt_tokens + trace.completion_tokens) if trace is not None else 0


def _trace_calls(trace: Any) -> int:
    return int(trace.llm_calls) if trace is not None else 0


def _save_counter(counter: UsageCounter) -> None:
    counter.save(
        update_fields=[
            "tokens_used",
            "turns_used",
            "tokens_reserved",
            "turns_reserved",
            "updated_at",
        ]
    )


@transaction.atomic
def usage_counter_reconcile(*, client: Client, month: Any) -> UsageCounter:
    """Recount `*_used` from the usage records and turns of the month (turns still running are
    left to their own commit). Repairs a counter that missed turns, e.g. while the plan had no
    budget; safe to run at any time."""
    counter = _locked_counter(client=client, month=month)
    totals = month_usage_totals(client=client, month=month, exclude_running=True)
    counter.tokens_used, counter.turns_used = totals.tokens, totals.turns
    _save_counter(counter)
    return counter


# ---------------------------------------------------------------------------------------------
# Alerts
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Level:
    metric: str
    used: int
    budget: int

    @property
    def percent(self) -> float:
        return 100.0 * self.used / self.budget


def _levels(plan: Plan, counter: UsageCounter) -> list[_Level]:
    levels = []
    if plan.monthly_token_budget:
        levels.append(_Level(AlertMetric.TOKENS, counter.tokens_used, plan.monthly_token_budget))
    if plan.monthly_turn_budget:
        levels.append(_Level(AlertMetric.TURNS, counter.turns_used, plan.monthly_turn_budget))
    return levels


def _alerts_check(*, client: Client, counter: UsageCounter) -> None:
    """Fire the thresholds the month's usage has crossed (no query below the first one)."""
    levels = _levels(client.plan, counter)
    top = max((level.percent for level in levels), default=0.0)
    crossed = [t for t in ALERT_THRESHOLDS if top >= t]
    if crossed:
        _alerts_fire(client=client, counter=counter, thresholds=crossed)


def _alerts_fire(
    *,
    client: Client,
    counter: UsageCounter,
    thresholds: list[int],
    refused_metric: str | None = None,
) -> None:
    """Store each threshold not yet fired this month and e-mail the highest new one once the
    transaction commits. Two turns crossing a threshold at the same moment both try; the unique
    key lets one of them store (and mail) it."""
    fired = set(
        UsageAlert.objects.for_client(client)
        .filter(month=counter.month, threshold__in=thresholds)
        .values_list("threshold", flat=True)
    )
    new = [t for t in thresholds if t not in fired]
    if not new:
        return
    levels = _levels(client.plan, counter)
    alerts = []
    for threshold in new:
        level = max(levels, key=lambda lv: lv.percent)
        if refused_metric is not None:
            level = next(lv for lv in levels if lv.metric == refused_metric)
        try:
            with transaction.atomic():
                alerts.append(
                    UsageAlert.objects.create(
                        client=client,
                        month=counter.month,
                        threshold=threshold,
                        metric=level.metric,
                        used=level.used,
                        budget=level.budget,
                        emailed_to=client.support_email,
                    )
                )
        except IntegrityError:
            continue  # another turn fired it first
    if not alerts:
        return
    top = alerts[-1].pk
    client_id = client.pk
    transaction.on_commit(lambda: usage_alert_notify(alert_id=top, client_id=client_id))


def usage_alert_notify(*, alert_id: int, client_id: int) -> None:
    """E-mail one alert to the client's support address. Failure to send is logged, never
    raised: the alert is stored (and shown in the admin) either way."""
    alert = (
        UsageAlert.objects.select_related("client", "client__plan")
        .filter(pk=alert_id, client_id=client_id, emailed_at__isnull=True)
        .first()
    )
    if alert is None or not alert.client.support_email:
        return
    subject, body = usage_alert_text(alert)
    try:
        send_mail(
            subject=subject,
            message=body,
            from_email=settings.DEFAULT_FROM_EMAIL,
            recipient_list=[alert.client.support_email],
        )
    except Exception:
        logger.exception("usage alert e-mail failed", extra={"alert": alert_id})
        return
    # One mail covers every threshold this turn crossed (80 % and 100 % at once).
    UsageAlert.objects.filter(
        client=alert.client,
        month=alert.month,
        threshold__lte=alert.threshold,
        emailed_at__isnull=True,
    ).update(emailed_at=timezone.now(), emailed_to=alert.client.support_email)


def usage_alert_text(alert: UsageAlert) -> tuple[str, str]:
    client, month = alert.client, f"{alert.month:%B %Y}"
    unit = "tokens" if alert.metric == AlertMetric.TOKENS else "customer turns"
    what = alert.get_metric_display().lower()
    figures = f"{alert.used:,} of {alert.budget:,} {unit}"
    if alert.threshold >= 100:
        subject = f"[GuideDesk] {client.name}: monthly usage limit reached"
        lines = [
            f"{client.name} has reached its {what} for {month} ({figures}).",
            "",
            "Until the month ends, the assistant makes no more AI calls: each new customer "
            "message is answered with a short notice and handed to your team in the escalation "
            "queue (reason: usage limit).",
            "",
            "To restore the assistant sooner, ask us to raise the budget or change your plan.",
        ]
    else:
        subject = f"[GuideDesk] {client.name}: {alert.threshold}% of the monthly usage budget"
        lines = [
            f"{client.name} has used {alert.threshold}% of its {what} for {month} ({figures}).",
            "",
            "At 100% the assistant stops answering and hands new messages to your team. "
            "You can follow usage in the GuideDesk admin (Billing → usage by client) or via "
            "GET /api/v1/billing/usage/.",
        ]
    return subject, "\n".join(lines)


def usage_counters_reconcile(*, month: Any | None = None) -> int:
    """Reconcile every counter of `month` (default: this month); returns how many."""
    month = month or periods.month_start(periods.today())
    counters = (
        UsageCounter.objects.unscoped("reconciles every client's counters")
        .filter(month=month)
        .select_related("client", "client__plan")
    )
    count = 0
    for counter in counters:
        usage_counter_reconcile(client=counter.client, month=month)
        count += 1
    return count
