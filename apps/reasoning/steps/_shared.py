"""What several steps' prompts share. Kept short: tokens are money (see the cost benchmark)."""

from __future__ import annotations

import re
from typing import Any

from apps.core.languages import language_name, normalise
from apps.reasoning.steps import _data
from apps.reasoning.steps._base import Prompt, Step

RULES = """Rules: answer only from the business information given (if it is not there, say so or
ask). Use a tool only for what the customer asked; never invent parameter values, ask for a
missing one. Destructive actions (cancel, delete, refund) need the customer's explicit
confirmation of the exact details: GuideDesk asks (with Yes/No buttons) and runs the tool only
after a clear yes; anything unclear is asked again, never taken as a yes. Be friendly
and concise, in the language named at the end of our instructions."""


def business_facts(business_info: dict[str, Any] | None) -> dict[str, Any]:
    """The business info the offline demo answers questions from (FAQs, policies, contact)."""
    info = business_info or {}
    return {
        "faqs": info.get("faqs", []),
        "policies": info.get("policies", {}),
        "contact": info.get("contact", {}),
    }


# What a `confirmation state` block means (the block itself is data: the params in it may hold
# what the customer typed). Always in the system message of the chat steps, so that message
# stays the same from turn to turn (providers cache a stable prefix).
CONFIRMATION_RULE = """A "confirmation state" block says which action the customer just confirmed
(call it with exactly those params if still wanted) or declined (do not call it; ask what they
would like instead)."""


def chat_messages(
    system: str,
    *,
    history: list[dict[str, str]],
    notes: str = "",
    pending: str = "",
    after: list[dict[str, str]] | None = None,
    keep_from: int | None = None,
    tail: list[dict[str, str]] | None = None,
    reference: list[dict[str, str]] | None = None,
) -> Prompt:
    """A chat step's messages, longest-shared first: the system message (our rules and the
    business's context), `reference` (data messages that change only with the business's
    knowledge: the topics, FAQs), the notes block, the conversation in its own roles, `after`
    (e.g. knowledge excerpts, deliberation steps), the turn's confirmation state, then `tail`
    (the step's own part).

    To fit a small context window the gateway may leave out the history before `keep_from`
    (default: all but its last message, the current customer message), oldest first, and then
    the notes block (`Prompt.shrinkable`); nothing else."""
    messages = [_data.system_message(system), *(reference or [])]
    notes_at: list[int] = []
    if notes:
        notes_at.append(len(messages))
        messages.append(_data.data_message(_data.block(_data.NOTES, notes)))
    first = len(messages)
    keep = len(history) - 1 if keep_from is None else keep_from
    old_history = [first + i for i in range(max(0, min(keep, len(history))))]
    messages.extend(history)
    messages.extend(after or [])
    if pending:
        messages.append(_data.data_message(_data.block(_data.CONFIRMATION, pending)))
    messages.extend(tail or [])
    return Prompt(messages, shrinkable=[*old_history, *notes_at])


# The system message every deliberative step begins with: identical across the steps and turns
# of one client, so the provider serves it (and the conversation after it) from its prompt
# cache. Each step's own instructions follow the conversation, in a trailing system message
# (docs/llm-protocol.md, "Message layout").
SHARED_SYSTEM = """You are the customer-support assistant of the business below. Each request
ends with a system message saying what to do now and in which format; the customer sees only
the answers written for them.
{rules}{confirmation}

{context}"""


def shared_prefix(
    *,
    context: str,
    history: list[dict[str, str]],
    notes: str = "",
    pending: str = "",
    knowledge: list[dict[str, str]] | None = None,
    reference: list[dict[str, str]] | None = None,
) -> Prompt:
    """The stable prefix of every deliberative step (`reason_step`, `synthesize`,
    `refine_critique`, `improve`): our rules and the business's context (system), the
    reference data (`reference`: FAQs the context chose, as data), the notes block, the
    conversation, the knowledge-base excerpts for the message and the confirmation state. A
    step appends its own messages and ends with its instructions (`_data.instructions_message`);
    the language line goes at the end of those (`with_language`)."""
    # The rule for reading a confirmation state only with one to read, as in `assess`: it would
    # cost every call of every other turn ≈ 45 tokens (the first call at the uncached rate).
    confirmation = f"\n{CONFIRMATION_RULE}" if pending else ""
    system = SHARED_SYSTEM.format(rules=RULES, confirmation=confirmation, context=context)
    return chat_messages(
        system,
        history=history,
        notes=notes,
        pending=pending,
        after=knowledge,
        reference=reference,
    )


def extend(prompt: list[dict[str, str]], *messages: dict[str, str]) -> Prompt:
    """`prompt` with `messages` appended; what may be shrunk is kept."""
    shrinkable = prompt.shrinkable if isinstance(prompt, Prompt) else ()
    return Prompt([*prompt, *messages], shrinkable=shrinkable)


def language_line(code: str) -> str:
    """The last line of a customer-facing step's system message: `Reply in Hebrew (he).` Our
    own words from the shipped list — never customer text."""
    code = normalise(code) or "en"
    return f"Reply in {language_name(code)} ({code})."


def review_line(code: str) -> str:
    """What a step that judges or guides the reply (critique, evaluation) is told."""
    code = normalise(code) or "en"
    return (
        f"The reply to the customer must be in {language_name(code)} ({code}); "
        "a reply in another language is a mistake."
    )


_LANGUAGE_LINE = re.compile(
    r"^(?:Reply in|The reply to the customer must be in) [A-Za-z ]+ \((?P<code>[a-z]{2,3})\)[.;]"
)


def _language_at(messages: list[dict[str, str]]) -> int | None:
    """Where `with_language` puts the line: the trailing system message (a step's own
    instructions, after the shared prefix) when the prompt ends with one, else the first
    message when it is a system message."""
    if not messages:
        return None
    if len(messages) > 1 and messages[-1].get("role") == "system":
        return len(messages) - 1
    return 0 if messages[0].get("role") == "system" else None


def language_asked(messages: list[dict[str, str]]) -> str:
    """The language code a prompt asks the reply in — the last line of the system message
    `with_language` writes to, either line ('' when none): what the offline demo model reads,
    as a model would."""
    at = _language_at(messages)
    if at is None:
        return ""
    last = str(messages[at].get("content", "")).rstrip().rsplit("\n", 1)[-1]
    found = _LANGUAGE_LINE.match(last.strip())
    return found.group("code") if found else ""


def with_language(
    messages: list[dict[str, str]], *, step: Step[Any], code: str
) -> list[dict[str, str]]:
    """`messages` with the step's language line (see `Step.language`) at the end of the
    prompt's trailing system message when it ends with one (the step's own instructions, so the
    shared prefix before them stays the same in every language), else at the end of its first
    system message; unchanged for a step that has none or a prompt with no system message.
    A new list: what may be shrunk (`Prompt.shrinkable`) is kept."""
    at = _language_at(messages)
    if not step.language or not code or at is None:
        return messages
    line = language_line(code) if step.language == "reply" else review_line(code)
    system = {**messages[at], "content": f"{messages[at]['content'].rstrip()}\n\n{line}"}
    shrinkable = messages.shrinkable if isinstance(messages, Prompt) else ()
    return Prompt([*messages[:at], system, *messages[at + 1 :]], shrinkable=shrinkable)
