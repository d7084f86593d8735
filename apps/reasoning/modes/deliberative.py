"""Deliberative mode — for plans that buy depth (seeds: dharma-feedback-loop,
iterative-refinement, thinking-scaffolding).

a "yes"/"no" to a pending action?  → synthesize at once (no loop) → adaptive's decision path
reasoning loop (deliberation/loop.py): reason_step → feedback → … MIN ≤ steps ≤ MAX, TARGET
  └─ step 1's top two hypotheses within 0.15?  → clarify: one question, options as quick
     replies; the loop does not go on
synthesize (assess-shaped) → adaptive's decision path: critique trigger, critique, guards
  └─ a plain text answer → refinement ×N: refine_critique → improve on the most recent version,
     best-scoring version kept, early stop at the plan's score (deliberation/refinement.py)
deliberation_end: termination, steps, best iteration, final score

The mode uses only the turn's public interface (`turn.llm`, `turn.rec.step/internal`, the
client, plan, tools, history), so it also runs outside a conversation (the playground,
`manage.py reason`). Every call goes through the meter (per-turn cap, monthly budget, usage at
the plan's deliberative multiplier); a limit ends the loop with the best answer so far
(`budget`); a staff takeover stops it at the next call (`staff_takeover`)."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.utils.translation import gettext, gettext_noop

from apps.clients.models import AIMode
from apps.clients.modes import Deliberation, Mode, ModeHelp, TokenReserve
from apps.conversations.models import Kind, Role
from apps.reasoning import knowledge
from apps.reasoning.context import (
    fetch_context,
    history_messages,
    pending_text,
    reference_message,
)
from apps.reasoning.deliberation import refinement
from apps.reasoning.deliberation.config import DeliberationConfig, deliberation_config
from apps.reasoning.deliberation.context import (
    DeliberativeContext,
    deliberative_context,
    fetched_message,
    knowledge_message,
)
from apps.reasoning.deliberation.loop import BUDGET_ERRORS, LoopResult, run_loop
from apps.reasoning.deliberation.termination import Termination
from apps.reasoning.llm import LLMError
from apps.reasoning.meter import TokenCapExceeded
from apps.reasoning.modes.adaptive import decide, final_as_written, run_adaptive
from apps.reasoning.steps import clarify as clarify_step
from apps.reasoning.steps import improve as improve_step
from apps.reasoning.steps import refine_critique, shared_prefix, synthesize
from apps.reasoning.steps.assess import AssessOut
from apps.reasoning.traces import TurnAborted
from apps.reasoning.turn import Escalate, Outcome, Reply, Turn

CLOSE_HYPOTHESES = 0.15
# The customer messages the context's sections are chosen for (the last one and the one before,
# for a short follow-up such as "and for boots?").
CONTEXT_QUERY_MESSAGES = 2


def hypotheses_too_close(hypotheses: list[dict[str, Any]]) -> bool:
    """The top two readings of the message are within 0.15 of each other."""
    ranked = sorted((float(h.get("confidence", 0)) for h in hypotheses), reverse=True)
    return len(ranked) >= 2 and ranked[0] - ranked[1] <= CLOSE_HYPOTHESES + 1e-9


def _just_clarified(turn: Turn) -> bool:
    """The assistant's last message was a clarifying question: this message answers it, so the
    turn reasons instead of asking again."""
    for message in reversed(turn.history[:-1]):
        if message.role in ("assistant", "staff"):
            return message.kind == Kind.CLARIFICATION
    return False


@dataclass
class _Setup:
    """What every call of a deliberation shares: its configuration, its context (and the
    sections the synthesis asks for later, `extra`) and the prefix each call begins with."""

    config: DeliberationConfig
    scope: DeliberativeContext
    extra: dict[str, str]
    prefix: Callable[[], list[dict[str, str]]]


@dataclass
class _Progress:
    """How far the deliberation got: what `run` records when it ends, however it ends."""

    loop: LoopResult = field(
        default_factory=lambda: LoopResult(steps=[], termination=Termination.ERROR)
    )
    refined: refinement.Refined | None = None
    outcome: Outcome = field(default_factory=Outcome)
    clarification: Outcome | None = None
    no_step: bool = False


def run(turn: Turn, *, fallback: Callable[[], Outcome] | None = None) -> Outcome:
    """`fallback`: the answer when the turn's token cap leaves no room even for the loop's
    first step and the synthesis after it — by default adaptive mode's (`run_adaptive`);
    "deliberate when needed" passes the outcome its adaptive pass already has."""
    setup = _prepare(turn)
    config, scope, extra = setup.config, setup.scope, setup.extra
    if turn.confirmed is not None or turn.declined is not None:
        # The customer answered a confirmation: nothing to deliberate, the guards decide.
        turn.rec.step("deliberation_skipped", output={"reason": "answer to a confirmation"})
        return decide(
            turn, _synthesize(turn, scope, extra, prefix=setup.prefix, transcript=[], final=True)
        )
    progress = _Progress()
    try:
        _deliberate(turn, setup, progress)
    except TurnAborted:
        _end(turn, config, progress.loop, Termination.STAFF_TAKEOVER, None, scope, extra)
        raise
    except BUDGET_ERRORS:
        # The synthesis could not be made.
        _end(turn, config, progress.loop, Termination.BUDGET, None, scope, extra)
        raise
    except Escalate:
        # The critique (or a tool's failure) hands over: the loop itself ended as recorded.
        termination = progress.loop.termination or Termination.ERROR
        _end(turn, config, progress.loop, termination, None, scope, extra)
        raise
    except LLMError:
        _end(turn, config, progress.loop, Termination.ERROR, None, scope, extra)
        raise
    if progress.clarification is not None:
        return progress.clarification
    if progress.no_step:
        return _without_loop(turn, setup, progress.loop, fallback)
    # A loop ends without a termination only when it asks its clarifying question (above).
    termination = progress.loop.termination or Termination.ERROR
    _end(turn, config, progress.loop, termination, progress.refined, scope, extra)
    return progress.outcome


def _prepare(turn: Turn) -> _Setup:
    """The deliberation's configuration and context, and the knowledge-base chunks for the
    message; from now on only its final answer may be shown as it is written."""
    # A playground run may choose the rubric and the refinement iterations (PlaygroundTurn).
    config = deliberation_config(
        client=turn.client,
        plan=turn.plan,
        rubric=getattr(turn, "rubric_name", "") or None,
        refinement_iterations=getattr(turn, "refinement_iterations", None),
    )
    # Only this deliberation's final answer may now be shown as it is written (`_synthesize`
    # with `final`, the kept last improvement): everything else shows progress.
    turn.deliberating = True
    # Only the sections the message needs (deliberation/context.py), the others named and asked
    # for by key; keys adaptive already fetched ("deliberate when needed") are kept.
    fetched_before = getattr(getattr(turn.rec, "trace", None), "context_fetched", None) or []
    scope = deliberative_context(
        client=turn.client,
        tools=turn.enabled_tools,
        signin_tools=turn.signin_tools,
        query=_context_query(turn),
        wanted=[k for k in fetched_before if not knowledge.is_kb_key(k)],
    )
    context = scope.text
    # The client's cross-session notes (apps.notes), if any: a data block of the loop's steps
    # and the synthesis, never part of the context (which is the business's own word, and what
    # the refinement's critic judges against).
    notes = turn.notes_prompt()
    pending = pending_text(turn.confirmed, turn.declined)
    turn.add_source("deliberative context (business info and tools)", context)  # evaluation
    for key, text in scope.data.items():  # knowledge sections, sent as data
        turn.add_source(key, text)
    # The knowledge-base chunks for the message (the synthesis may ask for more with `kb:`).
    knowledge.fetch(
        turn,
        query=turn.user_message.text,
        token_budget=settings.REASONING_STANDARD_KB_TOKENS,
        purpose="deliberate",
        min_share_of_best=settings.REASONING_DELIBERATIVE_KB_MIN_SHARE,
    )

    # Every call of the turn begins with this prefix (docs/llm-protocol.md, "Message layout").
    def prefix() -> list[dict[str, str]]:
        return shared_prefix(
            context=context,
            history=history_messages(turn.history),
            notes=notes,
            pending=pending,
            knowledge=knowledge_message(turn.knowledge),
            reference=reference_message(scope.data),
        )

    # Sections the synthesis asked for (`needs_more_context`): after the loop, in every later
    # call (the refinement's critic judges against them too).
    return _Setup(config=config, scope=scope, extra={}, prefix=prefix)


def _deliberate(turn: Turn, setup: _Setup, progress: _Progress) -> None:
    """The loop, then — unless it asks one clarifying question or had no room for a step —
    the synthesis through adaptive's decision path and the refinement rounds."""
    config = setup.config
    may_ask = not _just_clarified(turn)
    progress.loop = loop = run_loop(
        turn,
        config,
        run_id=str(uuid.uuid4()),
        prefix=setup.prefix(),
        ask_first=lambda entry: may_ask and hypotheses_too_close(entry.hypotheses),
    )
    if loop.termination is None:
        progress.clarification = _clarify(turn, loop)
        return
    if not loop.steps:
        # No room for one step and the answer after it: answered without the loop.
        progress.no_step = True
        return
    assessment = _synthesize(
        turn,
        setup.scope,
        setup.extra,
        prefix=setup.prefix,
        transcript=loop.transcript,
        final=config.refinement_iterations <= 0,  # no refinement can replace it
    )
    outcome = progress.outcome = decide(turn, assessment)
    turn.draft_reasoning = (
        f"Deliberative mode: {len(loop.steps)} reasoning step(s) scored against the "
        f"{config.rubric} rubric (final mean {loop.final_mean}, {loop.termination}); "
        f"synthesis confidence {assessment.confidence}/10. " + turn.draft_reasoning
    )
    if _refinable(outcome, assessment) and config.refinement_iterations > 0:
        more = fetched_message(setup.extra) if setup.extra else []
        refined = progress.refined = _refine(
            turn, config, prefix=[*setup.prefix(), *more], draft=assessment.response
        )
        outcome.replies[0] = Reply(refined.text, data=outcome.replies[0].data)
        if refined.failure is not None and refined.failure.budget:
            loop.termination = Termination.BUDGET
    # What the customer read as it was written is the answer; if not, it is taken back.
    turn.take_back_shown(outcome.replies[0].text if outcome.replies else "")


def _without_loop(
    turn: Turn, setup: _Setup, loop: LoopResult, fallback: Callable[[], Outcome] | None
) -> Outcome:
    """No room for a reasoning step: the adaptive path answers (the loop has ended as
    recorded; its failures are the adaptive path's own)."""
    turn.rec.step(
        "deliberation_skipped",
        output={"reason": "no room for a reasoning step", "detail": loop.detail},
    )
    _end(turn, setup.config, loop, Termination.BUDGET, None, setup.scope, setup.extra)
    if fallback is not None:
        return fallback()
    # Billed as adaptive, as a turn the limits run adaptive (`deliberative_cap`).
    turn.rec.bill_as(AIMode.ADAPTIVE)
    return run_adaptive(turn)


def _context_query(turn: Turn) -> str:
    """The conversation's last customer messages (this one last): what the context's
    sections are scored against."""
    texts = [m.text for m in turn.history if m.role == Role.USER and m.text]
    current = turn.user_message.text
    if not texts or texts[-1] != current:
        texts.append(current)
    return "\n".join(texts[-CONTEXT_QUERY_MESSAGES:])


def _end(
    turn: Turn,
    config: DeliberationConfig,
    loop: LoopResult,
    termination: Termination,
    refined: refinement.Refined | None,
    scope: DeliberativeContext | None = None,
    extra: dict[str, str] | None = None,
) -> None:
    turn.rec.step(
        "deliberation_end",
        output={
            "termination": str(termination),
            "detail": loop.detail,
            "steps": len(loop.steps),
            "best_iteration": refined.best_iteration if refined else 0,
            "stopped_early": refined.stopped_early if refined else False,
            "final_score": loop.final_mean,
            "refinement_score": refined.best_score if refined else None,
            "context": scope.included if scope else [],
            "context_asked": sorted(extra or {}),
            **config.as_data(),
        },
    )


def _synthesize(
    turn: Turn,
    scope: DeliberativeContext,
    extra: dict[str, str],
    *,
    prefix: Callable[[], list[dict[str, str]]],
    transcript: list[dict[str, str]],
    final: bool = False,
) -> AssessOut:
    """The synthesis; when it asks for keys in `needs_more_context` — `kb:<query>` (the
    knowledge base is searched, REASONING_KB_TOKENS each) or a section the context named but did
    not give (`policies.shipping`, `tool_schema:<name>`: added to `extra`, sent after the loop's
    transcript so the loop stays a cached prefix) — the synthesis is written again with them, at
    most REASONING_MAX_CONTEXT_ROUNDS times, within the turn's token cap like every call (a
    round the cap refuses leaves the synthesis already written as the answer, when it has one).
    `final`: no refinement follows, so a synthesis whose deciding fields (read before its
    `response`) mean no critique, tool or context round is the answer, shown while it is
    written."""
    asked: set[str] = set()
    rounds = 0
    written: AssessOut | None = None  # the synthesis before this round's
    while True:
        # `prefix()` carries the knowledge-base excerpts fetched so far (more after a `kb:` ask).
        more = fetched_message(extra) if extra else []
        messages = synthesize.prompt(prefix=prefix(), transcript=[*transcript, *more])
        try:
            result = turn.llm(
                synthesize.STEP,
                messages,
                shown_when=final_as_written if final else None,
                business_info=turn.business_info,
                knowledge=knowledge.demo_facts(turn),
            )
        except TokenCapExceeded as exc:
            if written is None or not (written.response.strip() or written.tool_call):
                raise
            # No room to write it again with what it asked for: the answer it wrote stands.
            turn.rec.step("budget", output={"before_synthesis_round": rounds, "reason": exc.detail})
            return written
        assessment = written = result.parsed
        turn.rec.internal(
            "assessment",
            f"synthesis · confidence {assessment.confidence}/10 · "
            f"tool {assessment.tool_call or '—'}",
            {**assessment.model_dump(), "step": "synthesize"},
        )
        wanted = [k.strip() for k in assessment.needs_more_context if k.strip() not in asked]
        kb_keys = [k for k in wanted if knowledge.is_kb_key(k)][:2]
        sections = [k for k in wanted if k in scope.available and k not in extra]
        if not (kb_keys or sections) or rounds >= settings.REASONING_MAX_CONTEXT_ROUNDS:
            return assessment
        for key in kb_keys:
            asked.add(key)
            knowledge.fetch(
                turn,
                query=knowledge.kb_query(key),
                token_budget=settings.REASONING_KB_TOKENS,
                purpose="synthesize",
                min_share_of_best=settings.REASONING_DELIBERATIVE_KB_MIN_SHARE,
            )
        if sections:
            asked.update(sections)
            found, _ = fetch_context(client=turn.client, tools=turn.enabled_tools, keys=sections)
            extra.update(found)
            for key, text in found.items():
                turn.add_source(key, text)
        turn.rec.trace.context_fetched = sorted({*turn.rec.trace.context_fetched, *asked})
        rounds += 1


def _refinable(outcome: Outcome, assessment: AssessOut) -> bool:
    """Only the model's own plain answer is refined — never a confirmation request, a guard's
    question, a tool's result or a hand-off."""
    return (
        outcome.escalate is None
        and len(outcome.replies) == 1
        and outcome.replies[0].kind == Kind.TEXT
        and outcome.replies[0].text == assessment.response
        and not assessment.tool_call
        and bool(assessment.response.strip())
    )


def _refine(
    turn: Turn, config: DeliberationConfig, *, prefix: list[dict[str, str]], draft: str
) -> refinement.Refined:
    def critic(
        state: refinement.Draft | refinement.FinalSpec, iteration: int
    ) -> refinement.Verdict:
        messages = refine_critique.prompt(prefix=prefix, text=state.text, iteration=iteration)
        out = turn.llm(
            refine_critique.STEP,
            messages,
            extra={"iteration": iteration, "of_iteration": state.iteration},
            text=state.text,
            iteration=iteration,
        ).parsed
        return refinement.Verdict(score=out.score, issues=out.issues, critique=out.critique)

    def improver(
        state: refinement.Draft | refinement.FinalSpec,
        critique: refinement.Critique,
        iteration: int,
        shown: bool = False,
    ) -> str:
        issues = "\n".join(
            f'- [{i["kind"]}] "{i["quote"]}": {i["problem"]}' for i in critique.issues
        )
        messages = improve_step.prompt(
            prefix=prefix,
            text=state.text,
            score=critique.score,
            critique=critique.text,
            issues=issues,
        )
        out = turn.llm(
            improve_step.STEP,
            messages,
            shown_when=_as_written if shown else None,
            extra={"iteration": iteration},
            text=state.text,
            issues=list(critique.issues),
        ).parsed
        return out.response

    def journal(state: refinement.ReasoningState | refinement.Failure, iteration: int) -> None:
        output: dict[str, Any]
        if isinstance(state, refinement.Failure):
            output = {"state": state.stage, "iteration": iteration, "failure": state.message}
            text = f"Refinement stopped at iteration {iteration}: {state.message}"
        elif isinstance(state, refinement.Critique):
            output = {
                "state": "critique",
                "iteration": iteration,
                "score": state.score,
                "issues": list(state.issues),
                "critique": state.text,
            }
            text = f"Critique {iteration} · {state.score}/100 · {len(state.issues)} issue(s)"
        else:
            output = {"state": state.kind, "iteration": iteration, "text": state.text}
            label = "Draft" if isinstance(state, refinement.Draft) else f"Improved {iteration}"
            text = f"{label}: {state.text}"
        turn.rec.step("refinement", output=output)
        turn.rec.internal("refinement", text, output)

    return refinement.refine(
        draft,
        iterations=config.refinement_iterations,
        stop_score=config.refinement_stop_score,
        critic=critic,
        improver=improver,
        on_event=journal,
        # The last improvement, when it is the version kept: shown while it is written.
        final_improver=functools.partial(improver, shown=True),
    )


def _as_written(partial: dict[str, Any]) -> bool:
    """An improvement has no deciding fields: when it is made to be sent, it goes out as
    written."""
    return True


def _clarify(turn: Turn, loop: LoopResult) -> Outcome:
    hypotheses = loop.hypotheses
    messages = clarify_step.prompt(
        business=turn.client.name, user_text=turn.user_message.text, hypotheses=hypotheses
    )
    out = turn.llm(
        clarify_step.STEP,
        messages,
        extra={"hypotheses": hypotheses},
        hypotheses=hypotheses,
    ).parsed
    options = out.options or [str(h["intent"])[:60] for h in hypotheses[:4]]
    question = out.question or gettext("Could you tell me a little more about what you need?")
    return Outcome([Reply(question, kind=Kind.CLARIFICATION, data={"options": options})])


MODE = Mode(
    name="deliberative",
    label=gettext_noop("Deliberative — scored reasoning steps, feedback and refinement"),
    summary="A server-controlled loop of scored `reason_step`s with `feedback` (or one `clarify` "
    "question), a `synthesize`d answer through adaptive's critique and guards, then "
    "`refine_critique` → `improve` rounds.",
    steps=(
        "reason_step",
        "feedback",
        "clarify",
        "synthesize",
        "critique",
        "compose",
        "refine_critique",
        "improve",
    ),
    default_multiplier=Decimal("2.5"),
    cost_rank=30,
    message_kinds=(
        Kind.REASONING_STEP,
        Kind.FEEDBACK,
        Kind.REFINEMENT,
        Kind.CLARIFICATION,
        Kind.ASSESSMENT,  # its tool calls go through the adaptive guards and critique
        Kind.CONTEXT_FETCH,
        Kind.CRITIQUE,
    ),
    # Its draft is never final as written (refinement may replace it); the call after which
    # nothing can replace the answer streams it (`Turn.deliberating`).
    streams=False,
    deliberates=Deliberation.ALWAYS,
    token_reserve=TokenReserve.DELIBERATIVE,
    color="#7b5ea7",
    help=ModeHelp(
        happens=gettext_noop(
            "For clients who buy depth (complaints, disputes, policy edge cases): the "
            "assistant reasons in scored steps against the plan's <em>rubric</em>, a second "
            "call gives feedback after each step, then it writes the answer and refines it "
            "(critique → improve, the best-scoring version is sent). When two readings of a "
            "message are too close it asks one clarifying question instead. Tools go through "
            "the same critique and guards as adaptive."
        ),
        llm_calls=gettext_noop(
            "MIN–MAX steps × 2 (default 4–10) + 1 answer + 2 per refinement round (default 2)"
        ),
        cost_effect=gettext_noop(
            "The most expensive mode (≈ 10–25 calls per message); billed at the deliberative "
            "multiplier."
        ),
    ),
    run=run,
)
