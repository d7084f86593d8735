"""The one turn driver: live turns, playground runs and simulated turns run through `run_turn`.

`run_turn` owns what every turn does the same way: the wants-human check, the mode runner, the
post-draft hooks and the exception ladder — each failure kind mapped once to a trace status, an
outcome (the fallback reply and the hand-off a customer would get) and an error for staff.
`trace_finish` is the trace's closing update. A caller adapts the `TurnResult` to its own record
(the conversation's replies and escalation, the run's result, the transcript entry) and never
repeats the ladder; what one kind of turn adds around the mode (the live turn's fixed answers,
limits and budgets) is a `TurnSurface`."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext_lazy

from apps.billing.services.budgets import UsageLimitReached
from apps.billing.services.simulations import SimulationBudgetReached
from apps.core import deadlines, language_packs
from apps.core.deadlines import DeadlineExceeded, deadline_scope
from apps.escalations.models import EscalationReason
from apps.reasoning.admission import DB_ERRORS
from apps.reasoning.hooks import run_post_draft_hooks
from apps.reasoning.llm import LLMError
from apps.reasoning.models import TraceStatus
from apps.reasoning.modes import runner
from apps.reasoning.traces import TokenCapExceeded, TurnAborted, TurnRecorder
from apps.reasoning.turn import NO_RETRY, Escalate, Outcome, Turn

logger = logging.getLogger(__name__)

__all__ = [
    "FALLBACK_TEXT",
    "USAGE_LIMIT_TEXT",
    "WANTS_PERSON",
    "ChosenTurn",
    "Failure",
    "TurnResult",
    "TurnSurface",
    "budget_reached_message",
    "run_turn",
    "trace_finish",
    "wants_human",
]

# Fixed replies: msgids, rendered in the turn's reply language.
FALLBACK_TEXT = gettext_lazy(
    "Sorry — I ran into a problem answering that. I've passed your conversation to our team so "
    "a person can help."
)
USAGE_LIMIT_TEXT = gettext_lazy(
    "Thanks for your message! Our assistant is unavailable at the moment, so I've passed your "
    "conversation to our team — a person will reply here."
)
WANTS_PERSON = "The customer asked for a person."

# What a closing trace writes (the counters the recorder adds to in the database — calls,
# tokens, cost — are not written back from memory; what the modes set on the trace object is).
TRACE_FINISH_FIELDS = [
    "status",
    "error",
    "escalated",
    "model",
    "finished_at",
    "duration_ms",
    "llm_wait_ms",
    "critique_triggered",
    "critique_reasons",
    "context_fetched",
    "tool_calls",
    "updated_at",
]


class Failure(StrEnum):
    """How a turn ended, when not with the mode's own outcome."""

    NONE = ""
    ABORTED = "aborted"  # the owner stopped it: a takeover, the stop button, a stopped run
    ESCALATED = "escalated"  # a step or a rule asked for a person (`Escalate`)
    TOKEN_CAP = "token_cap"  # noqa: S105  (a failure kind, not a secret)
    USAGE_LIMIT = "usage_limit"  # a monthly (or the simulations') budget ran out
    DEADLINE = "deadline"
    LLM = "llm"
    INTERNAL = "internal"  # a bug


@dataclass
class TurnResult:
    """What a turn came to. `status` is the trace's; `error` says for staff what failed ("" when
    nothing did); `outcome` holds the replies and the hand-off a customer would get."""

    outcome: Outcome = field(default_factory=Outcome)
    status: str = TraceStatus.DONE
    error: str = ""
    failure: Failure = Failure.NONE


@dataclass
class ChosenTurn(Turn):
    """A turn whose rubric and refinement rounds a person chose — a playground run, a
    simulation's candidate (deliberative mode reads them; "" / None = the plan's)."""

    rubric_name: str = ""
    refinement_iterations: int | None = None


class TurnSurface:
    """What one kind of turn adds around the shared run; the defaults add nothing (a playground
    run, a simulated turn). Whatever these raise goes down the same ladder."""

    # A database error is re-raised for the caller to retry on a fresh connection (the live
    # turn) instead of ending the turn as an internal error.
    retries_db_errors = False

    def answer_first(self, turn: Turn) -> Outcome | None:
        """A fixed answer before the wants-human check (None: go on)."""
        return None

    def answer_without_model(self, turn: Turn) -> Outcome | None:
        """A fixed answer after it, before any model runs (None: go on)."""
        return None

    def run_model(self, turn: Turn, draft: Callable[[], Outcome]) -> Outcome:
        """Run `draft` (the mode and the post-draft hooks) — inside limits, budgets…"""
        return draft()


PLAIN = TurnSurface()


@language_packs.derived
def _wants_human() -> re.Pattern[str]:
    """A customer asking for a person, in any pack's language (`WANTS_HUMAN`): built once."""
    patterns = (pack.wants_human for pack in language_packs.packs())
    return re.compile("|".join(f"(?:{pattern})" for pattern in patterns), re.IGNORECASE)


def wants_human(text: str) -> bool:
    return bool(_wants_human().search(text))


def budget_reached_message(exc: UsageLimitReached) -> str:
    """Why a turn could not call the model: the simulations' own monthly budget ran out
    (`SimulationBudgetReached`: a simulation run stops its remaining cases), or the client's."""
    if isinstance(exc, SimulationBudgetReached):
        return f"simulation budget reached: {exc.detail}; the remaining cases were not run"
    return f"monthly budget reached: {exc.detail}"


def run_turn(turn: Turn, *, deadline: float, surface: TurnSurface = PLAIN) -> TurnResult:
    """Run one turn to its result. Never raises for what a model, a cap, a budget, the deadline
    or a bug does (a database error only with `surface.retries_db_errors`)."""
    # Every model call, webhook call and retry of the turn fits in its deadline (scopes nest:
    # an outer one can only make it shorter). The ladder runs inside it: an LLM timeout is the
    # deadline's when no time is left.
    with deadline_scope(deadline):
        try:
            return TurnResult(outcome=_draft(turn, surface))
        except TurnAborted:  # the last step says why (`stopped`, a takeover)
            return TurnResult(status=TraceStatus.STOPPED, failure=Failure.ABORTED)
        except Escalate as exc:
            outcome = Outcome(escalate=(exc.reason, exc.detail), handoff_text=exc.handoff_text)
            return TurnResult(outcome=outcome, failure=Failure.ESCALATED)
        except TokenCapExceeded as exc:
            return _handed_over(
                Failure.TOKEN_CAP,
                (EscalationReason.USAGE_LIMIT, "per-turn token cap reached"),
                f"per-turn token cap reached at {exc.step}: {exc.detail}",
                handoff=str(USAGE_LIMIT_TEXT),
            )
        except UsageLimitReached as exc:
            return _handed_over(
                Failure.USAGE_LIMIT,
                (EscalationReason.USAGE_LIMIT, exc.detail),
                budget_reached_message(exc),
                handoff=str(USAGE_LIMIT_TEXT),
            )
        except DeadlineExceeded:
            return _deadline_result(turn.rec)
        except LLMError as exc:
            if exc.kind == "timeout" and deadlines.remaining() == 0:
                return _deadline_result(turn.rec)
            twice = "" if exc.kind in NO_RETRY else " twice"
            return _handed_over(
                Failure.LLM,
                (
                    EscalationReason.LLM_FAILURE,
                    f"{exc.step} failed{twice} ({exc.kind}): {exc.message}",
                ),
                f"{exc.step} failed ({exc.kind}): {exc.message}",
            )
        except Exception as exc:  # a bug must not lose the customer: hand over to a person
            if surface.retries_db_errors and isinstance(exc, DB_ERRORS):
                raise
            logger.exception("turn failed", extra={"trace": turn.rec.trace.pk})
            turn.rec.step("error", error=repr(exc))
            error = f"internal error: {exc!r}"
            return _handed_over(Failure.INTERNAL, (EscalationReason.LLM_FAILURE, error), error)


def _draft(turn: Turn, surface: TurnSurface) -> Outcome:
    fixed = surface.answer_first(turn)
    if fixed is not None:
        return fixed
    if wants_human(turn.user_message.text):
        raise Escalate(EscalationReason.CUSTOMER_REQUEST, WANTS_PERSON)
    fixed = surface.answer_without_model(turn)
    if fixed is not None:
        return fixed
    # The mode is looked up when it runs: the limits may have changed it (`_run_as`).
    return surface.run_model(
        turn, lambda: run_post_draft_hooks(turn, runner(turn.rec.trace.mode)(turn))
    )


def _handed_over(
    failure: Failure, escalate: tuple[str, str], error: str, *, handoff: str = ""
) -> TurnResult:
    """A failure a customer sees as the fallback reply and a hand-off to a person."""
    outcome = Outcome(escalate=escalate, handoff_text=handoff or str(FALLBACK_TEXT))
    return TurnResult(outcome=outcome, error=error, failure=failure)


def _deadline_result(recorder: TurnRecorder) -> TurnResult:
    """The turn's time is up: the fallback reply and a hand-off (reason `deadline`)."""
    seconds = settings.REASONING_TURN_DEADLINE_SECONDS
    recorder.step("deadline", output={"seconds": seconds}, error="the turn's deadline ran out")
    return _handed_over(
        Failure.DEADLINE,
        (EscalationReason.DEADLINE, f"the turn ran out of its {seconds} s deadline"),
        f"the turn's deadline ({seconds} s) ran out",
    )


def trace_finish(
    recorder: TurnRecorder,
    *,
    status: str,
    started: float,
    error: str | None = None,
    escalated: bool | None = None,
    model: str = "",
) -> int:
    """Close the turn's trace (inside the caller's transaction, with its own record): the
    status, the timings and the model. `error` / `escalated` None: left as they are; `model`:
    the one to record when no call named one. Returns the duration in ms."""
    trace = recorder.trace
    trace.status = status
    if error is not None:
        trace.error = error[:2000]
    if escalated is not None:
        trace.escalated = escalated
    trace.model = recorder.model or trace.model or model
    trace.finished_at = timezone.now()
    trace.duration_ms = int((time.perf_counter() - started) * 1000)
    trace.llm_wait_ms = recorder.llm_wait_ms
    trace.save(update_fields=TRACE_FINISH_FIELDS)
    return trace.duration_ms
