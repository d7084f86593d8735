"""Deterministic safety rules. They hold in every mode, whatever the model says — the LLM's own
critique is a second line, never the only one.

1. The tool exists, is enabled for this client and its integration is configured.
2. Params validate against the tool's JSON Schema (else: ask for what is missing or wrong).
3. A destructive tool runs only when a PendingAction for this exact tool and these exact params
   was put to the customer and their *next* message confirmed it. Changed params -> a new
   question; a declined or ignored confirmation expires; never in the turn it was proposed.
4. At most N tool calls per turn and no identical repeats (runaway guard).

Pure functions only: no database access. The pending actions they judge are written by
`apps.tools.pending` (which asks `confirmation_decision` how to settle an open question).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from django.conf import settings
from django.utils.translation import gettext
from jsonschema import Draft202012Validator

from apps.tools.models import ClientTool, PendingAction, PendingActionStatus, ToolKind
from apps.tools.pending import OpenQuestion, params_hash

__all__ = ["params_hash"]  # re-exported: the guards and their callers share one hash

Action = Literal["none", "run", "ask", "confirm", "refuse"]


@dataclass
class GuardVerdict:
    action: Action
    reason: str = ""
    message: str = ""
    tool: ClientTool | None = None
    params: dict[str, Any] = field(default_factory=dict)
    pending: PendingAction | None = None  # the confirmed action to run, for destructive tools
    problems: list[str] = field(default_factory=list)

    def as_data(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "reason": self.reason,
            "tool": self.tool.name if self.tool else None,
            "params": self.params,
            "problems": self.problems,
            "pending_action": self.pending.pk if self.pending else None,
        }


# --- the customer's answer to a confirmation question ------------------------------------------

_NEGATIVE_START = {
    "no",
    "nope",
    "nah",
    "stop",
    "wait",
    "abort",
    "cancel that",
    "never mind",
    "nevermind",
    "hold on",
    "not now",
    "no thanks",
    "don't",
    "dont",
    "do not",
}
_NEGATIVE_ANYWHERE = {"don't", "dont", "do not", "not", "never", "stop"}
# Any of these makes an answer conditional or a question: never a confirmation.
_HEDGES = {
    "wait",
    "if",
    "but",
    "maybe",
    "think",
    "unless",
    "which",
    "what",
    "why",
    "how",
    "when",
    "hold",
    "later",
    "actually",
    "perhaps",
    "hmm",
    "first",
    "before",
    "instead",
}
_AFFIRMATIVE_START = (
    "yes please",
    "yes",
    "yeah",
    "yep",
    "yup",
    "y",
    "sure",
    "ok",
    "okay",
    "confirm",
    "confirmed",
    "i confirm",
    "go ahead",
    "please do",
    "do it",
    "correct",
    "that's right",
    "thats right",
    "right",
    "absolutely",
    "please proceed",
    "proceed",
)
# Words that may follow the yes: echoing the action ("yes, cancel it") or politeness.
_ECHO_WORDS = {
    "please",
    "cancel",
    "it",
    "that",
    "this",
    "do",
    "go",
    "ahead",
    "proceed",
    "confirm",
    "confirmed",
    "yes",
    "sure",
    "ok",
    "okay",
    "thanks",
    "thank",
    "you",
    "refund",
    "the",
    "order",
    "my",
    "now",
    "right",
    "away",
    "correct",
    "absolutely",
    "y",
    "yep",
    "yeah",
    "yup",
    "i",
    "am",
    "change",
    "update",
    "request",
    "address",
    "one",
    "that's",
    "thats",
    "fine",
    "great",
    "perfect",
    "good",
    "for",
}
# A word with a digit in it names something (an order number, an amount, a date): in a "yes" it
# must name what the question was about.
_HAS_DIGIT = re.compile(r"\d")
_WORD_RE = re.compile(r"[a-z0-9'-]+(?:[.,]\d+)*")
_NUMBER_RE = re.compile(r"^\d+(?:[.,]\d+)*$")

Answer = Literal["yes", "no", "other"]


def _words(text: str) -> list[str]:
    lowered = text.strip().lower().replace("\u2019", "'")
    return [w for w in (w.strip("'") for w in _WORD_RE.findall(lowered)) if w]


def _canonical(word: str) -> str:
    """One spelling per identifier: "#W-1001", "w1001" and "W_1001" are the same order, and
    "50.00" is the amount 50."""
    if _NUMBER_RE.match(word):
        try:
            return format(Decimal(word.replace(",", "")).normalize(), "f")
        except InvalidOperation:
            return word
    return re.sub(r"[^a-z0-9.]", "", word)


def _leaf_values(value: Any) -> list[str]:
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaf_values(v)]
    if isinstance(value, list | tuple):
        return [leaf for v in value for leaf in _leaf_values(v)]
    return [str(value)]


def _named_in(params: Mapping[str, Any] | None) -> tuple[set[str], set[str]]:
    """(identifiers, plain words) a customer may repeat back when confirming these params."""
    identifiers: set[str] = set()
    words: set[str] = set()
    for leaf in _leaf_values(dict(params or {})):
        for word in _words(leaf):
            if _HAS_DIGIT.search(word):
                canonical = _canonical(word)
                identifiers.add(canonical)
                digits = re.sub(r"\D", "", canonical)
                if digits != canonical and not _NUMBER_RE.match(canonical):
                    identifiers.add(digits)  # "order 1001" for W1001
            else:
                words.add(word)
    return identifiers, words


def confirmation_answer(text: str, params: Mapping[str, Any] | None = None) -> Answer:
    """An explicit yes or no to the question about `params`, nothing else.

    A question, a condition or an extra clause makes it 'other' (the question expires and the
    message is handled as a new request): ambiguity never confirms a destructive action. Every
    identifier in a yes (a word with a digit: an order number, an amount) must be one of the
    params' values, in any spelling ("#W1001", "w-1001", "W1001", "order 1001"); any other
    identifier means the customer wants something else, so "yes, cancel #W2002" never confirms
    the question about #W1001."""
    words = _words(text)
    if not words or len(words) > 10:
        return "other"
    joined = " ".join(words)
    if any(joined == n or joined.startswith(n + " ") for n in _NEGATIVE_START) or (
        _NEGATIVE_ANYWHERE & set(words) or "do not" in joined
    ):
        return "no"
    if "?" in text or _HEDGES & set(words):
        return "other"
    identifiers, param_words = _named_in(params)
    for phrase in _AFFIRMATIVE_START:
        if joined == phrase or joined.startswith(phrase + " "):
            rest = joined[len(phrase) :].split()
            for word in rest:
                if _HAS_DIGIT.search(word):
                    if _canonical(word) not in identifiers:
                        return "other"  # names something the question was not about
                elif word not in _ECHO_WORDS and word not in param_words:
                    return "other"
            return "yes"
    return "other"


def confirmation_decision(question: OpenQuestion, text: str) -> str:
    """The status a customer message gives an open confirmation question (the rule behind
    `apps.tools.pending.pending_resolve`):

    - not shown before this message was written: it stays PENDING (this message cannot answer);
    - its time ran out, or another message came first, or a newer question was confirmed by
      this message: EXPIRED;
    - otherwise the answer decides: yes -> CONFIRMED, no -> DECLINED, anything else -> EXPIRED
      (the message then goes through the pipeline as a new request).
    """
    if not question.shown_before:
        return PendingActionStatus.PENDING
    if question.expired or question.another_confirmed or not question.first_reply:
        return PendingActionStatus.EXPIRED
    answer = confirmation_answer(text, question.params)
    return {
        "yes": PendingActionStatus.CONFIRMED,
        "no": PendingActionStatus.DECLINED,
        "other": PendingActionStatus.EXPIRED,
    }[answer]


# --- the tool call itself ------------------------------------------------------------------------


def _param_label(tool: ClientTool, name: str) -> str:
    spec = tool.parameters.get("properties", {}).get(name, {})
    description = spec.get("description") if isinstance(spec, dict) else None
    return f"{name.replace('_', ' ')} ({description})" if description else name.replace("_", " ")


def param_problems(tool: ClientTool, params: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(missing required params, other problems) from the tool's JSON Schema."""
    missing: list[str] = []
    problems: list[str] = []
    validator = Draft202012Validator(tool.parameters)
    for error in validator.iter_errors(params):
        if error.validator == "required" and not error.absolute_path:
            missing.extend(r for r in error.validator_value if r not in params)
        else:
            where = ".".join(str(p) for p in error.absolute_path) or "params"
            problems.append(f"{where}: {error.message}")
    return sorted(set(missing)), problems


def check_tool_call(
    *,
    tools_by_name: dict[str, ClientTool],
    name: str | None,
    params: dict[str, Any],
    confirmed: PendingAction | None,
    calls_this_turn: list[tuple[str, str]],
) -> GuardVerdict:
    """Decide, in code, what may happen with a tool call the model proposed.

    `tools_by_name` holds every tool of this client (enabled or not) and nothing else."""
    if not name:
        return GuardVerdict("none")
    tool = tools_by_name.get(name)
    if tool is None:
        return GuardVerdict("refuse", "unknown_tool", params=params)
    if not tool.enabled:
        return GuardVerdict("refuse", "tool_disabled", tool=tool, params=params)
    if not tool.is_configured:
        return GuardVerdict("refuse", "tool_not_configured", tool=tool, params=params)

    missing, problems = param_problems(tool, params)
    if missing or problems:
        return GuardVerdict(
            "ask",
            "missing_params" if missing and not problems else "invalid_params",
            message=_ask_text(tool, missing, problems),
            tool=tool,
            params=params,
            problems=[f"missing: {m}" for m in missing] + problems,
        )

    signature = (tool.name, params_hash(params))
    if len(calls_this_turn) >= settings.REASONING_MAX_TOOL_CALLS_PER_TURN:
        return GuardVerdict("refuse", "too_many_tool_calls", tool=tool, params=params)
    if signature in calls_this_turn:
        return GuardVerdict("refuse", "repeated_tool_call", tool=tool, params=params)

    if tool.kind == ToolKind.DESTRUCTIVE:
        if (
            confirmed is not None
            and confirmed.tool_id == tool.pk
            and confirmed.params_hash == params_hash(params)
        ):
            return GuardVerdict("run", "confirmed", tool=tool, params=params, pending=confirmed)
        reason = "params_changed" if confirmed is not None else "needs_confirmation"
        return GuardVerdict(
            "confirm", reason, message=confirmation_text(tool, params), tool=tool, params=params
        )
    return GuardVerdict("run", "allowed", tool=tool, params=params)


def _ask_text(tool: ClientTool, missing: list[str], problems: list[str]) -> str:
    if missing:
        needed = ", ".join(_param_label(tool, m) for m in missing)
        return gettext("To do that I need a few details: %(needed)s. Could you tell me?") % {
            "needed": needed
        }
    return gettext("Some of the details don't look right (%(problems)s). Could you check them?") % {
        "problems": "; ".join(problems[:3])
    }


def confirmation_text(tool: ClientTool, params: dict[str, Any]) -> str:
    """The exact action, generated in code so the customer confirms what will really run."""
    details = ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in sorted(params.items()))
    action = tool.name.replace("_", " ")
    return gettext(
        "Just to confirm — %(action)s (%(details)s)? This can't be undone. "
        'Reply "yes" to go ahead or "no" to stop.'
    ) % {"action": action, "details": details}


# A draft that only says what the assistant is about to do answers nothing ("Let me check…").
_HOLDING_STARTS = (
    "let me",
    "one moment",
    "just a moment",
    "give me a moment",
    "please wait",
    "i'll",
    "i will",
    "i'm going to",
    "i am going to",
    "checking",
    "looking",
)
_LETTER_WORD = re.compile(r"[^\W\d_]{3,}")


def _leading_word(name: str) -> str:
    words = _LETTER_WORD.findall(str(name).replace("_", " ").replace("-", " ").lower())
    return words[0] if words else ""


def unavailable_tool_draft_problem(
    draft: str, *, tool_name: str | None, tools: list[ClientTool]
) -> str:
    """Why the model's draft may NOT be sent instead of a call to a tool this client does not
    have (or has switched off) — '' when it may. The tool never runs either way; the draft is
    sent only when it reads as an answer in its own right:

    - it has at least four words and does not open by announcing an action ("Let me check…");
    - it names neither the unavailable tool's action (the leading word of its name:
      `delete_account` → "delete") nor an action of the client's action/destructive tools
      ("cancel", "update" …), minus the words of its read tools — nothing ran, so the draft
      must not say something was done.

    Otherwise a person takes the conversation (`act_on_tool_call`)."""
    text = " ".join(draft.split())
    words = [w.lower() for w in _LETTER_WORD.findall(text)]
    if len(text.split()) < 4 or not words:
        return "the draft holds no answer"
    lowered = text.lower().replace("\u2019", "'")
    if lowered.startswith(_HOLDING_STARTS):
        return "the draft only announces an action"
    read_words = {
        w.lower()
        for t in tools
        if t.kind == ToolKind.READ
        for w in _LETTER_WORD.findall(t.name.replace("_", " "))
    }
    actions = {
        _leading_word(t.name) for t in tools if t.kind in {ToolKind.ACTION, ToolKind.DESTRUCTIVE}
    } - read_words
    actions.add(_leading_word(tool_name or ""))
    named = sorted({w for w in words for a in actions if a and w.startswith(a)})
    if named:
        return "the draft names an action no tool performed: " + ", ".join(named)
    return ""


def refusal_text(verdict: GuardVerdict, enabled_tools: list[ClientTool]) -> str:
    can_do = ", ".join(t.name.replace("_", " ") for t in enabled_tools) or gettext(
        "answer questions"
    )
    if verdict.reason in {"unknown_tool", "tool_disabled"}:
        return gettext("Sorry, I can't do that here. I can help with: %(can_do)s.") % {
            "can_do": can_do
        }
    if verdict.reason == "tool_not_configured":
        return gettext("Sorry, that isn't available right now. Our team can help if you'd like.")
    if verdict.reason in {"too_many_tool_calls", "repeated_tool_call"}:
        return gettext("I've already done that for you in this conversation turn.")
    return gettext("Sorry, I can't do that.")
