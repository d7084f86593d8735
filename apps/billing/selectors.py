"""Read side of billing: usage cells (the one aggregation both rollups and reports are built
from), usage reports, invoices and month totals for budgets.

Attribution rule, used everywhere: a turn (one ReasoningTrace with at least one LLM call, i.e.
at least one usage record) and all of its calls count on the day — and in the month — the turn
started. A usage record with no turn (a call made outside a customer turn, or whose turn no
longer exists) counts at its own time. Days are in settings.TIME_ZONE.

Billing sits below the reasoning layer (docs/architecture.md): it reads turns only through its
own usage records' `trace` relation, never by importing the reasoning app. The per-turn list is
`apps.reasoning.selectors.turn_usage_list`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import date, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.db.models import Case, CharField, Count, DecimalField, F, Q, QuerySet, Sum, Value, When
from django.db.models.functions import Coalesce, TruncDate
from django.utils import timezone

from apps.billing import periods
from apps.billing.models import (
    DailyUsage,
    ReservationState,
    RollupGrain,
    SimulationUsageCounter,
    UsageAlert,
    UsageCounter,
    UsagePurpose,
    UsageRecord,
    UsageRollupDay,
)
from apps.billing.services.usage import model_price, money
from apps.clients.models import Client

ZERO = Decimal("0")
CENTS = Decimal("0.01")
GROUP_BYS = ("mode", "day", "model", "step", "purpose")
# What the evaluation layer made of a turn's answer (ReasoningTrace.evaluation_outcome; the
# reasoning app's `evaluation.OUTCOMES` — billing reads it through the trace relation only).
EVALUATION_OUTCOMES = ("validated", "questioned", "improved", "kept", "failed")
EVALUATION_FIELDS = tuple(f"evaluation_{outcome}" for outcome in EVALUATION_OUTCOMES)
# Why a "deliberate when needed" turn deliberated (ReasoningTrace.deliberation_trigger; the
# reasoning app's `modes.as_needed.TRIGGERS` — read through the trace relation only).
DELIBERATION_TRIGGERS = (
    "low_confidence",
    "complaint",
    "critique_escalate",
    "evaluation_questioned",
)
DELIBERATION_FIELDS = tuple(f"deliberated_{trigger}" for trigger in DELIBERATION_TRIGGERS)
MAX_REPORT_DAYS = 366
_MONEY = DecimalField(max_digits=20, decimal_places=8)
UNKNOWN = "unknown"  # model or step of a record that has none (keeps grains apart)
# The line simulations' calls are reported on, in place of the mode their sandboxed turns ran:
# a simulation's deliberative calls are not customers' deliberative turns (reports, the usage
# page, rollups and invoices all read records through `_line()`).
SIMULATION_LINE = "simulation"
# A turn's calls are made within the task time limit; records are looked up by their own
# (indexed) created_at up to this long after the last day of a range.
_RECORD_SLACK = timedelta(days=1)


# ---------------------------------------------------------------------------------------------
# Cells
# ---------------------------------------------------------------------------------------------


@dataclass
class UsageCounts:
    """The figures a usage cell and a report line both hold (`TURN_FIGURES`, `CALL_FIGURES`)."""

    turns: int = 0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: Decimal = ZERO
    billed_usd: Decimal = ZERO
    critique_triggered: int = 0
    evaluation_validated: int = 0
    evaluation_questioned: int = 0
    evaluation_improved: int = 0
    evaluation_kept: int = 0
    evaluation_failed: int = 0
    cached_tokens: int = 0
    deliberated_low_confidence: int = 0
    deliberated_complaint: int = 0
    deliberated_critique_escalate: int = 0
    deliberated_evaluation_questioned: int = 0


@dataclass(kw_only=True)
class UsageCell(UsageCounts):
    """One DailyUsage row, persisted or computed from raw records. Never changed once made
    (adding cells makes a new one, `_add`)."""

    client_id: int
    day: date
    grain: str
    mode: str
    model: str = ""
    step: str = ""

    @property
    def key(self) -> tuple[int, date, str, str, str, str]:
        return (self.client_id, self.day, self.grain, self.mode, self.model, self.step)


def model_context_tokens(model: str) -> int | None:
    """The context window (tokens) the model prices table gives `model`, or None. Read once a
    minute at most (the LLM gateway asks before every call); saving a price forgets it."""
    price = model_price(model)
    return (price.context_tokens or None) if price is not None else None


def _usd(value: Any) -> Decimal:
    """A summed amount at the 8 places money is stored with (SQLite sums decimals as floats;
    on PostgreSQL this changes nothing)."""
    return money(Decimal(value or 0))


def _turn_start() -> Coalesce:
    return Coalesce(F("trace__created_at"), F("created_at"))


def _line() -> Case:
    """The record's line in reports: its mode, or `simulation` for a simulation's call."""
    return Case(
        When(purpose=UsagePurpose.SIMULATION, then=Value(SIMULATION_LINE)),
        default=F("mode"),
        output_field=CharField(),
    )


def records_started_between(
    *, client: Client | None, first: date, last: date
) -> QuerySet[UsageRecord]:
    """Usage records of turns that started on `first` … `last` (both included)."""
    start, stop = periods.day_start(first), periods.day_start(last + timedelta(days=1))
    records = (
        UsageRecord.objects.unscoped("every client's usage: the daily rollup")
        if client is None
        else UsageRecord.objects.for_client(client)
    )
    return (
        records.filter(created_at__gte=start, created_at__lt=stop + _RECORD_SLACK)
        .annotate(turn_start=_turn_start())
        .filter(turn_start__gte=start, turn_start__lt=stop)
    )


def turns_started_count(*, client: Client | None, first: date, last: date) -> int:
    """How many turns (traces with at least one usage record) started on `first` … `last`."""
    return (
        records_started_between(client=client, first=first, last=last)
        .filter(trace__isnull=False)
        .values("trace")
        .distinct()
        .count()
    )


def _turn_counts() -> dict[str, Count]:
    """Distinct turns, turns with a critique and turns per evaluation outcome."""
    counts = {
        "turns": Count("trace", distinct=True),
        "critique": Count("trace", distinct=True, filter=Q(trace__critique_triggered=True)),
    }
    for outcome, name in zip(EVALUATION_OUTCOMES, EVALUATION_FIELDS, strict=True):
        counts[name] = Count("trace", distinct=True, filter=Q(trace__evaluation_outcome=outcome))
    for trigger, name in zip(DELIBERATION_TRIGGERS, DELIBERATION_FIELDS, strict=True):
        counts[name] = Count("trace", distinct=True, filter=Q(trace__deliberation_trigger=trigger))
    return counts


# The per-turn counts every cell carries besides `turns` and `critique_triggered`.
TURN_COUNT_FIELDS = EVALUATION_FIELDS + DELIBERATION_FIELDS
# What the turns counted: a TURNS or MODEL cell's figures (a CALLS cell's too).
TURN_FIGURES = ("turns", "critique_triggered", *TURN_COUNT_FIELDS)
# What the calls used: a CALLS cell's figures (zero in the other grains).
CALL_FIGURES = (
    "llm_calls",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "cost_usd",
    "billed_usd",
)
# A cell (UsageCell, or a DailyUsage row): its key, then the figures adding cells adds up.
CELL_FIELDS = ("client_id", "day", "grain", "mode", "model", "step", *TURN_FIGURES, *CALL_FIGURES)


def _turn_figures(row: dict[str, Any]) -> dict[str, Any]:
    """A grouped row's `_turn_counts()`, as a cell holds them: turns, critiques, and the
    evaluation and deliberation counts."""
    return {
        "turns": row["turns"],
        "critique_triggered": row["critique"],
        **{name: row[name] for name in TURN_COUNT_FIELDS},
    }


def _call_sums() -> dict[str, Count | Sum]:
    """Calls, tokens and amounts of grouped usage records (read back by `_call_figures`)."""
    return {
        "llm_calls": Count("id"),
        "prompt_tokens": Sum("prompt_tokens"),
        "completion_tokens": Sum("completion_tokens"),
        "cached_tokens": Sum("cached_tokens"),
        "cost_usd": Sum("cost_usd"),
        "billed_usd": Sum("billed_usd"),
    }


def _call_figures(row: dict[str, Any]) -> dict[str, Any]:
    """A grouped row's `_call_sums()`, as a cell holds them (an empty group sums to None)."""
    return {
        "llm_calls": row["llm_calls"],
        "prompt_tokens": row["prompt_tokens"] or 0,
        "completion_tokens": row["completion_tokens"] or 0,
        "cached_tokens": row["cached_tokens"] or 0,
        "cost_usd": _usd(row["cost_usd"]),
        "billed_usd": _usd(row["billed_usd"]),
    }


def _rows(values: Any) -> Iterator[dict[str, Any]]:
    """A grouped `.values()` queryset's rows (their keys come from `_turn_counts()`, which
    django-stubs cannot see)."""
    yield from values


def usage_cells_raw(*, client: Client | None, first: date, last: date) -> list[UsageCell]:
    """Every grain's cells for the days `first` … `last`, computed from traces and usage
    records (three grouped queries). `client=None` computes them for every client."""
    cells: list[UsageCell] = []
    traces = (
        records_started_between(client=client, first=first, last=last)
        .filter(trace__isnull=False)
        .annotate(day=TruncDate("trace__created_at"), turn_mode=F("trace__mode"))
        .values("client_id", "day", "turn_mode")
        .annotate(**_turn_counts())
        .order_by()
    )
    cells.extend(
        _grouped_cell(row, grain=RollupGrain.TURNS, mode=row["turn_mode"]) for row in _rows(traces)
    )
    records = records_started_between(client=client, first=first, last=last).annotate(
        day=TruncDate("turn_start"), line=_line()
    )
    per_model = (
        records.values("client_id", "day", "line", "model").annotate(**_turn_counts()).order_by()
    )
    cells.extend(
        _grouped_cell(row, grain=RollupGrain.MODEL, mode=row["line"], model=row["model"] or UNKNOWN)
        for row in _rows(per_model)
    )
    per_step = (
        records.values("client_id", "day", "line", "model", "step")
        .annotate(
            **_turn_counts(),
            **_call_sums(),
        )
        .order_by()
    )
    cells.extend(
        _grouped_cell(
            row,
            grain=RollupGrain.CALLS,
            mode=row["line"],
            model=row["model"] or UNKNOWN,
            step=row["step"] or UNKNOWN,
            **_call_figures(row),
        )
        for row in _rows(per_step)
    )
    return _merge(cells)


def _grouped_cell(row: dict[str, Any], *, grain: str, mode: str, **fields: Any) -> UsageCell:
    """The cell of one row of `usage_cells_raw`'s grouped queries: the row's client, day and
    turn counts, under `grain` and `mode`, with the grain's own `fields`."""
    return UsageCell(
        client_id=row["client_id"],
        day=row["day"],
        grain=grain,
        mode=mode,
        **_turn_figures(row),
        **fields,
    )


def _merge(cells: Iterable[UsageCell]) -> list[UsageCell]:
    """Cells with the same key added up (records of an unnamed model/step land on UNKNOWN)."""
    merged: dict[tuple[Any, ...], UsageCell] = {}
    for cell in cells:
        seen = merged.get(cell.key)
        merged[cell.key] = cell if seen is None else _add(seen, cell)
    return sorted(merged.values(), key=lambda c: c.key)


def _add(a: UsageCell, b: UsageCell) -> UsageCell:
    return replace(
        a, **{name: getattr(a, name) + getattr(b, name) for name in TURN_FIGURES + CALL_FIGURES}
    )


def _cell_from_row(row: DailyUsage) -> UsageCell:
    return UsageCell(**{name: getattr(row, name) for name in CELL_FIELDS})


def usage_cells(*, client: Client, first: date, last: date) -> list[UsageCell]:
    """The client's cells for `first` … `last`: rollups for rolled-up (closed) days, raw usage
    for today and any closed day not rolled up yet."""
    rolled = set(
        UsageRollupDay.objects.filter(day__gte=first, day__lte=last).values_list("day", flat=True)
    )
    cells: list[UsageCell] = []
    if rolled:
        rows = DailyUsage.objects.for_client(client).filter(day__gte=first, day__lte=last)
        cells.extend(_cell_from_row(row) for row in rows if row.day in rolled)
    raw_days = [day for day in periods.days(first, last) if day not in rolled]
    for run_first, run_last in periods.day_runs(raw_days):
        cells.extend(usage_cells_raw(client=client, first=run_first, last=run_last))
    return cells


# ---------------------------------------------------------------------------------------------
# Reports
# ---------------------------------------------------------------------------------------------


def _share(part: int, whole: int) -> Decimal | None:
    """`part / whole` to four places (None when `whole` is 0)."""
    if not whole:
        return None
    return (Decimal(part) / Decimal(whole)).quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP)


def _percent(share: Decimal | None) -> Decimal | None:
    """A share (`_share`) in percent, to one place."""
    return None if share is None else (share * 100).quantize(Decimal("0.1"))


@dataclass
class UsageFigures(UsageCounts):
    """A report line's figures: cells added up, and the rates read from them."""

    @property
    def evaluations(self) -> int:
        """Turns whose answer the evaluation layer checked (every outcome)."""
        return sum(getattr(self, name) for name in EVALUATION_FIELDS)

    @property
    def deliberated(self) -> int:
        """ "Deliberate when needed" turns that deliberated (every reason)."""
        return sum(getattr(self, name) for name in DELIBERATION_FIELDS)

    @property
    def deliberation_reasons(self) -> dict[str, int]:
        """How many turns deliberated, by why (every trigger, 0 included)."""
        return {
            trigger: getattr(self, name)
            for trigger, name in zip(DELIBERATION_TRIGGERS, DELIBERATION_FIELDS, strict=True)
        }

    @property
    def cached_share(self) -> Decimal | None:
        """Of the prompt tokens, the share the provider served from its prompt cache (None
        without prompt tokens)."""
        return _share(self.cached_tokens, self.prompt_tokens)

    @property
    def cached_percent(self) -> Decimal | None:
        return _percent(self.cached_share)

    @property
    def deliberated_percent(self) -> Decimal | None:
        """Of the turns, the share that deliberated, in percent (None without turns)."""
        if not self.turns:
            return None
        return (Decimal(100 * self.deliberated) / Decimal(self.turns)).quantize(
            Decimal("0.1"), rounding=ROUND_HALF_UP
        )

    @property
    def critique_rate(self) -> Decimal | None:
        """How often critique triggers: critique_triggered / turns (None without turns)."""
        return _share(self.critique_triggered, self.turns)

    @property
    def critique_percent(self) -> Decimal | None:
        return _percent(self.critique_rate)

    def add_calls(self, cell: UsageCell) -> None:
        self._accumulate(cell, CALL_FIGURES)

    def add_turns(self, cell: UsageCell) -> None:
        self._accumulate(cell, TURN_FIGURES)

    def _accumulate(self, cell: UsageCell, names: tuple[str, ...]) -> None:
        for name in names:
            setattr(self, name, getattr(self, name) + getattr(cell, name))


@dataclass
class UsageGroup(UsageFigures):
    key: str = ""


@dataclass
class UsageReport:
    client: Client
    start: date
    end: date
    group_by: str
    totals: UsageFigures = field(default_factory=UsageFigures)
    groups: list[UsageGroup] = field(default_factory=list)
    # Of the totals, what simulations' calls used (whatever the grouping; with group_by=mode
    # they are also the `simulation` group, never in a mode's row).
    simulations: UsageFigures = field(default_factory=UsageFigures)


# Which grain holds the turn counts of each grouping (money always comes from CALLS).
_TURN_GRAIN = {
    "mode": RollupGrain.TURNS,
    "day": RollupGrain.TURNS,
    "model": RollupGrain.MODEL,
    "step": RollupGrain.CALLS,
}


def _group_key(cell: UsageCell, group_by: str) -> str:
    if group_by == "day":
        return cell.day.isoformat()
    return str(getattr(cell, group_by))


def usage_report(*, client: Client, start: date, end: date, group_by: str) -> UsageReport:
    """Turns, calls, tokens, cost, billed amount and critique rate of `client` from `start` to
    `end` (both included), grouped by mode, day, model or step.

    Totals count each turn once; with group_by=model or step, a group's turns are the distinct
    turns with a call in that group, so those groups' turns may add up to more than the total.
    """
    if group_by not in GROUP_BYS:
        raise ValueError(f"group_by must be one of {', '.join(GROUP_BYS)}")
    cells = usage_cells(client=client, first=start, last=end)
    if group_by == "purpose":
        report = _report(client=client, start=start, end=end, group_by="mode", cells=cells)
        report.group_by = group_by
        report.groups = _purpose_groups(client=client, first=start, last=end)
        return report
    return _report(client=client, start=start, end=end, group_by=group_by, cells=cells)


def _purpose_groups(*, client: Client, first: date, last: date) -> list[UsageGroup]:
    """One group per purpose (`turn`, `playground`, `simulation`, `insights`, `benchmark`):
    what customers' turns cost apart from what staff's tests and batch jobs did. Computed from
    the usage records themselves (the daily rollups keep no purpose). Only customer turns have
    turns; the groups' calls, tokens and amounts add up to the totals."""
    rows = (
        records_started_between(client=client, first=first, last=last)
        .values("purpose")
        .annotate(
            **_turn_counts(),
            **_call_sums(),
        )
        .order_by("purpose")
    )
    groups: list[UsageGroup] = []
    for row in _rows(rows):
        group = UsageGroup(key=str(row["purpose"]))
        # A CALLS cell holds the turns' figures too: one cell gives the group both.
        cell = UsageCell(
            client_id=client.pk,
            day=first,
            grain=RollupGrain.CALLS,
            mode="",
            **_turn_figures(row),
            **_call_figures(row),
        )
        group.add_calls(cell)
        group.add_turns(cell)
        groups.append(group)
    return groups


def _report(
    *, client: Client, start: date, end: date, group_by: str, cells: list[UsageCell]
) -> UsageReport:
    report = UsageReport(client=client, start=start, end=end, group_by=group_by)
    groups: dict[str, UsageGroup] = defaultdict(UsageGroup)
    for cell in cells:
        if cell.grain == RollupGrain.CALLS:
            report.totals.add_calls(cell)
            groups[_group_key(cell, group_by)].add_calls(cell)
            if cell.mode == SIMULATION_LINE:
                report.simulations.add_calls(cell)
        if cell.grain == RollupGrain.TURNS:
            report.totals.add_turns(cell)
        if cell.grain == _TURN_GRAIN[group_by]:
            groups[_group_key(cell, group_by)].add_turns(cell)
    for key in sorted(groups):
        groups[key].key = key
        report.groups.append(groups[key])
    return report


def _daily_by_mode(
    *, start: date, end: date, cells: list[UsageCell]
) -> dict[date, dict[str, UsageFigures]]:
    table: dict[date, dict[str, UsageFigures]] = {day: {} for day in periods.days(start, end)}
    for cell in cells:
        if cell.grain == RollupGrain.CALLS:
            table[cell.day].setdefault(cell.mode, UsageFigures()).add_calls(cell)
        elif cell.grain == RollupGrain.TURNS:
            table[cell.day].setdefault(cell.mode, UsageFigures()).add_turns(cell)
    return table


@dataclass
class UsageOverview:
    """What the admin's usage page shows for one client."""

    report: UsageReport  # grouped by mode
    daily: dict[date, dict[str, UsageFigures]]  # every day of the range, by mode
    counter: UsageCounter | None  # this month's budget counter (None: no budgeted turn yet)
    alerts: list[UsageAlert]  # alerts fired this month
    simulation_budget: SimulationBudget  # simulations' own budget this month


def usage_overview(*, client: Client, start: date, end: date) -> UsageOverview:
    cells = usage_cells(client=client, first=start, last=end)
    month = periods.month_start(periods.today())
    return UsageOverview(
        report=_report(client=client, start=start, end=end, group_by="mode", cells=cells),
        daily=_daily_by_mode(start=start, end=end, cells=cells),
        counter=UsageCounter.objects.for_client(client).filter(month=month).first(),
        alerts=list(
            UsageAlert.objects.for_client(client).filter(month=month).order_by("threshold")
        ),
        simulation_budget=simulation_budget_status(client=client),
    )


# ---------------------------------------------------------------------------------------------
# Budgets
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MonthTotals:
    tokens: int
    turns: int


def month_usage_totals(
    *, client: Client, month: date, exclude_running: bool = False
) -> MonthTotals:
    """Tokens and turns of the month so far, from raw records (for seeding and reconciling
    the budget counter). `exclude_running` leaves out turns holding a reservation."""
    last = periods.month_end(month)
    # Simulations have their own budget (`simulation_month_tokens`): never the live one's.
    records = records_started_between(client=client, first=month, last=last).exclude(
        purpose=UsagePurpose.SIMULATION
    )
    if exclude_running:
        records = records.exclude(trace__usage_reservation__state=ReservationState.RESERVED)
    totals = records.aggregate(p=Sum("prompt_tokens"), c=Sum("completion_tokens"))
    turns = records.filter(trace__isnull=False).values("trace").distinct().count()
    return MonthTotals(tokens=(totals["p"] or 0) + (totals["c"] or 0), turns=turns)


# ---------------------------------------------------------------------------------------------
# Simulations' own budget (apps.billing.services.simulations)
# ---------------------------------------------------------------------------------------------


def simulation_token_budget(*, client: Client) -> int:
    """The client's monthly token budget for simulations: its own when a platform operator set
    one, else its plan's; 0 = no limit."""
    own = client.simulation_monthly_tokens
    return int(own if own is not None else client.plan.simulation_monthly_tokens)


def simulation_month_tokens(*, client: Client, month: date) -> int:
    """Tokens the client's simulation calls used in `month`, from the usage records (they
    belong to no customer turn: each counts at its own time)."""
    start = periods.day_start(month)
    stop = periods.day_start(periods.month_end(month) + timedelta(days=1))
    totals = (
        UsageRecord.objects.for_client(client)
        .filter(purpose=UsagePurpose.SIMULATION, created_at__gte=start, created_at__lt=stop)
        .aggregate(p=Sum("prompt_tokens"), c=Sum("completion_tokens"))
    )
    return int((totals["p"] or 0) + (totals["c"] or 0))


@dataclass(frozen=True)
class SimulationBudget:
    """This month's simulation budget: `monthly_tokens` (0 = no limit) and what is used."""

    month: date
    monthly_tokens: int
    used: int

    @property
    def left(self) -> int | None:
        """Tokens left this month (None: no limit)."""
        if not self.monthly_tokens:
            return None
        return max(0, self.monthly_tokens - self.used)

    @property
    def percent(self) -> Decimal | None:
        if not self.monthly_tokens:
            return None
        return (Decimal(self.used) * 100 / Decimal(self.monthly_tokens)).quantize(Decimal("0.1"))


def simulation_budget_status(*, client: Client) -> SimulationBudget:
    """The client's simulation budget this month and what its simulations used so far."""
    month = periods.month_start(periods.today())
    counter = SimulationUsageCounter.objects.for_client(client).filter(month=month).first()
    used = (
        counter.tokens_used
        if counter is not None
        else simulation_month_tokens(client=client, month=month)
    )
    return SimulationBudget(
        month=month, monthly_tokens=simulation_token_budget(client=client), used=int(used)
    )


def recent_calls_by_step(
    *, client: Client, steps: Iterable[str], days: int = 30
) -> dict[str, tuple[int, int]]:
    """{step: (calls, tokens)} of the client's simulation calls of these steps in the last
    `days` days (a simulation's simulated customer and judge: calls outside a customer turn),
    one aggregate query."""
    rows = (
        UsageRecord.objects.for_client(client)
        .filter(
            created_at__gte=timezone.now() - timedelta(days=days),
            purpose=UsagePurpose.SIMULATION,
            step__in=list(steps),
        )
        .values("step")
        .annotate(calls=Count("id"), tokens=Sum(F("prompt_tokens") + F("completion_tokens")))
    )
    return {str(r["step"]): (int(r["calls"]), int(r["tokens"] or 0)) for r in rows}


# ---------------------------------------------------------------------------------------------
# Invoices
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InvoiceLine:
    description: str
    quantity: int
    amount_usd: Decimal  # rounded to cents
    exact_usd: Decimal  # before rounding (8 places)


@dataclass(frozen=True)
class Invoice:
    client: Client
    month: date
    is_final: bool  # False while the month is still running
    turns: int
    included_turns: int
    turns_beyond_included: int
    usage_billed_usd: Decimal  # every turn's billed usage, included or not
    overage_usd: Decimal  # billed usage of the turns beyond the allowance (8 places)
    lines: list[InvoiceLine]

    @property
    def total_usd(self) -> Decimal:
        return sum((line.amount_usd for line in self.lines), ZERO)


def cents(value: Decimal) -> Decimal:
    return value.quantize(CENTS, rounding=ROUND_HALF_UP)


def invoice_for_month(*, client: Client, month: date) -> Invoice:
    """The month's invoice: the plan's fee, which covers the month's first `included_turns`
    turns (in the order they started), plus the billed usage of every later turn — one line
    per mode. Usage records whose turn no longer exists are billed as usage beyond the
    allowance."""
    month = periods.month_start(month)
    last = periods.month_end(month)
    plan = client.plan
    included = plan.included_turns
    records = records_started_between(client=client, first=month, last=last)
    turn_count = turns_started_count(client=client, first=month, last=last)
    beyond = records.filter(trace__isnull=True)
    if turn_count > included:
        beyond = records
        if included:
            cut_at, cut_pk = (
                records.filter(trace__isnull=False)
                .values_list("trace__created_at", "trace")
                .distinct()
                .order_by("trace__created_at", "trace")[included - 1]
            )
            beyond = records.exclude(
                Q(trace__created_at__lt=cut_at) | Q(trace__created_at=cut_at, trace__pk__lte=cut_pk)
            )
    by_mode = (
        beyond.annotate(line=_line())
        .values("line")
        .annotate(billed=Sum("billed_usd"), turns=Count("trace", distinct=True))
        .order_by("line")
    )
    lines = [
        InvoiceLine(
            description=(f"{plan.name} plan — monthly fee (includes {included:,} turns)"),
            quantity=1,
            amount_usd=cents(plan.monthly_fee),
            exact_usd=plan.monthly_fee,
        )
    ]
    overage = ZERO
    for row in by_mode:
        billed = _usd(row["billed"])
        overage += billed
        lines.append(
            InvoiceLine(
                description=(
                    "AI usage beyond the included turns — simulations"
                    if row["line"] == SIMULATION_LINE
                    else f"AI usage beyond the included turns — {row['line']} mode"
                ),
                quantity=row["turns"],
                amount_usd=cents(billed),
                exact_usd=billed,
            )
        )
    usage_total = records.aggregate(b=Sum("billed_usd"))["b"] or ZERO
    return Invoice(
        client=client,
        month=month,
        is_final=periods.last_closed_day() >= last,
        turns=turn_count,
        included_turns=included,
        turns_beyond_included=max(0, turn_count - included),
        usage_billed_usd=_usd(usage_total),
        overage_usd=overage,
        lines=lines,
    )
