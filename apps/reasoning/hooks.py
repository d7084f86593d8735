"""Post-draft hooks: what runs after a mode has its draft and before the reply is stored and
sent.

A mode composes steps and ends with a draft (`Outcome`). The plan names the hooks to run
(`Plan.post_draft_hooks`, chosen in the plan admin from the names registered here; empty = none,
the default). Each hook gets the turn and a `Draft` it may change:

* `draft.replace(text)` — replace the reply the customer will read;
* `draft.lower_confidence(n)` — lower the draft's confidence (never raise it);
* `draft.hand_to_human(reason, detail)` — hand the conversation to a person instead of replying
  (the draft is kept on the trace for staff).

Hooks run in the plan's order, each on the result of the one before. A hook that raises (or an
unknown name) changes nothing: the error is recorded on the trace as a `hook` step and the
draft goes out as it was — a failing hook never loses the reply. Each hook that ran is recorded as
a `hook` step with what it changed.

Register a hook with `@post_draft_hook("name")`.

The evaluation step (`apps.reasoning.evaluation`) is a built-in hook named `evaluate`: it is not
listed in `Plan.post_draft_hooks` but switched by `Plan.evaluation_enabled`, and when on it runs
first, so the plan's own hooks (e.g. `handoff_when_unsure`) see the evaluated reply and
confidence. It may also raise the confidence (`draft.rescore`: a validated answer +10 %) and
leaves its summary for the reply's data (`draft.evaluation`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from apps.conversations.models import Kind
from apps.core.registry import Registry
from apps.escalations.models import EscalationReason
from apps.reasoning.traces import TurnAborted

if TYPE_CHECKING:
    from apps.reasoning.turn import Outcome, Turn

__all__ = [
    "Draft",
    "HookError",
    "hook_names",
    "post_draft_hook",
    "run_post_draft_hooks",
    "unregister_hook",
]

logger = logging.getLogger(__name__)

LOW_CONFIDENCE_HANDOFF_BELOW = 4


class HookError(Exception):
    """A hook asked for something a draft cannot do (e.g. replace a confirmation request)."""


@dataclass
class Draft:
    """The reply about to be sent, as a hook sees and changes it."""

    text: str
    kind: str
    confidence: int | None
    escalate: tuple[str, str] | None = None
    changes: list[dict[str, Any]] = field(default_factory=list)
    evaluation: dict[str, Any] | None = None  # the evaluation's summary, kept on the reply

    def replace(self, text: str, *, why: str = "") -> None:
        if self.kind != Kind.TEXT:
            # A confirmation request's wording is GuideDesk's own (the exact action and params).
            raise HookError(f"a {self.kind} reply cannot be replaced")
        if not text.strip():
            raise HookError("a replacement reply cannot be empty")
        self.changes.append({"replace": {"from": self.text, "to": text}, "why": why})
        self.text = text

    def lower_confidence(self, confidence: int, *, why: str = "") -> None:
        lowered = max(1, min(10, int(confidence)))
        if self.confidence is not None and lowered >= self.confidence:
            return  # hooks may only lower it
        self.changes.append({"confidence": {"from": self.confidence, "to": lowered}, "why": why})
        self.confidence = lowered

    def rescore(self, confidence: int, *, why: str = "") -> None:
        """Set the draft's confidence (1–10), up or down — for the evaluation step, whose rules
        may raise it; other hooks use `lower_confidence`."""
        value = max(1, min(10, int(confidence)))
        if value != self.confidence:
            self.changes.append({"confidence": {"from": self.confidence, "to": value}, "why": why})
            self.confidence = value

    def hand_to_human(
        self, reason: str = EscalationReason.LOW_CONFIDENCE, detail: str = ""
    ) -> None:
        self.changes.append({"hand_to_human": {"reason": reason, "detail": detail}})
        self.escalate = (str(reason), detail or "a post-draft check handed the conversation over")


type Hook = Callable[["Turn", Draft], None]

_hooks: Registry[Hook] = Registry(duplicate="two post-draft hooks are named {name}")
EVALUATE = "evaluate"  # built in: switched by Plan.evaluation_enabled, never listed by name


def post_draft_hook(name: str) -> Callable[[Hook], Hook]:
    """Register `function(turn, draft)` as the post-draft hook `name`."""

    def register(function: Hook) -> Hook:
        return _hooks.register(name, function)

    return register


def unregister_hook(name: str) -> None:
    _hooks.unregister(name)


def hook_names() -> list[str]:
    """The hooks a plan may list in `post_draft_hooks` (the built-in evaluation has its own
    switch)."""
    return sorted(name for name in _hooks.names() if name != EVALUATE)


def plan_hooks(plan: Any) -> list[str]:
    """The hooks a plan's turns run, in order: the evaluation first when it is on, then the
    plan's listed hooks."""
    listed = [str(n) for n in (plan.post_draft_hooks or []) if str(n) != EVALUATE]
    return ([EVALUATE] if getattr(plan, "evaluation_enabled", False) else []) + listed


def run_post_draft_hooks(turn: Turn, outcome: Outcome) -> Outcome:
    """Run the plan's hooks on the draft; return what is to be posted."""
    names = plan_hooks(turn.plan)
    if not names or not outcome.replies or outcome.escalate:
        return outcome
    last = outcome.replies[-1]
    draft = Draft(text=last.text, kind=last.kind, confidence=outcome.confidence)
    for name in names:
        hook = _hooks.get(name)
        attempt = replace(draft, changes=[])
        try:
            if hook is None:
                raise LookupError(f"no post-draft hook named {name!r} is registered")
            hook(turn, attempt)
        except TurnAborted:
            raise
        except Exception as exc:  # a failing hook never loses the reply
            logger.warning("post-draft hook %s failed: %r", name, exc)
            turn.rec.step("hook", input_summary=name, error=f"{type(exc).__name__}: {exc}")
            continue
        turn.rec.step("hook", input_summary=name, output={"changes": attempt.changes})
        draft = attempt
        if draft.escalate:
            break
    if draft.escalate:
        reason, detail = draft.escalate
        turn.rec.step("hook_handoff", output={"draft": draft.text, "reason": reason})
        return replace(outcome, replies=[], escalate=(reason, detail), confidence=draft.confidence)
    replies = list(outcome.replies)
    data = dict(last.data)
    if draft.confidence is not None:
        data["confidence"] = draft.confidence
    if draft.evaluation is not None:
        data["evaluation"] = draft.evaluation
    replies[-1] = replace(last, text=draft.text, data=data)
    return replace(outcome, replies=replies, confidence=draft.confidence)


@post_draft_hook("handoff_when_unsure")
def handoff_when_unsure(turn: Turn, draft: Draft) -> None:
    """Hand the conversation to a person when the draft's confidence is below 4 (of 10)."""
    if draft.confidence is not None and draft.confidence < LOW_CONFIDENCE_HANDOFF_BELOW:
        draft.hand_to_human(
            EscalationReason.LOW_CONFIDENCE,
            f"draft confidence {draft.confidence}/10 is below {LOW_CONFIDENCE_HANDOFF_BELOW}",
        )
