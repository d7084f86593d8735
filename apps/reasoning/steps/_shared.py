"""What several steps' prompts share. Kept short: tokens are money (see the cost benchmark)."""

from __future__ import annotations

import re
from typing import Any

from apps.core.languages import language_name, normalise
from apps.reasoning.steps import _data
from apps.reasoning.steps._base import Prompt, Step

RULES = """Rules:
- Answer only from the business information given; if it is not there, say so or ask.
- Use a tool only when the customer asked for what it does. Never invent parameter values:
  if a required value is missing, ask for it.
- Destructive actions (cancel, delete, refund) always need the customer's explicit confirmation
  of the exact details first; GuideDesk asks for it and runs the tool after a "yes".
- Be friendly and concise; write in the language the last line of this message names."""


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
CONFIRMATION_RULE = """A "confirmation state" block, when present, says which action the customer
has just confirmed (call it with exactly those params if that is still what they want) or declined
(do not call it; acknowledge and ask what they would like instead)."""


def chat_messages(
    system: str,
    *,
    history: list[dict[str, str]],
    notes: str = "",
    pending: str = "",
    after: list[dict[str, str]] | None = None,
    keep_from: int | None = None,
) -> Prompt:
    """A chat step's messages, longest-shared first: the system message (our rules and the
    business's context), the notes block, the conversation in its own roles, `after` (e.g.
    deliberation steps), then the turn's confirmation state.

    To fit a small context window the gateway may leave out the history before `keep_from`
    (default: all but its last message, the current customer message), oldest first, and then
    the notes block (`Prompt.shrinkable`); nothing else."""
    messages = [_data.system_message(system)]
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
    return Prompt(messages, shrinkable=[*old_history, *notes_at])


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


def language_asked(messages: list[dict[str, str]]) -> str:
    """The language code a prompt's system message asks the reply in — its last line, either
    line of `with_language` ('' when none): what the offline demo model reads, as a model
    would."""
    if not messages or messages[0].get("role") != "system":
        return ""
    last = str(messages[0].get("content", "")).rstrip().rsplit("\n", 1)[-1]
    found = _LANGUAGE_LINE.match(last.strip())
    return found.group("code") if found else ""


def with_language(
    messages: list[dict[str, str]], *, step: Step[Any], code: str
) -> list[dict[str, str]]:
    """`messages` with the step's language line at the end of its system message (see
    `Step.language`); unchanged for a step that has none or a prompt with no system message.
    A new list: what may be shrunk (`Prompt.shrinkable`) is kept."""
    if not step.language or not code or not messages or messages[0].get("role") != "system":
        return messages
    line = language_line(code) if step.language == "reply" else review_line(code)
    system = {**messages[0], "content": f"{messages[0]['content'].rstrip()}\n\n{line}"}
    shrinkable = messages.shrinkable if isinstance(messages, Prompt) else ()
    return Prompt([system, *messages[1:]], shrinkable=shrinkable)
