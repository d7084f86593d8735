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

Register a hook with `@post_draft_hook("name")`; the evaluation step plugs in here next.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from apps.conversations.models import Kind
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

    def hand_to_human(
        self, reason: str = EscalationReason.LOW_CONFIDENCE, detail: str = ""
    ) -> None:
        self.changes.append({"hand_to_human": {"reason": reason, "detail": detail}})
        self.escalate = (str(reason), detail or "a post-draft check handed the conversation over")


type Hook = Callable[["Turn", Draft], None]

_hooks: dict[str, Hook] = {}
_lock = threading.Lock()


def post_draft_hook(name: str) -> Callable[[Hook], Hook]:
    """Register `function(turn, draft)` as the post-draft hook `name`."""

    def register(function: Hook) -> Hook:
        with _lock:
            if name in _hooks and _hooks[name] is not function:
                raise ValueError(f"two post-draft hooks are named {name!r}")
            _hooks[name] = function
        return function

    return register


def unregister_hook(name: str) -> None:
    with _lock:
        _hooks.pop(name, None)


def hook_names() -> list[str]:
    return sorted(_hooks)


def run_post_draft_hooks(turn: Turn, outcome: Outcome) -> Outcome:
    """Run the plan's hooks on the draft; return what is to be posted."""
    names = [str(n) for n in (turn.plan.post_draft_hooks or [])]
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
