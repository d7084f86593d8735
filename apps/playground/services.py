"""Playground runs: one reasoning turn outside any conversation.

`playground_run_create` validates and stores the run (and queues it, from the console);
`playground_run_execute` runs it — in a Celery task, in a background thread of the web process
when there is no broker, or in the caller's thread (`manage.py reason`). Nothing is sent to a
customer: the run's history is read-only, its steps are recorded on its own `ReasoningTrace`
(kind `playground`) by the same recorder a conversation turn uses, tools are never called (the
guards' verdict is shown instead), and every LLM call is metered and recorded with purpose
`playground` against the client's caps and monthly budget."""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

from apps.billing.models import UsagePurpose
from apps.billing.services.budgets import plan_is_budgeted
from apps.clients import modes
from apps.clients.models import AIMode, Client, Rubric
from apps.conversations.events import publish, push_enabled
from apps.conversations.models import Conversation, Message, Role
from apps.conversations.services import validate_customer_text
from apps.core.exceptions import ApplicationError
from apps.playground.models import PlaygroundRun, RunSource, RunStatus
from apps.reasoning.grants import allowed_modes, allowed_refinement_rounds
from apps.reasoning.meter import Meter
from apps.reasoning.models import ReasoningStep, ReasoningTrace, TraceKind, TraceStatus
from apps.reasoning.run import ChosenTurn, Failure, TurnResult, run_turn, trace_finish
from apps.reasoning.traces import StepListener, TurnAborted, TurnRecorder
from apps.reasoning.turn import Outcome
from apps.tools.selectors import tool_list_for_turn

logger = logging.getLogger(__name__)

MAX_ITERATIONS = 10
CHANNEL_PREFIX = "guidedesk:playground:"
MAX_NOTES = 200
# A run still `running` this long after its last change is counted as dead, not active.
ACTIVE_RUN_WINDOW = timedelta(minutes=15)

__all__ = [
    "CHANNEL_PREFIX",
    "PlaygroundOwner",
    "playground_allowed_iterations",
    "playground_allowed_modes",
    "playground_modes",
    "playground_run_create",
    "playground_run_execute",
    "playground_run_stop",
    "run_changed",
]


def run_changed(run_id: int) -> None:
    """Wake the run's event streams (Redis pub/sub) once the current transaction commits; the
    streams poll when there is no Redis."""
    if push_enabled():
        transaction.on_commit(lambda: publish(run_id, prefix=CHANNEL_PREFIX))


def run_token_cap(run: PlaygroundRun) -> int | None:
    """The cap a customer turn in the run's mode would have: the plan's per-turn cap, or on a
    plan with a monthly budget what such a turn reserves (a deliberative turn reserves more)."""
    plan = run.client.plan
    if plan.per_turn_token_cap:
        return int(plan.per_turn_token_cap)
    if not plan_is_budgeted(plan):
        return None
    deliberative = run.mode == AIMode.DELIBERATIVE
    return int(
        settings.BILLING_DELIBERATIVE_TURN_TOKEN_RESERVE
        if deliberative
        else settings.BILLING_TURN_TOKEN_RESERVE
    )


class PlaygroundOwner:
    """The run as its trace's owner (`apps.reasoning.traces.TraceOwner`): staff's stop button
    in place of a takeover, the internal notes kept on the run (nothing is posted), and each
    step wakes the run's event streams."""

    def __init__(self, run: PlaygroundRun) -> None:
        self.run = run

    def ensure_open(self, recorder: TurnRecorder) -> None:
        """Checked before every LLM call (and where a turn would run a tool): the run stops at
        the next step once staff pressed stop."""
        run = self.run
        if (
            PlaygroundRun.objects.for_client(run.client)
            .filter(pk=run.pk, stop_requested=True)
            .exists()
        ):
            recorder.step("stopped", output={"reason": "stopped from the playground"})
            raise TurnAborted()

    def internal(self, kind: str, text: str, data: dict[str, Any]) -> dict[str, Any]:
        note = {"kind": kind, "text": text[:4000], "data": data}
        run = self.run
        if len(run.notes) < MAX_NOTES:
            run.notes.append(note)
            PlaygroundRun.objects.for_client(run.client).filter(pk=run.pk).update(notes=run.notes)
        return note

    def step_recorded(self, step: ReasoningStep) -> None:
        run_changed(self.run.pk)

    def progress(self, step: int, max_steps: int) -> None:
        """Deliberative mode's "step 3 of 10" → the run's progress bar."""
        run = self.run
        run.progress_step, run.progress_max = step, max_steps
        PlaygroundRun.objects.for_client(run.client).filter(pk=run.pk).update(
            progress_step=step, progress_max=max_steps
        )
        run_changed(run.pk)


def playground_modes() -> list[str]:
    """The modes a run can use: every registered mode, from the cheapest to the dearest."""
    return modes.names()


def playground_allowed_modes(*, client: Client) -> list[str]:
    """The modes this client's staff may run in the console's playground: the plan's mode and
    the cheaper ones, plus what a platform operator granted the client (`playground_modes`;
    `apps.reasoning.grants`, shared with simulations)."""
    return allowed_modes(client=client)


def playground_allowed_iterations(*, client: Client) -> int:
    """The most refinement rounds a console run may ask for: the plan's, unless granted more."""
    return allowed_refinement_rounds(client=client, ceiling=MAX_ITERATIONS)


def _check_plan_allows(*, client: Client, mode: str, iterations: int | None) -> None:
    allowed = playground_allowed_modes(client=client)
    if mode not in allowed:
        raise ApplicationError(
            _(
                "Your plan does not include the %(mode)s mode, so the playground cannot run it. "
                "Choose one of: %(allowed)s."
            )
            % {"mode": mode, "allowed": ", ".join(allowed)},
            {"fields": {"mode": _("Not included in your plan.")}},
            status=403,
        )
    most = playground_allowed_iterations(client=client)
    if iterations is not None and iterations > most:
        raise ApplicationError(
            _("Your plan allows at most %(most)d refinement rounds in the playground.")
            % {"most": most},
            {"fields": {"iterations": _("At most %(most)d.") % {"most": most}}},
            status=403,
        )


def _check_room(*, client: Client) -> None:
    """At most PLAYGROUND_RUNS_PER_CLIENT runs run at once per client and
    PLAYGROUND_RUNS_QUEUED_PER_CLIENT more wait; a run beyond that is refused."""
    most = int(settings.PLAYGROUND_RUNS_PER_CLIENT) + int(
        settings.PLAYGROUND_RUNS_QUEUED_PER_CLIENT
    )
    # Lock the client's row so two simultaneous starts cannot both take the last place.
    Client.objects.select_for_update().filter(pk=client.pk).first()
    active = (
        PlaygroundRun.objects.for_client(client)
        .filter(status=RunStatus.RUNNING, updated_at__gte=timezone.now() - ACTIVE_RUN_WINDOW)
        .count()
    )
    if active >= most:
        raise ApplicationError(
            _(
                "%(active)d playground runs are already running or waiting for this client. "
                "Wait for one to finish, or stop one, then start this run again."
            )
            % {"active": active},
            status=429,
            code="playground_busy",
        )


@transaction.atomic
def playground_run_create(
    *,
    client: Client,
    question: str,
    mode: str,
    created_by: Any = None,
    conversation: Conversation | None = None,
    rubric: str = "",
    iterations: int | None = None,
    source: str = RunSource.CONSOLE,
    enqueue: bool = True,
) -> PlaygroundRun:
    """Validate and store a run. With `enqueue` it starts once the transaction commits."""
    text = validate_customer_text(question)
    if mode not in playground_modes():
        raise ApplicationError(
            f"Unknown mode {mode!r}; choose one of {', '.join(playground_modes())}.",
            {"fields": {"mode": _("Not a mode that can run.")}},
        )
    if conversation is not None and conversation.client_id != client.pk:
        raise ApplicationError(
            "No such conversation.", {"fields": {"conversation": _("Not found.")}}, status=404
        )
    if rubric and not Rubric.objects.filter(slug=rubric).exists():
        raise ApplicationError(
            f"Unknown rubric {rubric!r}.", {"fields": {"rubric": _("No rubric with this slug.")}}
        )
    if iterations is not None and not 0 <= iterations <= MAX_ITERATIONS:
        raise ApplicationError(
            f"iterations must be between 0 and {MAX_ITERATIONS}.",
            {"fields": {"iterations": f"0 to {MAX_ITERATIONS}."}},
        )
    if source != RunSource.CLI:  # `manage.py reason` is the platform operator's, at a shell
        _check_plan_allows(client=client, mode=mode, iterations=iterations)
        _check_room(client=client)
    run = PlaygroundRun.objects.create(
        client=client,
        created_by=created_by if getattr(created_by, "pk", None) else None,
        source=source,
        mode=mode,
        rubric=rubric[:100],
        iterations=iterations,
        question=text,
        conversation=conversation,
        status=RunStatus.RUNNING,
    )
    ReasoningTrace.objects.create(
        client=client, kind=TraceKind.PLAYGROUND, playground_run=run, mode=mode
    )
    if enqueue:
        from apps.playground.tasks import enqueue_run

        run_id, client_id = run.pk, client.pk
        transaction.on_commit(lambda: enqueue_run(run_id, client_id=client_id))
    return run


def playground_run_stop(*, client: Client, run: PlaygroundRun) -> bool:
    """Ask a running run to stop; it does so before its next LLM call. False when it had
    already finished."""
    now = timezone.now()
    running = PlaygroundRun.objects.for_client(client).filter(pk=run.pk, status=RunStatus.RUNNING)
    # A run still waiting for a slot (not claimed: its trace has no model yet) stops at once,
    # so its place among the client's running-or-waiting runs is free again; `_claim` skips it
    # when its turn comes. A started run stops before its next LLM call.
    waiting = Q(trace__isnull=True) | Q(trace__model="")
    changed = running.filter(waiting).update(
        status=RunStatus.STOPPED, stop_requested=True, finished_at=now, updated_at=now
    ) or running.update(stop_requested=True, updated_at=now)
    if changed:
        run_changed(run.pk)
    return bool(changed)


def _claim(run_id: int) -> PlaygroundRun | None:
    """Take the run, once: a redelivered task finds it started (or finished) and leaves it."""
    with transaction.atomic():
        run = (
            PlaygroundRun.objects.for_current_client()
            .select_for_update(of=("self",))
            .select_related("client", "client__plan", "conversation", "trace")
            .filter(pk=run_id)
            .first()
        )
        if run is None or run.status != RunStatus.RUNNING or run.trace.model:
            return None
        trace = run.trace
        trace.model = str(settings.LLM_MODEL) if settings.OPENAI_API_KEY else "offline-demo"
        trace.save(update_fields=["model", "updated_at"])
        return run


def _history(run: PlaygroundRun, question: Message) -> list[Message]:
    if run.conversation is None:
        return [question]
    recent = (
        Message.objects.for_client(run.client)
        .visible()
        .filter(conversation=run.conversation)
        .order_by("-seq")[: max(0, settings.REASONING_HISTORY_MESSAGES - 1)]
    )
    return [*reversed(recent), question]


def _recorder(
    run: PlaygroundRun, owner: PlaygroundOwner, listeners: list[StepListener] | None
) -> TurnRecorder:
    meter = Meter(
        client=run.client,
        mode=run.mode,
        purpose=UsagePurpose.PLAYGROUND,
        token_cap=run_token_cap(run),
    )
    return TurnRecorder(
        trace=run.trace,
        client=run.client,
        # Read-only context (an unsaved stand-in without one): a run never writes to it.
        conversation=run.conversation or Conversation(client=run.client),
        owner=owner,
        meter=meter,
        listeners=listeners,
    )


def _turn(run: PlaygroundRun, recorder: TurnRecorder, owner: PlaygroundOwner) -> ChosenTurn:
    client = run.client
    # An unsaved conversation and message stand for the customer's side: they are read (the
    # question, the history) and never written — a dry run posts nothing.
    conversation = run.conversation or Conversation(client=client)
    question = Message(
        client=client,
        conversation=conversation,
        role=Role.USER,
        text=run.question,
        seq=conversation.last_seq + 1,
    )
    # `dry_run` is always on: no tool runs. The run may choose the rubric and the refinement
    # rounds of a deliberative run ("" / None: the plan's).
    return ChosenTurn(
        client=client,
        plan=client.plan,
        conversation=conversation,
        user_message=question,
        rec=recorder,
        tools=tool_list_for_turn(client=client),
        history=_history(run, question),
        dry_run=True,
        rubric_name=run.rubric,
        refinement_iterations=run.iterations,
        on_progress=owner.progress,
    )


def _final(outcome: Outcome) -> dict[str, Any]:
    return {
        "replies": [{"text": r.text, "kind": r.kind, "data": r.data} for r in outcome.replies],
        "escalate": list(outcome.escalate) if outcome.escalate else None,
        "handoff_text": outcome.handoff_text,
        "confidence": outcome.confidence,
    }


def playground_run_execute(
    *, run_id: int, listeners: list[StepListener] | None = None
) -> PlaygroundRun | None:
    """Run a stored run to its end (done, stopped or failed). Never raises for what a model,
    a cap or a budget does: that ends the run with its reason (`run_turn`). Safe to call twice."""
    run = _claim(run_id)
    if run is None:
        return None
    started = time.perf_counter()
    owner = PlaygroundOwner(run)
    recorder = _recorder(run, owner, listeners)
    try:
        turn = _turn(run, recorder, owner)
    except Exception as exc:  # setting the turn up failed: the run ends failed, never "running"
        logger.exception("playground run failed", extra={"run": run.pk})
        failed = TurnResult(error=f"internal error: {exc!r}", failure=Failure.INTERNAL)
        _finish(run, recorder, failed, status=RunStatus.FAILED, started=started)
        return run
    result = run_turn(turn, deadline=settings.REASONING_TURN_DEADLINE_SECONDS)
    if result.outcome.escalate:
        # A turn would hand the conversation to a person here: shown, not done.
        reason, detail = result.outcome.escalate
        recorder.step("escalate", output={"reason": reason, "detail": detail})
    _finish(run, recorder, result, status=_run_status(run, result), started=started)
    return run


def _run_status(run: PlaygroundRun, result: TurnResult) -> str:
    """Stopped (the stop button), failed (what failed is the run's error) or done."""
    if result.failure == Failure.ABORTED:
        return RunStatus.STOPPED  # the last step says so (`stopped`)
    if result.error:
        return RunStatus.FAILED
    if PlaygroundRun.objects.for_client(run.client).filter(pk=run.pk, stop_requested=True).exists():
        return RunStatus.STOPPED  # the mode ended on the stop flag itself (e.g. its loop)
    return RunStatus.DONE


@transaction.atomic
def _finish(
    run: PlaygroundRun, recorder: TurnRecorder, result: TurnResult, *, status: str, started: float
) -> None:
    """Store how the run ended: the result on the run, the figures on its trace (the turn's
    own status: a failure a customer would see as a hand-off is a done turn)."""
    trace_finish(
        recorder,
        status=TraceStatus.STOPPED if status == RunStatus.STOPPED else result.status,
        started=started,
        error=result.error,
        escalated=result.outcome.escalate is not None,
    )
    run.status = status
    run.error = result.error[:2000]
    run.final = _final(result.outcome)
    run.offline = recorder.offline
    run.finished_at = recorder.trace.finished_at
    run.save(update_fields=["status", "error", "final", "offline", "finished_at", "updated_at"])
    run_changed(run.pk)
