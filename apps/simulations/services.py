"""Simulation runs: create (validate the selection and the candidate's overrides, one `CaseRun`
per case × side × attempt, queue them), execute a case run in the sandbox
(`apps.simulations.sandbox`), check it, and build the report when the last one finishes; stop.

A case run is one job on the workers, below live turns (`apps.platform.slots` kind `sim`;
apps/simulations/tasks.py). `simulation_run_execute` runs a whole run in the caller
(`manage.py simulate`, tests). Every job is idempotent: a redelivered one finds its case run
claimed and leaves it — unless no turn of it started within a turn's lease
(REASONING_TURN_LEASE_SECONDS: its worker died), when the redelivered job runs it again.

Replays: each customer message of a saved conversation is replayed verbatim with the
conversation's ORIGINAL visible history up to it (what the customer had really seen, as
τ-bench-style replays do), so each turn is comparable with what happened then; the candidate's
earlier replies are not fed back. The confirmation questions are the sandbox's own: a
destructive tool runs in a replay only when the candidate put those exact params to the
customer in the previous replayed turn and the customer's next (recorded) message confirms
them."""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime
from django.utils.translation import gettext as _

from apps.billing.models import ModelPrice, UsagePurpose
from apps.billing.selectors import (
    SimulationBudget,
    recent_calls_by_step,
    simulation_budget_status,
)
from apps.billing.services import billed_amount, money
from apps.billing.services.budgets import UsageLimitReached, turn_token_estimate
from apps.billing.services.usage import MILLION
from apps.clients.models import Client
from apps.conversations.models import Conversation
from apps.core.exceptions import ApplicationError
from apps.reasoning import steps
from apps.reasoning.llm import LLMError
from apps.reasoning.meter import Meter, TokenCapExceeded
from apps.reasoning.models import ReasoningTrace, TraceKind, TraceStatus
from apps.reasoning.modes import mode_that_runs
from apps.reasoning.traces import TurnAborted, TurnRecorder
from apps.simulations.config import Side, config_validate_overrides, live_config, side_for
from apps.simulations.expectations import case_check, replay_check
from apps.simulations.judge import judge_criteria
from apps.simulations.models import (
    CaseRun,
    CaseStatus,
    RunKind,
    RunSource,
    RunStatus,
    SimCase,
    SimulationRun,
)
from apps.simulations.models import Side as SideName
from apps.simulations.report import report_build
from apps.simulations.sandbox import (
    BudgetExhausted,
    RunStopped,
    Sandbox,
    SandboxConversation,
    SimulationOwner,
    budget_reached_message,
    case_customer,
    sandbox_turn,
)
from apps.simulations.schema import MAX_SIMULATED_TURNS
from apps.simulations.selectors import (
    recent_turn_tokens_by_mode,
    replay_conversations,
    replay_customer_messages,
    replay_turns,
    runs_in_flight,
    simcase_list,
    tokens_held_by_runs_in_flight,
)
from apps.tools.models import ClientTool

logger = logging.getLogger(__name__)

__all__ = [
    "RunEstimate",
    "caserun_execute",
    "simulation_run_create",
    "simulation_run_estimate",
    "simulation_run_execute",
    "simulation_run_stop",
]

MAX_CASE_RUNS = 2000
MAX_REPLAYS = 500
DEFAULT_MAX_TURNS = 6


# --------------------------------------------------------------------------------- create


def _fail(field: str, message: str, *, status: int = 400) -> ApplicationError:
    return ApplicationError(message, {"fields": {field: message}}, status=status)


def _select_cases(client: Client, selection: dict[str, Any]) -> list[SimCase]:
    named = selection.get("cases")
    if named:
        if not isinstance(named, list):
            raise _fail("selection.cases", _("A list of case ids or names."))
        wanted = {str(n) for n in named}
        cases = [
            c for c in simcase_list(client=client) if str(c.public_id) in wanted or c.name in wanted
        ]
        if len(cases) != len(wanted):
            raise _fail("selection.cases", _("Some of these cases do not exist."), status=404)
        return cases
    tags = selection.get("tags")
    if tags is not None and not (isinstance(tags, list) and all(isinstance(t, str) for t in tags)):
        raise _fail("selection.tags", _("A list of tags."))
    suite = selection.get("suite")
    if suite is not None and not isinstance(suite, str):
        raise _fail("selection.suite", _("A suite name."))
    return [
        c for c in simcase_list(client=client, suite=suite or None, tags=tags or None) if c.enabled
    ]


def _when(selection: dict[str, Any], key: str) -> Any:
    value = selection.get(key)
    if value in (None, ""):
        return None
    parsed = parse_datetime(str(value))
    if parsed is None:
        day = parse_date(str(value))
        if day is None:
            raise _fail(f"selection.{key}", _("A date or date-time (ISO 8601)."))
        parsed = timezone.make_aware(datetime(day.year, day.month, day.day))
    elif timezone.is_naive(parsed):
        parsed = timezone.make_aware(parsed)
    return parsed


def _select_conversations(client: Client, selection: dict[str, Any]) -> list[Conversation]:
    named = selection.get("conversations")
    if named:
        if not isinstance(named, list):
            raise _fail("selection.conversations", _("A list of conversation ids."))
        wanted = {str(n) for n in named}
        found = list(
            Conversation.objects.for_client(client).filter(
                public_id__in=[n for n in wanted if _is_uuid(n)]
            )
        )
        if len(found) != len(wanted):
            missing = _("Some of these conversations do not exist.")
            raise _fail("selection.conversations", missing, status=404)
        return found
    limit = selection.get("limit", 100)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_REPLAYS:
        raise _fail("selection.limit", _("From 1 to %(most)d.") % {"most": MAX_REPLAYS})
    return replay_conversations(
        client=client,
        since=_when(selection, "since"),
        until=_when(selection, "until"),
        escalated_only=bool(selection.get("escalated_only")),
        with_tool=bool(selection.get("with_tool")),
        limit=limit,
    )


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


@dataclass
class _Plan:
    """What a run would do: its validated overrides, sides and case runs to create."""

    clean: dict[str, Any]
    sides: list[SideName]
    rows: list[tuple[str, SimCase | None, Conversation | None, int]]
    total: int


def _run_plan(
    *,
    client: Client,
    source: str,
    kind: str,
    selection: dict[str, Any],
    overrides: dict[str, Any] | None,
    compare: bool,
) -> _Plan:
    if kind not in RunKind.values:
        raise _fail("kind", _("Choose one of: %s.") % ", ".join(RunKind.values))
    if source not in RunSource.values:
        raise _fail("source", _("Choose one of: %s.") % ", ".join(RunSource.values))
    # `manage.py simulate` is the platform operator's, at a shell: not held to the plan.
    clean = config_validate_overrides(
        client=client, overrides=overrides or {}, within_plan=source != RunSource.CLI
    )
    sides = [SideName.BASELINE, SideName.CANDIDATE] if compare else [SideName.CANDIDATE]
    rows: list[tuple[str, SimCase | None, Conversation | None, int]] = []
    if kind == RunKind.CASES:
        cases = _select_cases(client, selection)
        if not cases:
            raise _fail("selection", _("No enabled case matches this selection."))
        rows = [(c.name, c, None, max(1, int(c.repeat or 1))) for c in cases]
    else:
        conversations = _select_conversations(client, selection)
        if not conversations:
            raise _fail("selection", _("No saved conversation matches this selection."))
        rows = [(f"replay-{c.public_id}", None, c, 1) for c in conversations]
    total = sum(attempts for *_, attempts in rows) * len(sides)
    if total > MAX_CASE_RUNS:
        raise _fail(
            "selection",
            _("This run would need %(n)d case runs; at most %(most)d.")
            % {"n": total, "most": MAX_CASE_RUNS},
        )
    return _Plan(clean=clean, sides=sides, rows=rows, total=total)


def _case_turns(case: SimCase) -> int:
    """Customer turns a case runs at most (a simulated customer: its `max_turns`)."""
    if case.simulated:
        spec = dict(case.simulated or {})
        most = int(spec.get("max_turns") or DEFAULT_MAX_TURNS)
        return max(1, min(most, MAX_SIMULATED_TURNS))
    return max(1, len(case.turns or []))


# What a turn of each mode typically uses (prompt + completion tokens), when the client has too
# little history of its own: docs/benchmarks.md, "Cost per turn by mode" (`bench_modes --turns
# 100`, the demo tenant's weighted mix; `bench_deliberative` for deliberative), evaluation off /
# on. Deliberative evaluates within its own loop: one figure.
TYPICAL_TURN_TOKENS: dict[str, tuple[int, int]] = {
    "standard": (3_011 + 54, 5_537 + 80),
    "adaptive": (691 + 109, 1_261 + 135),
    "as_needed": (1_132 + 131, 1_703 + 157),
    "deliberative": (16_732 + 799, 16_732 + 799),
}
# A simulation's own calls on the live model, per call: the simulated customer writes one
# message (its prompt: persona, goal and the transcript so far) and the judge reads the whole
# transcript once per case run. Not benchmarked on their own; sized from their prompts over a
# six-turn transcript, with room to spare.
TYPICAL_CUSTOMER_CALL_TOKENS = 1_500
TYPICAL_JUDGE_CALL_TOKENS = 2_500
# Turns (or calls) of the last HISTORY_DAYS days a mode needs before the client's own average
# replaces the typical figure.
HISTORY_DAYS = 30
MIN_HISTORY = 20
CUSTOMER_STEP, JUDGE_STEP = "simulate_customer", "judge"


@dataclass
class PerTurn:
    """The tokens one turn (or one simulated-customer / judge call) is expected to use, and
    where the figure comes from: the client's recent turns of that mode (`recent` of them) or,
    with too few, the typical figures (`recent` = 0)."""

    tokens: int
    recent: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "tokens": self.tokens,
            "basis": "recent" if self.recent else "typical",
            "recent": self.recent,
        }


@dataclass
class RunEstimate:
    """What a run is expected to use — its customer turns × each side's expected tokens a turn
    of its mode (the client's average over its recent turns of that mode, or typical figures),
    plus the simulated customer's and the judge's calls — and the client's simulation budget it
    must fit in. An expectation, not a worst case: a run that reaches the budget midway stops
    there. `cost_usd` prices every expected token at the dearer of the model's input and output
    prices; `billed_usd` that × the plan's multiplier."""

    case_runs: int
    turns: int
    tokens: int
    cost_usd: Decimal
    billed_usd: Decimal
    budget: SimulationBudget
    held: int  # tokens the client's runs in flight may still use
    per_turn: dict[str, PerTurn] = field(default_factory=dict)  # by mode, "customer", "judge"

    @property
    def left(self) -> int | None:
        """Budget left for this run (None: no limit)."""
        if not self.budget.monthly_tokens:
            return None
        return max(0, self.budget.monthly_tokens - self.budget.used - self.held)

    @property
    def fits(self) -> bool:
        left = self.left
        return left is None or self.tokens <= left

    @property
    def basis(self) -> str:
        """Where the per-turn figures come from, in words (the API's `basis`, the admin)."""
        parts = []
        for mode, figure in self.per_turn.items():
            if mode in ("customer", "judge"):
                continue
            values = {"mode": mode, "tokens": f"{figure.tokens:,}", "turns": f"{figure.recent:,}"}
            if figure.recent:
                parts.append(
                    _("%(mode)s: %(tokens)s tokens a turn, from %(turns)s recent turns") % values
                )
            else:
                parts.append(_("%(mode)s: %(tokens)s tokens a turn, typical figures") % values)
        return "; ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {
            "case_runs": self.case_runs,
            "turns": self.turns,
            "tokens": self.tokens,
            "cost_usd": str(self.cost_usd),
            "billed_usd": str(self.billed_usd),
            "fits": self.fits,
            "basis": self.basis,
            "per_turn": {key: figure.as_dict() for key, figure in self.per_turn.items()},
            "budget": {
                "month": self.budget.month.isoformat(),
                "monthly_tokens": self.budget.monthly_tokens,
                "used": self.budget.used,
                "held_by_runs_in_flight": self.held,
                "left": self.left,
            },
        }


def _expected(recent: tuple[int, int] | None, typical: int, *, cap: int | None = None) -> PerTurn:
    """The client's own average ((count, tokens) of its recent turns or calls) when it has
    MIN_HISTORY of them, else the typical figure; never above `cap` (what a turn may use at
    most: its reserve or the plan's per-turn cap)."""
    count, spent = recent or (0, 0)
    if count >= MIN_HISTORY:
        figure = PerTurn(tokens=round(spent / count), recent=count)
    else:
        figure = PerTurn(tokens=typical, recent=0)
    if cap:
        figure.tokens = min(figure.tokens, cap)
    return figure


def _estimate(*, client: Client, plan: _Plan) -> RunEstimate:
    replayed: dict[int, int] = {}
    conversations = [c for _n, _c, c, _a in plan.rows if c is not None]
    if conversations:
        replayed = replay_customer_messages(client=client, conversations=conversations)
    turns_per_side = sum(
        attempts
        * (
            _case_turns(case)
            if case is not None
            else max(1, replayed.get(conv.pk, 0) if conv else 1)
        )
        for _name, case, conv, attempts in plan.rows
    )
    # The simulated customer writes each of its customer's messages; the judge reads a case run
    # with criteria once.
    customer_calls = sum(
        attempts * _case_turns(case)
        for _name, case, _conv, attempts in plan.rows
        if case is not None and case.simulated
    )
    judge_calls = sum(
        attempts
        for _name, case, _conv, attempts in plan.rows
        if case is not None and any(str(c).strip() for c in case.criteria or [])
    )
    apart = (CUSTOMER_STEP, JUDGE_STEP)
    history = recent_turn_tokens_by_mode(client=client, days=HISTORY_DAYS, calls_apart=apart)
    calls = recent_calls_by_step(client=client, steps=apart, days=HISTORY_DAYS)
    customer = _expected(calls.get(CUSTOMER_STEP), TYPICAL_CUSTOMER_CALL_TOKENS)
    judge = _expected(calls.get(JUDGE_STEP), TYPICAL_JUDGE_CALL_TOKENS)
    per_turn: dict[str, PerTurn] = {}
    tokens, cost, billed = 0, Decimal(0), Decimal(0)
    for side_name in plan.sides:
        side = side_for(
            client=client, overrides=plan.clean if side_name == SideName.CANDIDATE else {}
        )
        mode = mode_that_runs(side.plan.ai_mode)
        typical = TYPICAL_TURN_TOKENS.get(mode, TYPICAL_TURN_TOKENS["deliberative"])
        figure = _expected(
            history.get(mode),
            typical[1 if side.plan.evaluation_enabled else 0],
            cap=turn_token_estimate(side.plan, mode),
        )
        per_turn.setdefault(mode, figure)
        if customer_calls:
            per_turn.setdefault("customer", customer)
        if judge_calls:
            per_turn.setdefault("judge", judge)
        side_tokens = (
            turns_per_side * figure.tokens
            + customer_calls * customer.tokens
            + judge_calls * judge.tokens
        )
        price = ModelPrice.objects.filter(model=side.model or side.config["model"]).first()
        side_cost = Decimal(0)
        if price is not None:
            dearer = max(price.input_per_million, price.output_per_million)
            side_cost = money(Decimal(side_tokens) * dearer / MILLION)
        tokens += side_tokens
        cost += side_cost
        billed += billed_amount(cost=side_cost, multiplier=side.plan.multiplier_for(mode))
    return RunEstimate(
        case_runs=plan.total,
        turns=turns_per_side * len(plan.sides),
        tokens=tokens,
        cost_usd=money(cost),
        billed_usd=money(billed),
        budget=simulation_budget_status(client=client),
        held=tokens_held_by_runs_in_flight(client=client),
        per_turn=per_turn,
    )


def simulation_run_estimate(
    *,
    client: Client,
    source: str = RunSource.ADMIN,
    kind: str = RunKind.CASES,
    selection: dict[str, Any] | None = None,
    overrides: dict[str, Any] | None = None,
    compare: bool = True,
) -> RunEstimate:
    """What a run with these settings would use, against the client's simulation budget;
    validated as `simulation_run_create` validates it. Nothing is written."""
    plan = _run_plan(
        client=client,
        source=source,
        kind=kind,
        selection=dict(selection or {}),
        overrides=overrides,
        compare=compare,
    )
    return _estimate(client=client, plan=plan)


def _check_room(*, client: Client) -> None:
    """At most SIMULATION_RUNS_IN_FLIGHT_PER_CLIENT runs queued or running per client; a run
    beyond is refused (429)."""
    most = int(settings.SIMULATION_RUNS_IN_FLIGHT_PER_CLIENT)
    # Lock the client's row so two simultaneous starts cannot both take the last place.
    Client.objects.select_for_update().filter(pk=client.pk).first()
    active = runs_in_flight(client=client).count()
    if active >= most:
        raise ApplicationError(
            _(
                "%(active)d simulation runs are already queued or running for this client (at "
                "most %(most)d at once). Wait for one to finish, or stop one, then start this "
                "run again."
            )
            % {"active": active, "most": most},
            status=429,
            code="simulations_busy",
        )


def _check_budget(estimate: RunEstimate) -> None:
    if estimate.fits:
        return
    message = _(
        "This simulation would use about %(tokens)s tokens, but only %(left)s of this month's "
        "simulation budget of %(budget)s tokens are left. Choose fewer cases or a cheaper mode, "
        "or ask the platform to raise the simulation budget."
    ) % {
        "tokens": f"{estimate.tokens:,}",
        "left": f"{estimate.left or 0:,}",
        "budget": f"{estimate.budget.monthly_tokens:,}",
    }
    raise ApplicationError(
        message,
        {"fields": {"selection": message}, "estimate": estimate.as_dict()},
        code="simulation_budget",
    )


@transaction.atomic
def simulation_run_create(
    *,
    client: Client,
    created_by: Any = None,
    source: str = RunSource.ADMIN,
    kind: str = RunKind.CASES,
    selection: dict[str, Any] | None = None,
    overrides: dict[str, Any] | None = None,
    compare: bool = True,
    name: str = "",
    enqueue: bool = True,
) -> SimulationRun:
    """Validate and store a run with its case runs; with `enqueue` they start on the workers
    once the transaction commits. Refused when the plan does not allow its overrides, when the
    client has SIMULATION_RUNS_IN_FLIGHT_PER_CLIENT runs in flight, or when its estimate does
    not fit the client's simulation budget for the month."""
    selection = dict(selection or {})
    plan = _run_plan(
        client=client,
        source=source,
        kind=kind,
        selection=selection,
        overrides=overrides,
        compare=compare,
    )
    if source != RunSource.CLI:  # `manage.py simulate`: the platform operator's, at a shell
        _check_room(client=client)
    estimate = _estimate(client=client, plan=plan)
    _check_budget(estimate)
    clean, sides, rows, total = plan.clean, plan.sides, plan.rows, plan.total
    run = SimulationRun.objects.create(
        client=client,
        created_by=created_by if getattr(created_by, "pk", None) else None,
        source=source,
        kind=kind,
        name=name[:200],
        selection=selection,
        baseline=live_config(client=client) if compare else {},
        candidate=side_for(client=client, overrides=clean).config,
        candidate_overrides=clean,
        compare=compare,
        total=total,
        estimated_tokens=estimate.tokens,
        estimate=estimate.as_dict(),
    )
    CaseRun.objects.bulk_create(
        [
            CaseRun(
                client=client,
                run=run,
                case=case,
                conversation=conversation,
                case_name=case_name[:200],
                side=side,
                attempt=attempt,
            )
            for case_name, case, conversation, attempts in rows
            for side in sides
            for attempt in range(1, attempts + 1)
        ]
    )
    if enqueue:
        from apps.simulations.tasks import enqueue_run

        run_id, client_id = run.pk, client.pk
        transaction.on_commit(lambda: enqueue_run(run_id, client_id=client_id))
    return run


# --------------------------------------------------------------------------------- stop


def simulation_run_stop(*, client: Client, run: SimulationRun) -> bool:
    """Ask a run to stop: queued case runs stop at once, running ones before their next LLM
    call. False when the run had already finished."""
    with transaction.atomic():
        locked = (
            SimulationRun.objects.for_client(client).select_for_update().filter(pk=run.pk).first()
        )
        if locked is None or locked.finished:
            return False
        locked.stop_requested = True
        locked.save(update_fields=["stop_requested", "updated_at"])
        now = timezone.now()
        stopped = (
            CaseRun.objects.for_client(client)
            .filter(run=locked, status=CaseStatus.QUEUED)
            .update(status=CaseStatus.STOPPED, finished_at=now, updated_at=now)
        )
        if stopped:
            _count_done(locked, stopped)
    run.stop_requested = True
    return True


# --------------------------------------------------------------------------------- execute


def simulation_run_execute(*, run_id: int) -> None:
    """Run every queued case run of a run in the caller, one after another (`manage.py
    simulate`, tests); the report is built when the last one ends."""
    run = SimulationRun.objects.for_current_client().filter(pk=run_id).first()
    if run is None:
        return
    ids = list(
        CaseRun.objects.for_client(run.client)
        .filter(run=run, status=CaseStatus.QUEUED)
        .order_by("case_name", "side", "attempt")
        .values_list("pk", flat=True)
    )
    for case_run_id in ids:
        caserun_execute(case_run_id=case_run_id)
    if not ids:
        _finalize_if_done(run.client, run.pk)


def _claim(case_run_id: int) -> CaseRun | None:
    """Take the case run, once: a redelivered job finds it claimed (or finished)."""
    with transaction.atomic():
        case_run = (
            CaseRun.objects.for_current_client()
            .select_for_update(of=("self",))
            .select_related("run", "run__client", "run__client__plan", "case", "conversation")
            .filter(pk=case_run_id)
            .first()
        )
        if case_run is None:
            return None
        lease = timedelta(seconds=float(settings.REASONING_TURN_LEASE_SECONDS))
        stale = case_run.status == CaseStatus.RUNNING and case_run.updated_at < (
            timezone.now() - lease
        )
        if case_run.status != CaseStatus.QUEUED and not stale:
            return None
        if stale:  # its worker died mid-case (no turn started within a lease): run it again
            logger.warning("simulation case run %s taken over", case_run.pk)
        case_run.status = CaseStatus.RUNNING
        case_run.save(update_fields=["status", "updated_at"])
        SimulationRun.objects.for_client(case_run.run.client).filter(
            pk=case_run.run_id, status=RunStatus.QUEUED
        ).update(status=RunStatus.RUNNING, started_at=timezone.now(), updated_at=timezone.now())
        return case_run


def caserun_execute(*, case_run_id: int) -> CaseRun | None:
    """Run one case run to its end and record it; the last one of the run builds the report.
    Never raises for what a model, a cap or a budget does."""
    case_run = _claim(case_run_id)
    if case_run is None:
        return None
    run = case_run.run
    client = run.client
    started = time.perf_counter()
    if (
        run.stop_requested
        or SimulationRun.objects.for_client(client).filter(pk=run.pk, stop_requested=True).exists()
    ):
        _store(case_run, [], status=CaseStatus.STOPPED, error="", started=started, extra=None)
        _count_done(run, 1)
        return case_run
    runner = _CaseRunner(case_run)
    try:
        runner.run()
    except Exception as exc:  # a bug ends the case as an error, never the run
        logger.exception("simulation case failed", extra={"case_run": case_run.pk})
        runner.status, runner.error = CaseStatus.ERROR, f"internal error: {exc!r}"
    _store(
        case_run,
        runner.transcript,
        status=runner.status,
        error=runner.error,
        started=started,
        extra=runner,
    )
    if runner.budget_error:
        SimulationRun.objects.for_client(client).filter(pk=run.pk).update(
            stop_requested=True, error=runner.budget_error[:2000], updated_at=timezone.now()
        )
        # The rest cannot run: they end at once (the run fails with the budget's message).
        now = timezone.now()
        left = (
            CaseRun.objects.for_client(client)
            .filter(run=run, status=CaseStatus.QUEUED)
            .update(status=CaseStatus.ERROR, error=runner.budget_error[:2000], finished_at=now)
        )
        if left:
            _count_done(run, left)
    _count_done(run, 1)
    return case_run


class _CaseRunner:
    """One case run's conversation in the sandbox and its checks."""

    def __init__(self, case_run: CaseRun) -> None:
        self.case_run = case_run
        self.run_row = case_run.run
        self.client = case_run.run.client
        overrides = self.run_row.candidate_overrides if case_run.side == SideName.CANDIDATE else {}
        self.side: Side = side_for(client=self.client, overrides=overrides)
        self.owner = SimulationOwner(self.run_row)
        self.tools = list(ClientTool.objects.for_client(self.client).order_by("name"))
        self.transcript: list[dict[str, Any]] = []
        self.status = CaseStatus.PASSED
        self.error = ""
        self.budget_error = ""
        self.passed: bool | None = None
        self.judged_passed: bool | None = None
        self.checks: list[dict[str, Any]] = []
        self.judged: list[dict[str, Any]] = []
        self._own_trace: ReasoningTrace | None = None
        self._own_recorder: TurnRecorder | None = None
        self.own_calls = 0
        self.own_tokens = (0, 0)
        self.own_cost = Decimal(0)

    # -- the case's own calls (simulated customer, judge): one trace, the live model ------------
    def recorder(self) -> TurnRecorder:
        if self._own_recorder is None:
            mode = mode_that_runs(self.side.plan.ai_mode)
            self._own_trace = ReasoningTrace.objects.create(
                client=self.client, kind=TraceKind.SIMULATION, case_run=self.case_run, mode=mode
            )
            self._own_recorder = TurnRecorder(
                trace=self._own_trace,
                client=self.client,
                conversation=Conversation(client=self.client),
                next_index=0,
                owner=self.owner,
                meter=Meter(
                    client=self.client, mode=mode, purpose=UsagePurpose.SIMULATION, token_cap=None
                ),
            )
        return self._own_recorder

    def close_recorder(self) -> None:
        rec, trace = self._own_recorder, self._own_trace
        if rec is None or trace is None:
            return
        trace.status = TraceStatus.DONE
        trace.finished_at = timezone.now()
        trace.model = rec.model
        trace.llm_wait_ms = rec.llm_wait_ms
        trace.save(update_fields=["status", "finished_at", "model", "llm_wait_ms", "updated_at"])
        self.own_calls = rec.meter.calls
        self.own_tokens = (trace.prompt_tokens, trace.completion_tokens)
        self.own_cost = rec.meter.cost_usd

    # -- running --------------------------------------------------------------------------------
    def run(self) -> None:
        try:
            if self.case_run.conversation_id is not None:
                self._replay()
            elif self.case_run.case is None:
                self.status, self.error = CaseStatus.ERROR, "the case was deleted"
                return
            elif self.case_run.case.simulated:
                self._simulated(self.case_run.case)
            else:
                self._scripted(self.case_run.case)
        except RunStopped as exc:
            self._keep(exc)
            self.status = CaseStatus.STOPPED
            return
        except BudgetExhausted as exc:
            self._keep(exc)
            self.status, self.error = CaseStatus.ERROR, str(self.transcript[-1]["error"])
            self.budget_error = self.error
            return
        except TurnAborted:
            self.status = CaseStatus.STOPPED
            return
        except UsageLimitReached as exc:  # the simulated customer's call: the budget ran out
            self.status = CaseStatus.ERROR
            self.error = self.budget_error = budget_reached_message(exc)
            return
        finally:
            self.close_recorder()
        try:
            self._check()
        except TurnAborted:  # stopped before the judge's call
            self.status = CaseStatus.STOPPED
        except UsageLimitReached as exc:
            self.status = CaseStatus.ERROR
            self.error = self.budget_error = budget_reached_message(exc)

    def _keep(self, exc: Exception) -> None:
        if exc.args and isinstance(exc.args[0], dict):
            self.transcript.append(exc.args[0])

    def _turn(self, sandbox: Sandbox, conv: SandboxConversation, index: int, text: str) -> dict:
        # Alive: a case run not touched within a turn's lease may be taken over (`_claim`).
        CaseRun.objects.for_client(self.client).filter(pk=self.case_run.pk).update(
            updated_at=timezone.now()
        )
        entry = sandbox_turn(
            case_run=self.case_run,
            side=self.side,
            sandbox=sandbox,
            conv=conv,
            owner=self.owner,
            tools=self.tools,
            index=index,
            text=text,
        )
        self.transcript.append(entry)
        return entry

    def _scripted(self, case: SimCase) -> None:
        sandbox = Sandbox(stubs=dict(case.tools or {}))
        conv = SandboxConversation.start(
            client=self.side.client, history=case.history or [], customer=case_customer(case)
        )
        turns = list(case.turns or [])
        for index, turn in enumerate(turns):
            entry = self._turn(sandbox, conv, index, str(turn.get("customer", "")))
            if entry["escalated"] or entry["error"]:
                why = "handed off" if entry["escalated"] else "error"
                self.transcript.extend(
                    {"index": i, "customer": str(t.get("customer", "")), "skipped": why}
                    for i, t in enumerate(turns[index + 1 :], start=index + 1)
                )
                break

    def _simulated(self, case: SimCase) -> None:
        """A simulated customer (the `simulate_customer` step, on the case's own trace with the
        live model) writes each message; `done` or `max_turns` ends the conversation."""
        step = steps.get("simulate_customer")
        spec = dict(case.simulated or {})
        most = int(spec.get("max_turns") or DEFAULT_MAX_TURNS)
        most = max(1, min(most, MAX_SIMULATED_TURNS))
        persona, goal = str(spec.get("persona", "")), str(spec.get("goal", ""))
        sandbox = Sandbox(stubs=dict(case.tools or {}))
        conv = SandboxConversation.start(
            client=self.side.client, history=case.history or [], customer=case_customer(case)
        )
        for index in range(most):
            messages = step.prompt(
                persona=persona, goal=goal, transcript=self.transcript, business=self.client.name
            )
            hint = {
                "step": step.name,
                **step.hint(persona=persona, goal=goal, transcript=self.transcript),
            }
            result = self.recorder().llm(
                step=step.name, messages=messages, output=step.output, hint=hint
            )
            said = str(result.parsed.message or "").strip()
            if result.parsed.done or not said:
                break
            entry = self._turn(sandbox, conv, index, said)
            if entry["escalated"] or entry["error"]:
                break

    def _replay(self) -> None:
        conversation = self.case_run.conversation
        assert conversation is not None
        original = replay_turns(client=self.client, conversation=conversation)
        sandbox = Sandbox(recorded=original["recorded"])
        for index, turn in enumerate(original["turns"]):
            # The original conversation's customer, verified or not, as it was.
            conv = SandboxConversation.start(
                client=self.side.client, history=[], customer=conversation
            )
            conv.conversation.language = original["language"] or conv.conversation.language
            for item in turn["history"][-200:]:
                conv.add(item["role"], item["text"], kind=item["kind"])
            entry = self._turn(sandbox, conv, index, turn["customer"])
            entry["original"] = turn["original"]
            if entry["escalated"] or entry["error"]:
                why = "handed off" if entry["escalated"] else "error"
                self.transcript.extend(
                    {
                        "index": i,
                        "customer": t["customer"],
                        "skipped": why,
                        "original": t["original"],
                    }
                    for i, t in enumerate(original["turns"][index + 1 :], start=index + 1)
                )
                break

    # -- checking -------------------------------------------------------------------------------
    def _check(self) -> None:
        ran = [t for t in self.transcript if "skipped" not in t]
        if any(t.get("error") for t in ran):
            self.status = CaseStatus.ERROR
            self.error = next(t["error"] for t in ran if t.get("error"))
        if self.case_run.conversation_id is not None:
            self.passed, self.checks = replay_check(transcript=self.transcript)
        else:
            case = self.case_run.case
            assert case is not None
            self.passed, self.checks = case_check(case=_case_data(case), transcript=self.transcript)
            criteria = [str(c) for c in (case.criteria or []) if str(c).strip()]
            if criteria and ran and self.status != CaseStatus.ERROR:
                try:
                    self.judged_passed, self.judged = judge_criteria(
                        recorder=self.recorder(),
                        criteria=criteria,
                        transcript=self.transcript,
                        language=str(self.client.language or ""),
                    )
                except (LLMError, TokenCapExceeded) as exc:
                    self.judged_passed, self.judged = None, [{"error": str(exc)}]
                finally:
                    self.close_recorder()
        if self.status != CaseStatus.ERROR:
            self.status = CaseStatus.FAILED if self.passed is False else CaseStatus.PASSED


def _case_data(case: SimCase) -> dict[str, Any]:
    return {
        "name": case.name,
        "suite": case.suite,
        "description": case.description,
        "tags": list(case.tags or []),
        "history": list(case.history or []),
        "turns": list(case.turns or []),
        "simulated": dict(case.simulated or {}),
        "expect": dict(case.expect or {}),
        "criteria": list(case.criteria or []),
        "tools": dict(case.tools or {}),
        "repeat": case.repeat,
        "enabled": case.enabled,
    }


def _store(
    case_run: CaseRun,
    transcript: list[dict[str, Any]],
    *,
    status: str,
    error: str,
    started: float,
    extra: _CaseRunner | None,
) -> None:
    ran = [t for t in transcript if "skipped" not in t]
    prompt = sum(int(t.get("prompt_tokens", 0)) for t in ran)
    completion = sum(int(t.get("completion_tokens", 0)) for t in ran)
    cost = sum((Decimal(str(t.get("cost_usd", "0"))) for t in ran), Decimal(0))
    calls = sum(int(t.get("llm_calls", 0)) for t in ran)
    if extra is not None:
        calls += extra.own_calls
        prompt += extra.own_tokens[0]
        completion += extra.own_tokens[1]
        cost += extra.own_cost
        case_run.passed = extra.passed if status in (CaseStatus.PASSED, CaseStatus.FAILED) else None
        case_run.judged_passed = extra.judged_passed
        case_run.checks = extra.checks
        case_run.judged = extra.judged
    case_run.transcript = transcript
    case_run.status = status
    case_run.error = error[:2000]
    case_run.llm_calls = calls
    case_run.prompt_tokens = prompt
    case_run.completion_tokens = completion
    case_run.cost_usd = cost
    case_run.duration_ms = int((time.perf_counter() - started) * 1000)
    case_run.finished_at = timezone.now()
    case_run.save(
        update_fields=[
            "transcript",
            "status",
            "error",
            "passed",
            "judged_passed",
            "checks",
            "judged",
            "llm_calls",
            "prompt_tokens",
            "completion_tokens",
            "cost_usd",
            "duration_ms",
            "finished_at",
            "updated_at",
        ]
    )


def _count_done(run: SimulationRun, n: int) -> None:
    """`n` more case runs finished: progress, and the report once the last one is in."""
    SimulationRun.objects.for_client(run.client).filter(pk=run.pk).update(
        completed=F("completed") + n, updated_at=timezone.now()
    )
    _finalize_if_done(run.client, run.pk)


def _finalize_if_done(client: Client, run_id: int) -> None:
    with transaction.atomic():
        run = SimulationRun.objects.for_client(client).select_for_update().filter(pk=run_id).first()
        if run is None or run.finished or run.completed < run.total:
            return
        case_runs = list(
            CaseRun.objects.for_client(client)
            .filter(run=run)
            .select_related("case")
            .order_by("case_name", "side", "attempt")
        )
        if any(c.status in (CaseStatus.QUEUED, CaseStatus.RUNNING) for c in case_runs):
            return
        status = RunStatus.DONE
        if run.error:
            status = RunStatus.FAILED
        elif run.stop_requested:
            status = RunStatus.STOPPED
        try:
            run.report = report_build(run=run, case_runs=case_runs)
        except Exception as exc:
            logger.exception("simulation report failed", extra={"run": run.pk})
            status, run.error = RunStatus.FAILED, f"the report could not be built: {exc!r}"
        run.status = status
        run.finished_at = timezone.now()
        run.save(update_fields=["report", "status", "error", "finished_at", "updated_at"])
