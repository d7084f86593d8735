"""Deterministic safety rules. They hold in every mode, whatever the model says — the LLM's own
critique is a second line, never the only one.

1. The tool exists, is enabled for this client and its integration is configured.
2. Params validate against the tool's JSON Schema (else: ask for what is missing or wrong).
3. A destructive tool runs only when a PendingAction for this exact tool and these exact params
   was put to the customer and their *next* message confirmed it. Changed params -> a new
   question; a declined or ignored confirmation expires; never in the turn it was proposed.
4. At most N tool calls per turn and no identical repeats (runaway guard).
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from jsonschema import Draft202012Validator

from apps.clients.models import Client
from apps.conversations.models import Conversation, Message, Role
from apps.tools.models import ClientTool, PendingAction, PendingActionStatus, ToolKind

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


def params_hash(params: dict[str, Any]) -> str:
    canonical = json.dumps(params, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


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
}
_ID_RE = re.compile(r"^[a-z]*-?\d[\w-]*$")  # an order number echoed back ("th-12345")


def confirmation_answer(text: str) -> Literal["yes", "no", "other"]:
    """An explicit yes or no, nothing else. A question, a condition or an extra clause makes it
    'other' (the question expires and the assistant asks again if the customer still wants it):
    ambiguity never confirms a destructive action."""
    lowered = text.strip().lower().replace("\u2019", "'")
    words = re.findall(r"[a-z0-9'-]+", lowered)
    if not words or len(words) > 10:
        return "other"
    joined = " ".join(words)
    if any(joined == n or joined.startswith(n + " ") for n in _NEGATIVE_START) or (
        _NEGATIVE_ANYWHERE & set(words) or "do not" in joined
    ):
        return "no"
    if "?" in lowered or _HEDGES & set(words):
        return "other"
    for phrase in _AFFIRMATIVE_START:
        if joined == phrase or joined.startswith(phrase + " "):
            rest = joined[len(phrase) :].split()
            if all(w in _ECHO_WORDS or _ID_RE.match(w) for w in rest):
                return "yes"
            return "other"
    return "other"


@transaction.atomic
def pending_resolve(
    *, client: Client, conversation: Conversation, user_message: Message
) -> PendingAction | None:
    """At the start of a turn: settle any open confirmation with this customer message. Returns
    the action this message confirmed, else None.

    A confirmation counts only if the question was actually shown to the customer
    (`PendingAction.question` is set when the reply is posted) and this is the customer's first
    message after it. A message written before the question appeared never answers it."""
    already = (
        PendingAction.objects.for_client(client)
        .select_related("tool")
        .filter(
            resolved_by=user_message,
            status__in=[PendingActionStatus.CONFIRMED, PendingActionStatus.EXECUTED],
        )
        .first()
    )
    if already is not None:
        return already  # this turn is being re-run (its worker died): same action, same key
    now = timezone.now()
    open_actions = list(
        PendingAction.objects.for_client(client)
        .select_for_update(of=("self",))  # (question is a nullable join: lock only these rows)
        .select_related("tool", "question")
        .filter(conversation=conversation, status=PendingActionStatus.PENDING)
        .order_by("-created_at")
    )
    confirmed = None
    for pending in open_actions:
        question = pending.question
        if question is None or question.seq >= user_message.seq:
            continue  # not shown yet (or shown after this message): this message can't answer
        status: str
        if pending.expires_at <= now:
            status = PendingActionStatus.EXPIRED
        elif confirmed is not None or not _is_first_reply(question, user_message):
            status = PendingActionStatus.EXPIRED  # ignored: the customer moved on
        else:
            answer = confirmation_answer(user_message.text)
            status = {
                "yes": PendingActionStatus.CONFIRMED,
                "no": PendingActionStatus.DECLINED,
                "other": PendingActionStatus.EXPIRED,
            }[answer]
        pending.status = status
        pending.resolved_by = user_message
        pending.save(update_fields=["status", "resolved_by", "updated_at"])
        if status == PendingActionStatus.CONFIRMED:
            confirmed = pending
    return confirmed


def _is_first_reply(question: Message, user_message: Message) -> bool:
    """No customer message and no staff message came between the question and this answer."""
    between = Message.objects.filter(
        conversation_id=question.conversation_id,
        role__in=[Role.USER, Role.STAFF],
        seq__gt=question.seq,
        seq__lt=user_message.seq,
    )
    return not between.exists()


def declined_by(*, client: Client, user_message: Message) -> PendingAction | None:
    """The confirmation this customer message turned down, if any."""
    return (
        PendingAction.objects.for_client(client)
        .select_related("tool")
        .filter(resolved_by=user_message, status=PendingActionStatus.DECLINED)
        .first()
    )


@transaction.atomic
def pending_create(
    *,
    client: Client,
    conversation: Conversation,
    tool: ClientTool,
    params: dict[str, Any],
    proposed_in: Message,
) -> PendingAction:
    """Put a destructive call to the customer. Any older open question is superseded."""
    PendingAction.objects.for_client(client).filter(
        conversation=conversation,
        status__in=[PendingActionStatus.PENDING, PendingActionStatus.CONFIRMED],
    ).update(status=PendingActionStatus.SUPERSEDED, updated_at=timezone.now())
    return PendingAction.objects.create(
        client=client,
        conversation=conversation,
        tool=tool,
        params=params,
        params_hash=params_hash(params),
        proposed_in=proposed_in,
        expires_at=timezone.now() + timedelta(minutes=settings.REASONING_CONFIRMATION_TTL_MINUTES),
        idempotency_key=f"pa-{uuid.uuid4().hex}",
    )


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
        return f"To do that I need a few details: {needed}. Could you tell me?"
    return (
        "Some of the details don't look right ("
        + "; ".join(problems[:3])
        + "). Could you check them?"
    )


def confirmation_text(tool: ClientTool, params: dict[str, Any]) -> str:
    """The exact action, generated in code so the customer confirms what will really run."""
    details = ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in sorted(params.items()))
    action = tool.name.replace("_", " ")
    return (
        f"Just to confirm — {action} ({details})? This can't be undone. "
        'Reply "yes" to go ahead or "no" to stop.'
    )


def refusal_text(verdict: GuardVerdict, enabled_tools: list[ClientTool]) -> str:
    can_do = ", ".join(t.name.replace("_", " ") for t in enabled_tools) or "answer questions"
    if verdict.reason in {"unknown_tool", "tool_disabled"}:
        return f"Sorry, I can't do that here. I can help with: {can_do}."
    if verdict.reason == "tool_not_configured":
        return "Sorry, that isn't available right now. Our team can help if you'd like."
    if verdict.reason in {"too_many_tool_calls", "repeated_tool_call"}:
        return "I've already done that for you in this conversation turn."
    return "Sorry, I can't do that."
