"""Deliberate when needed: adaptive first, the deliberative loop only when adaptive's own signals
call for depth.

a "yes"/"no" to a pending action?  → adaptive as is (the guards decide; nothing to think over)
assess (adaptive's, with its context rounds)
  ├─ complaint (the model's own `complaint` flag — any language, no keyword rule)  → deliberate
  ├─ confidence < Plan.deliberate_below_confidence (default 7)                    → deliberate
  └─ adaptive's decision path (critique trigger, critique, guards)
       ├─ the critique says ESCALATE                                               → deliberate
       ├─ a plain knowledge answer, the plan evaluates it, the evaluation questions it
       │                                                                           → deliberate
       └─ otherwise: adaptive's outcome is the turn's
Shown while written (docs/widget.md, `delta`): the assessment's reply only when nothing of the
above can deliberate or change it (adaptive's rule, no complaint, confidence at or above the
threshold, no evaluation); once it deliberates, only the deliberation's final answer.

deliberate: trace step `deliberation_trigger` (why, with the signals), the trace's
  `deliberation_trigger`, the turn billed as deliberative from the start, then deliberative
  mode's `run` — whose own critique and guards decide what finally happens.

No tool has run when the loop starts: the assessment's signals are read before any tool call,
an ESCALATE stops the decision path before the guards, and an evaluated answer is one where no
action ran (a read-only lookup may be made again by the loop's synthesis).

Billing (docs/billing.md): a turn that does not deliberate bills at the plan's `as_needed`
multiplier (default 1.5, adaptive's); one that deliberates bills every call — its adaptive pass
included — at the plan's deliberative multiplier (`TurnRecorder.bill_as`). Its usage records
keep the mode `as_needed`, so the reports show the mode's turns and how many deliberated, and
why (ReasoningTrace.deliberation_trigger)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from django.utils.translation import gettext_noop

from apps.clients.models import AIMode
from apps.clients.modes import Deliberation, Mode, ModeHelp, TokenReserve
from apps.conversations.models import Kind
from apps.reasoning import evaluation
from apps.reasoning.hooks import Draft
from apps.reasoning.models import DeliberationTrigger, ReasoningTrace
from apps.reasoning.modes import adaptive, deliberative
from apps.reasoning.steps.assess import AssessOut
from apps.reasoning.traces import TurnAborted
from apps.reasoning.turn import Outcome, ShownWhen, Turn

logger = logging.getLogger(__name__)

TRIGGERS = tuple(str(t) for t in DeliberationTrigger.values)


def assessment_triggers(turn: Turn, assessment: AssessOut) -> list[str]:
    """What in the assessment calls for depth (in order of precedence; empty = nothing)."""
    found = []
    if assessment.complaint:
        found.append(DeliberationTrigger.COMPLAINT.value)
    if assessment.confidence < turn.plan.deliberate_below_confidence:
        found.append(DeliberationTrigger.LOW_CONFIDENCE.value)
    return found


def run(turn: Turn) -> Outcome:
    if turn.confirmed is not None or turn.declined is not None:
        # The customer answered a confirmation: the guards decide, as in deliberative mode.
        return adaptive.run_adaptive(turn)
    assessment = adaptive.assess_with_context(turn, shown_when=_stays_as_written(turn))
    found = assessment_triggers(turn, assessment)
    if found:
        return _deliberate(
            turn,
            found[0],
            assessment,
            signals=found,
            adaptive_answer=lambda: adaptive.decide(turn, assessment),
        )
    try:
        outcome = adaptive.decide(turn, assessment)
    except adaptive.CritiqueEscalated as exc:
        escalated = exc

        def hand_over() -> Outcome:
            raise escalated

        return _deliberate(
            turn,
            DeliberationTrigger.CRITIQUE_ESCALATE.value,
            assessment,
            signals=[DeliberationTrigger.CRITIQUE_ESCALATE.value],
            detail=exc.detail,
            adaptive_answer=hand_over,
        )
    if _questioned(turn, outcome, assessment):
        return _deliberate(
            turn,
            DeliberationTrigger.EVALUATION_QUESTIONED.value,
            assessment,
            signals=[DeliberationTrigger.EVALUATION_QUESTIONED.value],
            adaptive_answer=lambda: outcome,
        )
    return outcome


def _stays_as_written(turn: Turn) -> ShownWhen:
    """An assessment (its deciding fields, read before its `response`) whose reply goes out
    exactly as written in this mode: adaptive's rule (no tool, nothing missing or wanted,
    confident enough that no critique runs) and nothing that deliberates — the model said it is
    no complaint, and its confidence is not below the plan's threshold. An evaluation could
    still question it: a plan that evaluates streams nothing (`Turn.may_stream`)."""
    threshold = turn.plan.deliberate_below_confidence

    def shown(partial: dict[str, Any]) -> bool:
        return (
            adaptive.final_as_written(partial)
            and partial.get("complaint") is False
            and _number(partial["confidence"]) >= threshold
        )

    return shown


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0  # unreadable: the least confident


def _questioned(turn: Turn, outcome: Outcome, assessment: AssessOut) -> bool:
    """On a plan that evaluates answers: evaluate adaptive's plain knowledge answer here
    (the one evaluation of the turn: the post-draft hook then skips it) and say whether it was
    questioned. A kept or improved answer is applied to `outcome` as the hook would."""
    if not turn.plan.evaluation_enabled or outcome.escalate is not None or turn.tools_run:
        return False
    if len(outcome.replies) != 1 or outcome.replies[0].kind != Kind.TEXT:
        return False
    if outcome.replies[0].text != assessment.response:
        return False
    reply = outcome.replies[0]
    draft = Draft(text=reply.text, kind=reply.kind, confidence=outcome.confidence)
    if evaluation.skip_reason(turn, draft):
        return False  # not evaluated (too short, too unsure): the hook records why
    try:
        evaluation.evaluate(turn, draft)
    except TurnAborted:
        raise
    except Exception:  # the hook would have recorded it; the answer goes out as it is
        logger.exception("evaluation in deliberate-when-needed mode failed")
        return False
    turn.evaluated = True
    if draft.evaluation is None:
        turn.evaluated = False  # nothing was evaluated after all
        return False
    if draft.evaluation.get("outcome") == "questioned":
        turn.evaluated = False  # the deliberative answer is evaluated afresh by the hook
        return True
    data = {**reply.data, "evaluation": draft.evaluation}
    if draft.confidence is not None:
        data["confidence"] = draft.confidence
    reply.text, reply.data = draft.text, data
    outcome.confidence = draft.confidence
    return False


def _deliberate(
    turn: Turn,
    trigger: str,
    assessment: AssessOut,
    *,
    signals: list[str],
    adaptive_answer: Callable[[], Outcome],
    detail: str = "",
) -> Outcome:
    """`adaptive_answer`: the turn's answer when the token cap leaves no room for even one step
    of the loop and its synthesis (the adaptive pass's own: no second `assess`)."""
    record: dict[str, Any] = {
        "trigger": trigger,
        "signals": signals,
        "confidence": assessment.confidence,
        "threshold": turn.plan.deliberate_below_confidence,
        "complaint": assessment.complaint,
    }
    if detail:
        record["detail"] = detail
    turn.rec.step("deliberation_trigger", output=record)
    trace = turn.rec.trace
    if isinstance(trace, ReasoningTrace):
        ReasoningTrace.objects.filter(pk=trace.pk, client_id=trace.client_id).update(
            deliberation_trigger=trigger
        )
        trace.deliberation_trigger = trigger
    turn.rec.bill_as(AIMode.DELIBERATIVE)
    turn.draft_reasoning = ""
    turn.verdicts.clear()

    def undeliberated() -> Outcome:
        # No step could be made: the turn did not deliberate, and bills as such.
        turn.rec.bill_as(AIMode.AS_NEEDED)
        return adaptive_answer()

    return deliberative.run(turn, fallback=undeliberated)


MODE = Mode(
    name="as_needed",
    label=gettext_noop("Deliberate when needed — adaptive, deliberative only when it helps"),
    summary="Adaptive first (`assess`, `critique` when needed, the guards); the deliberative "
    "loop (`reason_step`, `feedback`, `synthesize`, refinement) runs only when adaptive's own "
    "signals call for depth — confidence below the plan's threshold, a `complaint` the model "
    "flags, a `critique` ESCALATE, an evaluation that questioned the draft. Only the turns "
    "that deliberate bill at the deliberative multiplier.",
    steps=(
        "assess",
        "critique",
        "compose",
        "reason_step",
        "feedback",
        "clarify",
        "synthesize",
        "refine_critique",
        "improve",
    ),
    default_multiplier=Decimal("1.5"),
    cost_rank=25,
    message_kinds=(),
    # Its adaptive draft is shown as written when nothing in it can send the turn into
    # deliberation (`_stays_as_written`); once it deliberates, only the final answer.
    streams=True,
    deliberates=Deliberation.WHEN_NEEDED,
    # A turn may deliberate: it reserves as a deliberative one.
    token_reserve=TokenReserve.DELIBERATIVE,
    color="#3f8f5b",
    help=ModeHelp(
        happens=gettext_noop(
            "Adaptive answers first; the deliberative loop runs only when that answer calls "
            "for depth: its confidence is below the plan's <em>deliberate below "
            "confidence</em> (default 7 of 10), the assistant flags a complaint or dispute, "
            "the critique would hand the conversation over, or the evaluation (when on) "
            "questions the answer. Everything else stays an adaptive answer. The usage page "
            "shows how often turns deliberated and why, and each turn's debug view says why "
            "it did."
        ),
        llm_calls=gettext_noop(
            "Like adaptive for most messages; like deliberative for the ones that deliberate"
        ),
        cost_effect=gettext_noop(
            "Between the two: a turn that deliberates is billed at the deliberative "
            "multiplier (its adaptive pass included); the others at this mode's own "
            "multiplier (default 1.5, adaptive's)."
        ),
    ),
    run=run,
)
