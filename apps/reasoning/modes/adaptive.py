"""Adaptive mode, exactly as the seed (guided-reasoning-plan) designs it.

assess (minimal context, the knowledge topics as data + self-assessment)
  └─ needs_more_context? fetch the keys — `kb:<query>` searches the knowledge base within
     REASONING_KB_TOKENS — and assess again (bounded rounds)
critique_needed()? — code, not the LLM:
  trigger: action/destructive tool (by its configured kind), confidence < 7,
           missing params, needs_confirmation (or an unknown tool)
  skip:    no tool, or a read-only tool with high confidence
critique → PROCEED | ASK_USER | ESCALATE   (a failed critique is retried once, then escalates)
guards (code) → run / ask / confirm / refuse;  a tool that ran → compose the reply
"""

from __future__ import annotations

import logging
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from apps.clients.modes import Deliberation, Mode, ModeHelp, TokenReserve
from apps.conversations.models import Kind
from apps.escalations.models import EscalationReason
from apps.knowledge import retrieval
from apps.notes.selectors import prompt_notes_for_tools
from apps.reasoning import knowledge
from apps.reasoning.context import (
    TOOL_SCHEMA_PREFIX,
    available_keys,
    fetch_context,
    history_messages,
    keys_text,
    minimal_context,
    pending_text,
    reference_message,
    split_data,
)
from apps.reasoning.guards import param_problems, params_hash
from apps.reasoning.llm import LLMError
from apps.reasoning.steps import assess, respond
from apps.reasoning.steps import critique as critique_step
from apps.reasoning.steps.assess import AssessOut
from apps.reasoning.steps.critique import CritiqueOut
from apps.reasoning.traces import pretty
from apps.reasoning.turn import (
    Escalate,
    Outcome,
    Reply,
    ShownWhen,
    Turn,
    act_on_tool_call,
    schema_for,
)
from apps.tools.models import ClientTool, ToolKind

logger = logging.getLogger(__name__)

ADAPTIVE_HISTORY = 5
# The notes block's budget in `assess` (the plan's, when smaller): about 4 lines after the
# block's header. The first call is every adaptive turn's cost (docs/benchmarks.md).
ADAPTIVE_NOTES_TOKENS = 250
MAX_KB_QUERIES_PER_ROUND = 2
CONFIDENT = 7


class CritiqueEscalated(Escalate):
    """The critique said ESCALATE ("deliberate when needed" thinks such a turn through before
    it hands over; every other caller treats it as any hand-off)."""


def critique_needed(assessment: AssessOut, tool: ClientTool | None) -> list[str]:
    """Why a critique must run (empty list = skip). The tool's configured kind decides, never
    the model's `is_destructive` claim."""
    reasons = []
    if assessment.tool_call and tool is None:
        reasons.append("unknown_tool")
    if tool is not None and tool.kind in {ToolKind.ACTION, ToolKind.DESTRUCTIVE}:
        reasons.append(f"{tool.kind}_tool")
    if assessment.confidence < CONFIDENT:
        reasons.append("low_confidence")
    if assessment.missing_params:
        reasons.append("missing_params")
    if assessment.needs_confirmation:
        reasons.append("needs_confirmation")
    return reasons


def _final_as_written(partial: dict[str, Any]) -> bool:
    """An assessment (its deciding fields, read before its `response`) whose reply goes out
    exactly as written: no tool, nothing missing or wanted, confident enough that no critique
    runs. Fields the model has not given (yet) decide nothing: the reply is then not streamed."""
    return (
        all(key in partial for key in _DECIDING)
        and respond.final_as_written(partial)
        and _confidence(partial["confidence"]) >= CONFIDENT
        and not partial["missing_params"]
        and not partial["needs_more_context"]
        and not partial["needs_confirmation"]
    )


_DECIDING = (
    "tool_call",
    "confidence",
    "missing_params",
    "needs_more_context",
    "needs_confirmation",
)


def _confidence(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def run_adaptive(turn: Turn) -> Outcome:
    return decide(turn, _assess_with_context(turn))


def decide(turn: Turn, assessment: AssessOut) -> Outcome:
    """From an assessment to the outcome: the critique trigger, the critique when triggered,
    then the guards. Deliberative mode's synthesis goes through exactly this too."""
    name, params = assessment.tool_call, assessment.tool_params
    if name is None and turn.confirmed is not None:
        # The customer said yes to exactly this action; it is still what we are deciding on.
        name, params = turn.confirmed.tool.name, turn.confirmed.params
        assessment.tool_call, assessment.tool_params = name, params
    tool = turn.tools_by_name.get(name) if name else None

    reasons = critique_needed(assessment, tool)
    if tool is not None and tool.customer_scoped and not turn.customer_verified:
        # The guards refuse it for an unverified customer whatever a critique would say: no
        # critique call (nor its possible hand-off), the sign-in reply.
        reasons = []
    turn.rec.trace.critique_reasons = reasons
    turn.draft_reasoning = (
        f"Adaptive mode: self-assessed confidence {assessment.confidence}/10; context fetched: "
        f"{', '.join(turn.rec.trace.context_fetched) or 'none'}; critique: "
        f"{', '.join(reasons) or 'not needed'}."
    )
    if not reasons:
        outcome = act_on_tool_call(
            turn,
            name=name,
            params=params,
            draft=assessment.response,
            asked_by_model=bool(assessment.missing_params),
        )
        outcome.confidence = assessment.confidence
        return outcome

    turn.rec.trace.critique_triggered = True
    critique = _critique(turn, assessment, tool, reasons)
    turn.draft_reasoning += f" Critique {critique.decision}: {critique.reasoning}"
    if critique.decision == "ESCALATE":
        reason = (
            EscalationReason.LOW_CONFIDENCE
            if "low_confidence" in reasons
            else EscalationReason.POLICY
        )
        raise CritiqueEscalated(reason, critique.message or critique.reasoning)
    if critique.decision == "PROCEED" and _below_floor(turn, assessment):
        outcome = _floor_outcome(turn, assessment, tool)
        outcome.confidence = assessment.confidence
        return outcome
    outcome = act_on_tool_call(
        turn,
        name=name,
        params=params,
        draft=assessment.response,
        asked_by_model=bool(assessment.missing_params) or critique.decision == "ASK_USER",
        may_run=critique.decision == "PROCEED",
        hold_message=critique.message if critique.decision == "ASK_USER" else "",
    )
    outcome.confidence = assessment.confidence
    return outcome


def _below_floor(turn: Turn, assessment: AssessOut) -> bool:
    """The critique said PROCEED, but the draft's own confidence is at or below
    `REASONING_CRITIQUE_FLOOR`: the checklist's "confidence below 6 → escalate or ask" then
    holds in code. An action the customer has just confirmed (these exact params) is not held
    back: their "yes" is the evidence, and the guards still decide."""
    if assessment.confidence > settings.REASONING_CRITIQUE_FLOOR:
        return False
    confirmed = turn.confirmed
    return not (
        confirmed is not None
        and assessment.tool_call == confirmed.tool.name
        and params_hash(assessment.tool_params) == confirmed.params_hash
    )


def _floor_outcome(turn: Turn, assessment: AssessOut, tool: ClientTool | None) -> Outcome:
    """Below the floor: a clarifying question when the draft lacks what is needed to act (its
    tool's params, or any reply at all), else a hand-off. Recorded as the trace step
    `critique_floor`; no tool runs."""
    missing: list[str] = list(assessment.missing_params)
    problems: list[str] = []
    if tool is not None:
        schema_missing, problems = param_problems(tool, assessment.tool_params)
        missing = sorted(set(missing) | set(schema_missing))
    no_intent = not assessment.tool_call and not assessment.response.strip()
    action = "clarify" if missing or problems or no_intent else "handoff"
    record = {
        "decision": "PROCEED",
        "confidence": assessment.confidence,
        "floor": settings.REASONING_CRITIQUE_FLOOR,
        "action": action,
        "tool": assessment.tool_call,
        "missing_params": missing,
        "problems": problems,
    }
    turn.rec.step("critique_floor", output=record)
    turn.rec.internal(
        Kind.GUARD,
        f"{action.upper()}: critique said PROCEED at confidence {assessment.confidence}/10 "
        f"(floor {settings.REASONING_CRITIQUE_FLOOR})",
        record,
    )
    if action == "handoff":
        raise Escalate(
            EscalationReason.LOW_CONFIDENCE,
            f"the critique said PROCEED on a draft at confidence {assessment.confidence}/10 "
            f"(floor {settings.REASONING_CRITIQUE_FLOOR})",
        )
    turn.verdicts.append("ask")
    if tool is not None and missing:
        needed = ", ".join(m.replace("_", " ") for m in missing)
        question = _("To help with that I need a few details: %(needed)s. Could you tell me?") % {
            "needed": needed
        }
    else:
        question = _("Could you tell me a little more about what you need, so I get it right?")
    return Outcome([Reply(question, kind=Kind.CLARIFICATION, data={"options": []})])


def _assess_with_context(turn: Turn, shown_when: ShownWhen | None = None) -> AssessOut:
    """`shown_when`: when an assessment goes out as written (adaptive's own rule by default;
    "deliberate when needed" asks for more — nothing that would make it deliberate)."""
    topics, has_kb = retrieval.knowledge_summary(client=turn.client)
    keys = available_keys(turn.enabled_tools, knowledge=has_kb)
    fetched: dict[str, str] = {}
    asked: set[str] = set()
    history = history_messages(turn.history[-ADAPTIVE_HISTORY:])
    rounds = 0
    notes = _AssessNotes()
    context = minimal_context(
        client=turn.client, tools=turn.enabled_tools, name=False, signin_tools=turn.signin_tools
    )
    # The topics are article titles and tags — knowledge, so data, never the system message.
    reference = knowledge.topics_message(topics)
    # What the model reads, its first line's business name included (the evaluation's sources).
    turn.add_source("minimal context", f"Business: {turn.client.name}\n{context}")
    while True:
        configured, faqs = split_data(fetched)  # FAQs are knowledge: data
        messages = assess.prompt(
            keys=keys_text(keys),
            context=context,
            fetched="".join(f"\n## {k}\n{v}\n" for k, v in configured.items()),
            pending=pending_text(turn.confirmed, turn.declined),
            history=history,
            notes=notes.read(turn, fetched),
            knowledge=[
                *reference_message(faqs),
                *knowledge.knowledge_message(turn.knowledge),
            ],
            kb=has_kb,
            business=turn.client.name,
            reference=reference,
        )
        result = turn.llm(
            assess.STEP,
            messages,
            shown_when=shown_when or _final_as_written,
            business_info=turn.business_info,
            fetched=sorted([*fetched, *asked]),
            available_keys=keys,
            knowledge=knowledge.demo_facts(turn),
            kb=has_kb,
        )
        assessment = result.parsed
        turn.rec.internal(
            "assessment",
            f"confidence {assessment.confidence}/10 · tool {assessment.tool_call or '—'} "
            f"{pretty(assessment.tool_params) if assessment.tool_call else ''}".strip(),
            assessment.model_dump(),
        )
        wanted = [k for k in assessment.needs_more_context if k not in fetched and k not in asked]
        if not wanted or rounds >= settings.REASONING_MAX_CONTEXT_ROUNDS:
            return assessment
        found, searched = _fetch_wanted(turn, wanted, asked)
        if not found and not searched:
            return assessment  # nothing new to assess with (a search that found nothing is news)
        fetched.update(found)
        for key, text in found.items():
            turn.add_source(key, text)
        turn.rec.trace.context_fetched = sorted([*fetched, *asked])
        rounds += 1


def _fetch_wanted(turn: Turn, wanted: list[str], asked: set[str]) -> tuple[dict[str, str], bool]:
    """Fetch the context sections an assessment asked for and search the knowledge base for its
    `kb:` keys (added to `asked`; the excerpts go to `turn.knowledge`), and record the fetch.
    Returns the sections found and whether the knowledge base was searched."""
    kb_keys = [k for k in wanted if knowledge.is_kb_key(k)][:MAX_KB_QUERIES_PER_ROUND]
    other = [k for k in wanted if not knowledge.is_kb_key(k)]
    found, unknown = fetch_context(client=turn.client, tools=turn.enabled_tools, keys=other)
    chunks = 0
    for key in kb_keys:
        asked.add(key)
        hits = knowledge.fetch(
            turn,
            query=knowledge.kb_query(key),
            token_budget=settings.REASONING_KB_TOKENS,
            purpose="assess",
        )
        chunks += len(hits)
    record = {
        "fetched": sorted(found),
        "unknown": unknown,
        "kb": [knowledge.kb_query(k) for k in kb_keys],
        "chunks": chunks,
    }
    turn.rec.step("context_fetch", input_summary=", ".join(wanted), output=record)
    turn.rec.internal(
        "context_fetch",
        f"fetched {', '.join(sorted(found)) or 'nothing'}"
        + (f"; knowledge: {chunks} excerpt(s)" if kb_keys else "")
        + (f"; unknown keys: {', '.join(unknown)}" if unknown else ""),
        record,
    )
    return found, bool(kb_keys)


class _AssessNotes:
    """The notes block of each `assess` call of a turn (`prompt_notes_for_tools`): within
    `ADAPTIVE_NOTES_TOKENS`, and the automatic success records about a tool only once that tool
    is in play — its schema fetched, or a confirmation about it being answered. Recorded as the
    trace step `notes` (note ids, tokens) whenever the block changes. A simulation's own notes
    (`Turn.notes_reader`) are used as they are."""

    def __init__(self) -> None:
        self.ids: list[int] | None = None
        self.text = ""

    def read(self, turn: Turn, fetched: dict[str, str]) -> str:
        if turn.notes_reader is not None:
            return turn.notes_prompt()
        in_play = {
            k.removeprefix(TOOL_SCHEMA_PREFIX) for k in fetched if k.startswith(TOOL_SCHEMA_PREFIX)
        }
        in_play |= {p.tool.name for p in (turn.confirmed, turn.declined) if p is not None}
        try:
            text, ids = prompt_notes_for_tools(
                client=turn.client,
                plan=turn.plan,
                language=turn.language,
                tool_names={t.name for t in turn.enabled_tools},
                in_play=in_play,
                budget_tokens=ADAPTIVE_NOTES_TOKENS,
            )
        except Exception:  # notes are an aid: the turn goes on without them
            logger.exception("reading notes for trace %s failed", turn.rec.trace.pk)
            text, ids = "", []
        if ids != self.ids:
            turn.record_notes(text, ids)
        self.ids, self.text = ids, text
        return text


# "Deliberate when needed" (modes/as_needed.py) assesses as adaptive does, then decides itself.
assess_with_context = _assess_with_context
# Deliberative mode's synthesis (assess-shaped, through `decide`) goes out as written on the
# same deciding fields, when no refinement follows it.
final_as_written = _final_as_written


def _critique(
    turn: Turn, assessment: AssessOut, tool: ClientTool | None, reasons: list[str]
) -> CritiqueOut:
    messages = critique_step.prompt(
        user_message=turn.user_message.text,
        tool_name=assessment.tool_call or "none",
        tool_kind=tool.kind if tool else "unknown",
        params=pretty(assessment.tool_params),
        schema=schema_for(tool),
        tool_list=", ".join(t.name for t in turn.enabled_tools) or "none",
        draft=assessment.response,
        confidence=assessment.confidence,
        reasons=", ".join(reasons),
        pending=pending_text(turn.confirmed, turn.declined),
    )
    try:
        result = turn.llm(
            critique_step.STEP,
            messages,
            assessment=assessment.model_dump(),
            reasons=reasons,
            tool_kind=tool.kind if tool else None,
        )
    except LLMError as exc:
        raise Escalate(
            EscalationReason.LLM_FAILURE, f"critique failed twice ({exc.kind}): {exc.message}"
        ) from exc
    critique = result.parsed
    turn.rec.internal(
        "critique",
        f"{critique.decision}: {critique.reasoning}",
        {**critique.model_dump(), "reasons": reasons},
    )
    return critique


MODE = Mode(
    name="adaptive",
    label=gettext_noop("Adaptive — self-assessment, critique only when needed"),
    summary="`assess` on a minimal context (the knowledge topics as data), more context on demand "
    "(`kb:<query>` searches the knowledge base), a `critique` only when "
    "`critique_needed()` (code) says so, then the guards; `compose` after a tool ran.",
    steps=("assess", "critique", "compose"),
    default_multiplier=Decimal("1.5"),
    cost_rank=20,
    message_kinds=(Kind.ASSESSMENT, Kind.CONTEXT_FETCH, Kind.CRITIQUE),
    # A confident draft with no tool call that wants nothing more goes out as written.
    streams=True,
    deliberates=Deliberation.NEVER,
    token_reserve=TokenReserve.TURN,
    color="#e39b2d",
    help=ModeHelp(
        happens=gettext_noop(
            "One call with a short context and a self-assessment; policies and tool details "
            "are fetched only when needed; a second <em>critique</em> call checks risky "
            "actions (action/destructive tools, low confidence, missing details) and decides "
            "proceed / ask the customer / hand over to a human."
        ),
        llm_calls=gettext_noop("1 for simple questions, 2–3 for risky or policy questions"),
        cost_effect=gettext_noop(
            "Usually <em>cheaper</em> per message than standard (≈ 600 instead of 2,000 input "
            "tokens for simple questions); risky actions cost a little more."
        ),
        note=gettext_noop("(recommended)"),
    ),
    run=run_adaptive,
)
