"""The evaluation layer (seed: evaluation-layer-and-notes): a second opinion on knowledge
answers, as the built-in post-draft hook `evaluate` (switched by `Plan.evaluation_enabled`).

After a knowledge answer — no tool ran, or only read-only tools did — the `evaluate` step
(`apps/reasoning/steps/evaluate.py`) gets the customer's message, the draft with its confidence
and how it was made, and the source text the draft relied on (`Turn.sources`). Its verdict is
applied by `apply_evaluation`, the seed's rules in code:

    an improved answer with higher confidence than the draft  → it replaces the draft
    else the draft is validated                               → confidence × 1.1 (max 100 %)
    else the draft is questioned                              → confidence × 0.7
    else (the reviewer could not decide)                      → the draft is kept
    the call failed, or returned something unusable           → the draft is sent unchanged

An improved reply replaces the draft only if it passes the checks a draft passes
(`improvement_problem`): it is a plain reply in the turn's language, and it is grounded, claim
by claim, in the source text given to the reviewer (`apps.reasoning.grounding`): every figure
(amounts, durations, order numbers) and every link, domain or e-mail address in it occurs
verbatim in that source text; every sentence or clause is made of what the source says (its
words found there for at least 75 % of the claim's letters, inflections and Hebrew/Arabic joined
prefixes allowed — "returns are accepted at any time", "plus a store voucher" are refused when
the source says "within 30 days"); and it names no action of the client's action/destructive
tools that the draft or the business's text did not (none ran: an evaluated answer is a
knowledge answer). The tools' own descriptions ground nothing, nor does the draft (the draft is
what is being checked). Otherwise the draft is kept — the default whenever a claim has no
source —, the rules go on as if no improvement had been offered, and the reason, quoting the
unsupported claim, is recorded (`improvement_rejected` on the `evaluation` message and the
trace step `improvement_rejected`). The customer's own message is not a source: a customer who
writes a fake "SOURCE TEXT" cannot ground anything.

A questioned answer whose confidence falls below `Plan.evaluation_escalate_below` goes to a
person instead of the customer (the draft stays on the trace).

Confidence scale: the evaluation works in percent (0–100). A draft's confidence is the mode's
1–10 self-assessment × 10 (`assess`: 8 → 80 %); standard mode's `respond` gives none and counts
as `STANDARD_DRAFT_CONFIDENCE` (70 %, adaptive's "confident" line). The reply's `confidence`
(1–10) becomes the evaluated percent / 10, rounded (at least 1).

Never evaluated: confirmation requests, questions the guards asked, refusals, hand-offs, and
answers after an action or destructive tool ran. Not evaluated either (the seed's thresholds):
drafts of at most `Plan.evaluation_min_chars` characters or below
`Plan.evaluation_min_confidence` %.

Recorded: the LLM call as trace step `evaluate` (billed as step `evaluate` under the turn's
mode), an internal `evaluation` message whose `data` holds `outcome` (validated | questioned |
improved | kept | failed), `confidence_before`, `confidence_after` (0–100), `escalated` and the
details, and `ReasoningTrace.evaluation_outcome` (what the usage reports count).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from apps.conversations.models import Kind
from apps.core.deadlines import DeadlineExceeded
from apps.core.languages import detect, language_name
from apps.escalations.models import EscalationReason
from apps.reasoning import grounding
from apps.reasoning.context import TOOL_SCHEMA_PREFIX, tool_line, tool_schema_text
from apps.reasoning.hooks import EVALUATE, Draft, post_draft_hook
from apps.reasoning.llm import LLMError
from apps.reasoning.meter import TokenCapExceeded
from apps.reasoning.models import ReasoningTrace
from apps.reasoning.steps import evaluate as evaluate_step
from apps.reasoning.steps.evaluate import EvaluateOut
from apps.reasoning.traces import TurnAborted
from apps.tools.models import ToolKind

if TYPE_CHECKING:
    from apps.reasoning.turn import Turn

__all__ = [
    "OUTCOMES",
    "STANDARD_DRAFT_CONFIDENCE",
    "Verdict",
    "apply_evaluation",
    "improvement_problem",
    "percent_from_draft",
    "skip_reason",
    "ungrounded_figures",
]

logger = logging.getLogger(__name__)

OUTCOMES = ("validated", "questioned", "improved", "kept", "failed")
STANDARD_DRAFT_CONFIDENCE = 70
MAX_SOURCE_CHARS = 16_000  # what the reviewer reads of the sources (the full context fits)


@dataclass(frozen=True)
class Verdict:
    """What the seed's rules make of one evaluation."""

    outcome: str  # one of OUTCOMES
    text: str  # the reply to send
    confidence_before: int  # 0–100
    confidence_after: int  # 0–100

    @property
    def replaced(self) -> bool:
        return self.outcome == "improved"


def _scaled(confidence: int, tenths: int) -> int:
    """confidence × tenths / 10, rounded half up, within 0–100 (integer arithmetic)."""
    return max(0, min(100, (confidence * tenths + 5) // 10))


def apply_evaluation(*, draft: str, confidence: int, result: EvaluateOut | None) -> Verdict:
    """The seed's rules (pure): `result=None` means the evaluation failed."""
    before = max(0, min(100, int(confidence)))
    if result is None:
        return Verdict("failed", draft, before, before)
    improved = (result.improved_response or "").strip()
    if improved and improved != draft.strip() and result.improved_confidence > before:
        return Verdict("improved", improved, before, result.improved_confidence)
    if result.valid is True:
        return Verdict("validated", draft, before, _scaled(before, 11))
    if result.valid is False:
        return Verdict("questioned", draft, before, _scaled(before, 7))
    return Verdict("kept", draft, before, before)


_WORD = re.compile(r"[^\W\d_]{4,}")


def ungrounded_figures(text: str, grounds: str) -> list[str]:
    """The figures (amounts, durations, order numbers) in `text` that occur nowhere in
    `grounds`, in any of their spellings (`grounding.figure_forms`)."""
    known = grounding.figures(grounds)
    return [
        f
        for f in dict.fromkeys(grounding.FIGURE.findall(text))
        if not grounding.figure_forms(f) & known
    ]


def _action_words(tools: list[Any]) -> set[str]:
    """The verbs naming what the client's action/destructive tools do: the leading word of
    each name (`cancel_order` → "cancel", `update_shipping_address` → "update"; the objects
    "order", "shipping", "address" name no action), minus the words read tools share. From the
    business's own tool names, in whatever language it named them."""

    def words(kinds: set[str], *, leading: bool) -> set[str]:
        found: set[str] = set()
        for tool in tools:
            if tool.kind in kinds:
                named = _WORD.findall(str(tool.name).replace("_", " ").replace("-", " "))
                found.update(w.lower() for w in (named[:1] if leading else named))
        return found

    return words({ToolKind.ACTION, ToolKind.DESTRUCTIVE}, leading=True) - words(
        {ToolKind.READ}, leading=False
    )


def _without_tool_texts(sources: dict[str, str], tools: list[Any]) -> str:
    """The source text minus the tools' own descriptions (which name every action: they say
    what a tool could do, not what was done)."""
    texts = []
    for label, text in sources.items():
        if label.startswith(TOOL_SCHEMA_PREFIX):
            continue
        for tool in tools:
            text = text.replace(tool_schema_text(tool), "").replace(tool_line(tool), "")
        texts.append(text)
    return "\n".join(texts)


def improvement_problem(
    *, improved: str, draft: str, sources: dict[str, str], tools: list[Any]
) -> str:
    """Why `improved` may not replace the draft ('' = it may): deterministic checks, the same
    whatever the language, against the source text the reviewer was given less the tools' own
    descriptions (they say what a tool could do, not what is so):

    - every figure and every link, domain or e-mail address in it occurs in that text;
    - a word naming one of the client's actions (from its action/destructive tools' names:
      "cancel", "refund") occurs in the draft or the business's text — no tool ran, so the
      reply cannot claim one did;
    - every claim (sentence or clause) is grounded in that text (`grounding`): a claim that
      brings in what the source does not say ("at any time", "a store voucher") is refused,
      and the reason quotes it."""
    source = _without_tool_texts(sources, tools)
    unsupported = ungrounded_figures(improved, source)
    if unsupported:
        return "figures not in the source text: " + ", ".join(unsupported)
    lowered = source.casefold()
    links = [
        link.rstrip(".,;:!?")
        for link in grounding.LINK.findall(improved)
        if link.rstrip(".,;:!?").casefold() not in lowered
    ]
    if links:
        return "links not in the source text: " + ", ".join(dict.fromkeys(links))
    stated = {w.lower() for w in _WORD.findall("\n".join([draft, source]))}
    actions = _action_words(tools)
    claimed = sorted(
        {
            word
            for word in (w.lower() for w in _WORD.findall(improved))
            for action in actions
            if word.startswith(action) and not any(d.startswith(action) for d in stated)
        }
    )
    if claimed:
        return "names an action no tool performed: " + ", ".join(claimed)
    ungrounded = grounding.unsupported_claims(improved, source)
    if ungrounded:
        return "claims not supported by the source text: " + "; ".join(
            claim.why() for claim in ungrounded
        )
    return ""


def wrong_language(text: str, *, expected: str) -> str:
    """Why `text` is not in the `expected` language ('' = it is, or it is too short to tell):
    detected with the same detector as the customer's messages."""
    written = detect(text)
    if not written or not expected or written == expected:
        return ""
    return f"written in {language_name(written)} ({written}), not {language_name(expected)}"


def percent_from_draft(confidence: int | None) -> int:
    """A draft's 1–10 confidence in percent; a draft without one (standard mode) counts 70 %."""
    if confidence is None:
        return STANDARD_DRAFT_CONFIDENCE
    return max(0, min(100, int(confidence) * 10))


def tenths_from_percent(percent: int) -> int:
    """The reply's 1–10 confidence for an evaluated percent."""
    return max(1, min(10, (percent + 5) // 10))


def skip_reason(turn: Turn, draft: Draft) -> str:
    """Why this draft is not evaluated ('' = evaluate it)."""
    if turn.evaluated:
        return "already evaluated by the mode (deliberate when needed)"
    if draft.kind != Kind.TEXT:
        return f"a {draft.kind} reply is GuideDesk's own wording"
    if not turn.is_knowledge_answer:
        return "not a knowledge answer (a guard asked/refused, or an action ran)"
    plan = turn.plan
    if len(draft.text) <= plan.evaluation_min_chars:
        return (
            f"draft of {len(draft.text)} characters (evaluated above {plan.evaluation_min_chars})"
        )
    percent = percent_from_draft(draft.confidence)
    if percent < plan.evaluation_min_confidence:
        return f"confidence {percent} % (evaluated from {plan.evaluation_min_confidence} %)"
    return ""


def _sources_text(sources: dict[str, str]) -> str:
    text = "".join(f"## {label}\n{body}\n\n" for label, body in sources.items()).strip()
    if len(text) > MAX_SOURCE_CHARS:
        text = text[:MAX_SOURCE_CHARS] + "\n[…cut]"
    return text


def _call(turn: Turn, draft: Draft, percent: int) -> tuple[EvaluateOut | None, str]:
    """The `evaluate` call, once (an optional check is not worth a retry's wait); returns the
    parsed verdict or (None, why it failed)."""
    messages = evaluate_step.prompt(
        business=turn.client.name,
        user_message=turn.user_message.text,
        draft=draft.text,
        confidence=percent,
        reasoning=turn.draft_reasoning,
        sources=_sources_text(turn.sources),
    )
    try:
        result = turn.llm(
            evaluate_step.STEP,
            messages,
            retry=False,
            draft=draft.text,
            confidence=percent,
            sources=turn.sources,
        )
    except TurnAborted:
        raise
    except LLMError as exc:
        return None, f"{exc.kind}: {exc.message}"
    except TokenCapExceeded as exc:
        return None, exc.detail or f"token cap: {exc}"
    except DeadlineExceeded:
        return None, "the turn's deadline ran out"
    except Exception as exc:  # never lose the reply over the second opinion
        logger.exception("evaluation failed")
        return None, f"{type(exc).__name__}: {exc}"
    return result.parsed, ""


@post_draft_hook(EVALUATE)
def evaluate(turn: Turn, draft: Draft) -> None:
    """The evaluation layer as a post-draft hook (see the module docstring)."""
    why_not = skip_reason(turn, draft)
    if why_not:
        turn.rec.step("evaluate_skipped", output={"reason": why_not})
        return
    before = percent_from_draft(draft.confidence)
    result, error = _call(turn, draft, before)
    rejected = ""
    offered = (result.improved_response or "").strip() if result is not None else ""
    if result is not None and offered and offered != draft.text.strip():
        # The language first (the plainer reason), then the grounding in the source text.
        rejected = wrong_language(offered, expected=turn.language) or improvement_problem(
            improved=offered, draft=draft.text, sources=turn.sources, tools=turn.enabled_tools
        )
        if rejected:
            turn.rec.step(
                "improvement_rejected", output={"reason": rejected, "improved_response": offered}
            )
    used = result
    if rejected and result is not None:
        # Judged as if no improvement had been offered; the offer stays on the record.
        used = result.model_copy(update={"improved_response": None, "improved_confidence": 0})
    verdict = apply_evaluation(draft=draft.text, confidence=before, result=used)
    threshold = turn.plan.evaluation_escalate_below
    escalated = verdict.outcome == "questioned" and verdict.confidence_after < threshold
    summary = {
        "outcome": verdict.outcome,
        "confidence_before": verdict.confidence_before,
        "confidence_after": verdict.confidence_after,
        "escalated": escalated,
    }
    data: dict[str, Any] = {
        **summary,
        "valid": None if result is None else result.valid,
        "evaluation": "" if result is None else result.evaluation,
        "improved_response": None if result is None else result.improved_response,
        "improved_confidence": None if result is None else result.improved_confidence,
        "draft": draft.text,
        "sources": list(turn.sources),
        "escalate_below": threshold,
        "error": error,
        "improvement_rejected": rejected,
    }
    # The reply the customer gets, checked against the turn's language in code (the reviewer
    # was told it too): a reply in another language is flagged for staff.
    misworded = wrong_language(verdict.text, expected=turn.language)
    data["expected_language"] = turn.language
    data["wrong_language"] = misworded
    text = _message_text(verdict, result, error, escalated)
    if rejected:
        text += f" · improvement refused: {rejected}"
    if misworded:
        text += f" · {misworded}"
    turn.rec.internal(Kind.EVALUATION, text, data)
    _mark_trace(turn.rec.trace, verdict.outcome)

    why = f"evaluation: {verdict.outcome}"
    if verdict.replaced:
        draft.replace(verdict.text, why=why)
    if verdict.outcome in {"improved", "validated", "questioned"}:
        draft.rescore(tenths_from_percent(verdict.confidence_after), why=why)
    draft.evaluation = summary
    if escalated:
        draft.hand_to_human(
            EscalationReason.LOW_CONFIDENCE,
            f"the evaluation questioned the answer: confidence {verdict.confidence_before} % → "
            f"{verdict.confidence_after} %, below {threshold} %",
        )


def _message_text(verdict: Verdict, result: EvaluateOut | None, error: str, escalated: bool) -> str:
    head = f"{verdict.outcome.upper()} · confidence {verdict.confidence_before} % → "
    head += f"{verdict.confidence_after} %"
    if escalated:
        head += " · handed to a person"
    detail = error if result is None else result.evaluation
    return f"{head}: {detail}" if detail else head


def _mark_trace(trace: Any, outcome: str) -> None:
    """Record the outcome on the turn's trace (a playground run's recorder holds the run, not a
    trace: nothing to mark)."""
    if isinstance(trace, ReasoningTrace):
        ReasoningTrace.objects.filter(pk=trace.pk, client_id=trace.client_id).update(
            evaluation_outcome=outcome
        )
        trace.evaluation_outcome = outcome
