"""Deterministic safety rules. They hold in every mode, whatever the model says — the LLM's own
critique is a second line, never the only one.

1. The tool exists, is enabled for this client and its integration is configured.
2. Params validate against the tool's JSON Schema (else: ask for what is missing or wrong).
3. A destructive tool runs only when a PendingAction for this exact tool and these exact params
   was put to the customer and their *next* message confirmed it. Changed params -> a new
   question; a declined or ignored confirmation expires; never in the turn it was proposed.
4. At most N tool calls per turn and no identical repeats (runaway guard).
5. A `customer_scoped` tool runs only in a conversation whose customer is verified (a signature
   from the business's site, docs/widget.md "Identity verification") — in every mode, the
   playground and simulations too; unverified, the customer is told how to sign in.
6. An identifying param (`"x-identifier": true` in the tool's schema: an order, payment or
   account id) runs or is proposed only when its value was given in this conversation — typed
   by the customer or returned by an earlier tool result (`apps.tools.identifiers`); else
   the customer is asked for it, never shown the value the model made up.

Pure functions only: no database access. The pending actions they judge are written by
`apps.tools.pending` (which asks `confirmation_decision` how to settle an open question).
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from django.conf import settings
from django.utils.translation import gettext
from jsonschema import Draft202012Validator

from apps.core.schema_errors import schema_problems
from apps.reasoning import confirmations
from apps.reasoning.confirmations.reading import Answer, Reading, read
from apps.reasoning.confirmations.reading import forms as _forms
from apps.tools import identifiers, wording
from apps.tools.models import ClientTool, PendingAction, PendingActionStatus, ToolKind
from apps.tools.pending import DIGEST_LENGTH, OpenQuestion, params_digest, params_hash

# re-exported: the guards and their callers share one hash (and its digest)
__all__ = ["params_digest", "params_hash"]

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
    # The tool name as the model wrote it: kept when no such tool exists (an invented one), so
    # traces and simulation transcripts show what was refused.
    requested: str | None = None

    def as_data(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "reason": self.reason,
            "tool": self.tool.name if self.tool else None,
            "requested_tool": self.requested,
            "params": self.params,
            "problems": self.problems,
            "pending_action": self.pending.pk if self.pending else None,
        }


# --- the customer's answer to a confirmation question ------------------------------------------
# The grammar lives with its data (`apps.reasoning.confirmations.reading`); re-exported here.


def confirmation_reading(
    text: str, params: Mapping[str, Any] | None = None, tool: str | None = None
) -> Reading:
    """Read a typed answer to the question about `tool` with `params`, in every shipped
    language at once: yes only when the language data describes every word of it — a strong
    assent, optionally the question's own action echoed back once ("cancélalo", "בטל את
    ההזמנה"), its params, politeness — and no veto (a reversal, sarcasm, a no, a condition, a
    question, another identifier). The reading says why (`reason`, `assent`, `echoes`) and
    whether to ask again with the buttons (`reask`)."""
    return read(text, params, tool)


def confirmation_answer(
    text: str, params: Mapping[str, Any] | None = None, tool: str | None = None
) -> Answer:
    """ "yes", "no" or "other" (`confirmation_reading`). Ambiguity never confirms: every
    identifier in a yes must be one of the params' values, in any spelling ("#W1001",
    "w-1001", "order 1001"), so "yes, cancel #W2002" never confirms the question about #W1001."""
    return read(text, params, tool).answer


def confirmation_decision(question: OpenQuestion, text: str) -> str:
    """The status a customer message gives an open confirmation question (the rule behind
    `apps.tools.pending.pending_resolve`):

    - not shown before this message was written: it stays PENDING (this message cannot answer);
    - its time ran out, or another message came first, or a newer question was confirmed by
      this message: EXPIRED;
    - the message came with a Yes/No button press (`question.structured`): it settles exactly
      the question whose id and digest it names (yes -> CONFIRMED, no -> DECLINED, whatever the
      text); a press for any other or changed question -> EXPIRED, never a yes, even when its
      text ("Yes") would be one;
    - otherwise the typed answer decides: yes -> CONFIRMED, no -> DECLINED, anything else ->
      EXPIRED — never a yes. The turn then asks again with the buttons when the answer looked
      like one but was not clear (`Reading.reask`), else handles it as a new request.
    """
    if not question.shown_before:
        return PendingActionStatus.PENDING
    if question.expired or question.another_confirmed or not question.first_reply:
        return PendingActionStatus.EXPIRED
    pressed = question.structured
    if pressed is not None:
        if (
            question.action_id is not None
            and pressed.action == question.action_id
            and len(question.digest) == DIGEST_LENGTH
            and hmac.compare_digest(pressed.digest.encode(), question.digest.encode())
            and pressed.answer in {"yes", "no"}
        ):
            if pressed.answer == "yes":
                return PendingActionStatus.CONFIRMED
            return PendingActionStatus.DECLINED
        return PendingActionStatus.EXPIRED
    answer = confirmation_answer(text, question.params, question.tool)
    return {
        "yes": PendingActionStatus.CONFIRMED,
        "no": PendingActionStatus.DECLINED,
        "other": PendingActionStatus.EXPIRED,
    }[answer]


# --- the tool call itself ------------------------------------------------------------------------


def _param_label(tool: ClientTool, name: str) -> str:
    # The tool's label in the customer's language (apps/tools/wording.py); the schema's
    # description is written for the model, in the business's language, so it is not shown.
    return wording.field_label(tool, name)


def param_problems(tool: ClientTool, params: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(missing required params, other problems) from the tool's JSON Schema."""
    missing: list[str] = []
    problems: list[str] = []
    validator = Draft202012Validator(tool.parameters)
    for problem in schema_problems(validator, params, in_path_order=False):
        if problem.keyword == "required" and not problem.at:
            missing.append(str(problem.key))
            continue
        # jsonschema's own words, as the model wrote the params against the raw schema
        message = (
            f"{problem.key!r} is a required property"
            if problem.keyword == "required"
            else problem.error.message
        )
        where = ".".join(str(p) for p in problem.at) or "params"
        problems.append(f"{where}: {message}")
    return sorted(set(missing)), list(dict.fromkeys(problems))


def check_tool_call(
    *,
    tools_by_name: dict[str, ClientTool],
    name: str | None,
    params: dict[str, Any],
    confirmed: PendingAction | None,
    calls_this_turn: list[tuple[str, str]],
    customer_verified: bool = False,
    given: set[str] | None = None,
) -> GuardVerdict:
    """Decide, in code, what may happen with a tool call the model proposed.

    `tools_by_name` holds every tool of this client (enabled or not) and nothing else;
    `customer_verified`: the conversation's customer is verified (unverified by default, so a
    caller that forgets it fails closed); `given`: the words the customer typed in this
    conversation and earlier tool results returned (`identifiers.given_words`; none by
    default: an identifying param is then asked for)."""
    if not name:
        return GuardVerdict("none")
    tool = tools_by_name.get(name)
    if tool is None:
        return GuardVerdict("refuse", "unknown_tool", params=params, requested=name)
    if not tool.enabled:
        return GuardVerdict("refuse", "tool_disabled", tool=tool, params=params)
    if not tool.is_configured:
        return GuardVerdict("refuse", "tool_not_configured", tool=tool, params=params)
    if tool.customer_scoped and not customer_verified:
        # Before the params are looked at: nothing is asked for, nothing is revealed.
        return GuardVerdict("refuse", "customer_not_verified", tool=tool, params=params)

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
    ungiven = identifiers.ungiven(tool.parameters, params, given or set())
    if ungiven:
        # The model wrote an id nobody gave (the example in the parameter's description, an
        # earlier conversation's): ask for it as for a missing one, without repeating it.
        return GuardVerdict(
            "ask",
            "ungiven_identifier",
            message=_ask_text(tool, ungiven, []),
            tool=tool,
            params=params,
            problems=[f"not given in this conversation: {name}" for name in ungiven],
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
    """The exact action, generated in code so the customer confirms what will really run: the
    tool's display name and its parameters' labels in the customer's language
    (apps/tools/wording.py)."""
    values = {"action": wording.display_name(tool), "details": wording.action_details(tool, params)}
    if not values["details"]:
        return (
            gettext(
                "Just to confirm: shall I go ahead with “%(action)s”? This can't be undone. "
                'Reply "yes" to go ahead or "no" to stop.'
            )
            % values
        )
    return (
        gettext(
            "Just to confirm: shall I go ahead with “%(action)s” (%(details)s)? This can't be "
            'undone. Reply "yes" to go ahead or "no" to stop.'
        )
        % values
    )


def reask_text(tool: ClientTool, params: dict[str, Any]) -> str:
    """Asked again, with the buttons, after a typed answer that was no clear yes or no."""
    values = {"action": wording.display_name(tool), "details": wording.action_details(tool, params)}
    if not values["details"]:
        return (
            gettext(
                "I didn't take that as a yes. Please press Yes to go ahead with “%(action)s”, "
                "or No to stop."
            )
            % values
        )
    return (
        gettext(
            "I didn't take that as a yes. Please press Yes to go ahead with “%(action)s” "
            "(%(details)s), or No to stop."
        )
        % values
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
    sent only when it reads as an answer in its own right, in whatever shipped language it is
    written (the phrasings are data: `apps.reasoning.confirmations`, `HOLDING` and `ACTIONS`):

    - it has at least four words and does not open by announcing an action ("Let me check…",
      "Déjame revisar…", "רגע, אני בודק…");
    - it names neither the unavailable tool's action (the leading word of its name:
      `delete_account` → "delete") nor an action of the client's action/destructive tools
      ("cancel", "update" …), minus the words of its read tools — in English or in any shipped
      language ("cancel" is also "anulado", "storniert", "בוטלה", "ألغيت"); nothing ran, so the
      draft must not say something was done. A leading word with no translations in the data
      is matched as written.

    Otherwise a person takes the conversation (`act_on_tool_call`)."""
    text = " ".join(draft.split())
    normalised = confirmations.normalise(text)
    words = _LETTER_WORD.findall(normalised)
    if len(text.split()) < 4 or not words:
        return "the draft holds no answer"
    drafts = confirmations.draft_vocabulary()
    if normalised.startswith(drafts.holding):
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
    stems = {stem for a in actions if a for stem in (a, *drafts.actions.get(a, ()))}
    named = sorted(
        {
            w
            for w in words
            for form in _forms(w, drafts.prefixes)
            if any(form.startswith(stem) for stem in stems if " " not in stem)
        }
        | {stem for stem in stems if " " in stem and stem in normalised}  # "mis a jour"
    )
    if named:
        return "the draft names an action no tool performed: " + ", ".join(named)
    return ""


def sign_in_text(signin_url: str = "") -> str:
    """What an unverified visitor is told when they ask for a `customer_scoped` tool."""
    if signin_url:
        return gettext(
            "I can only do that for a signed-in customer, so I can be sure it's your account. "
            "Please sign in at %(url)s and open this chat again from there. If you can't sign "
            "in, ask for a person and our team will help."
        ) % {"url": signin_url}
    return gettext(
        "I can only do that for a signed-in customer, so I can be sure it's your account. "
        "Please sign in to your account on our website and open this chat again from there. "
        "If you can't sign in, ask for a person and our team will help."
    )


def refusal_text(
    verdict: GuardVerdict, enabled_tools: list[ClientTool], *, signin_url: str = ""
) -> str:
    if verdict.reason == "customer_not_verified":
        return sign_in_text(signin_url)
    can_do = ", ".join(wording.display_name(t) for t in enabled_tools) or gettext(
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
