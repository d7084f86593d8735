"""`insights` — group what went wrong (escalations, low-confidence and questioned answers,
FAILURE notes) by topic and propose one FAQ entry or note per topic, for staff to approve.

Runs outside a turn, once per client and night (`apps.insights.services.generate_insights`). The
model only *proposes*: its output is validated there (conversation ids must be among those it
was given, counts are recomputed from the data) and lands as `pending_review` proposals; nothing
reaches a customer before a person approves it (docs/llm-protocol.md, "insights")."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Literal

from pydantic import Field, field_validator

from apps.reasoning.steps import _data
from apps.reasoning.steps._base import Out, Step

NOTE_TYPES = ("success", "failure", "pattern", "strategy", "tip")


class InsightProposalOut(Out):
    kind: Literal["faq", "note"] = Field(
        description="faq: a new FAQ entry (question + answer); note: a note for the assistant."
    )
    question: str = Field("", description="faq: the customers' question, in their words.")
    answer: str = Field("", description="faq: a draft answer for staff to check.")
    note_type: str = Field("", description="note: one of success, failure, pattern, strategy, tip.")
    content: str = Field("", description="note: the note's text (one or two sentences).")

    @field_validator("kind", mode="before")
    @classmethod
    def _kind(cls, value: Any) -> str:
        return str(value).strip().lower()

    @field_validator("note_type", mode="before")
    @classmethod
    def _note_type(cls, value: Any) -> str:
        return "" if value is None else str(value).strip().lower()

    @field_validator("question", "answer", "content", mode="before")
    @classmethod
    def _text(cls, value: Any) -> str:
        return "" if value is None else str(value).strip()


class InsightTopicOut(Out):
    title: str = Field(description="A short name for the topic.")
    count: int = Field(0, description="How many of the given items are about this topic.")
    conversation_ids: list[str] = Field(
        default_factory=list, description="Ids (from the items given) of example conversations."
    )
    proposal: InsightProposalOut

    @field_validator("conversation_ids", mode="before")
    @classmethod
    def _ids(cls, value: Any) -> list[str]:
        if not isinstance(value, list):
            return []
        return [str(item).strip() for item in value if isinstance(item, str | int)]


class InsightsOut(Out):
    topics: list[InsightTopicOut] = Field(
        default_factory=list, description="One entry per topic, most frequent first."
    )


PROMPT = """You review what went wrong in the customer-support conversations of {client_name}
over the last {days} day(s): conversations handed to a human, answers the assistant was not sure
of, answers a second check questioned, and failure notes. The user message holds two data
blocks: the FAQ questions the assistant already has, and the items, one per line: [conversation
id] kind | detail | customer's words.

Group the items by topic (the customer's underlying question or problem). For each topic
that appears at least {min_count} time(s), propose ONE of:
- kind "faq": a new FAQ entry — `question` in the customers' words and a draft `answer` that
  states no fact you were not given (write what staff must fill in, in square brackets);
- kind "note": a note for the assistant (`note_type` pattern, strategy, tip or failure, and
  `content`) when the fix is how to handle such requests rather than a missing fact.
Staff review every proposal before anything reaches a customer. Do not propose an FAQ the
assistant already has.

Return JSON: topics — a list of {{title, count, conversation_ids (ids from the items only),
proposal: {{kind, question, answer, note_type, content}}}}, most frequent topic first, at most
{max_topics} topics."""


def prompt(
    *, client_name: str, days: int, items: str, known: str, min_count: int, max_topics: int
) -> list[dict[str, str]]:
    """System: the task (ours). Data: the FAQ questions the business already has (knowledge:
    they may come from an imported page), then the items (customers' words, failure notes)."""
    system = PROMPT.format(
        client_name=client_name, days=days, min_count=min_count, max_topics=max_topics
    )
    return [
        _data.system_message(system),
        _data.data_message(
            _data.block(_data.KNOWN_FAQS, known or "(none)"),
            _data.block(_data.ITEMS, items or "(none)"),
        ),
    ]


def hint(*, items: list[dict[str, Any]], min_count: int, max_topics: int) -> dict[str, Any]:
    """`items`: [{"conversation": id, "kind": …, "text": the customer's words, "detail": …}]."""
    return {"items": items, "min_count": min_count, "max_topics": max_topics}


# -- the offline demo model's grouping -----------------------------------------------------------
# Deterministic: each item's topic is the first known keyword group its customer text matches
# (else its most frequent content word); topics with at least `min_count` items, largest first
# (ties by title), become FAQ proposals, or a note for tool failures.

_TOPICS: list[tuple[str, tuple[str, ...]]] = [
    ("Refunds", ("refund", "money back")),
    ("Cancelling an order", ("cancel",)),
    ("Returns and exchanges", ("return", "exchange", "send back")),
    ("Shipping and delivery", ("shipping", "delivery", "deliver", "ship ", "courier")),
    ("Order status and tracking", ("track", "where is", "status", "arrive")),
    ("Shipping address changes", ("address",)),
    ("Payment", ("pay", "card", "invoice", "charge")),
    ("Gift cards and vouchers", ("gift", "voucher", "coupon", "discount")),
    ("Warranty and repairs", ("warranty", "repair", "broken", "faulty")),
]
_STOP = {
    "the", "a", "an", "i", "my", "you", "your", "do", "is", "are", "can", "to", "of", "for",
    "in", "on", "it", "what", "how", "and", "or", "me", "we", "with", "if", "does", "there",
    "this", "that", "have", "has", "please", "want", "would", "like", "need", "get", "will",
    "not", "but", "about", "from", "when", "why", "who", "was", "be", "been", "any", "just",
    "hello", "hi", "thanks", "thank", "order", "help",
}  # fmt: skip


def _topic_of(item: dict[str, Any]) -> str:
    low = f" {item.get('text', '')} ".lower()
    for title, words in _TOPICS:
        if any(word in low for word in words):
            return title
    content = [w for w in re.findall(r"[a-z']{3,}", low) if w not in _STOP]
    if not content:
        return "Other requests"
    # most frequent, ties broken alphabetically (Counter keeps first-seen order otherwise)
    word = min(Counter(content).items(), key=lambda pair: (-pair[1], pair[0]))[0]
    return f"Questions about {word}"


def offline(hint: dict[str, Any]) -> dict[str, Any]:
    items: list[dict[str, Any]] = hint.get("items", [])
    min_count = int(hint.get("min_count", 2))
    max_topics = int(hint.get("max_topics", 5))
    groups: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        groups.setdefault(_topic_of(item), []).append(item)
    ranked = sorted(groups.items(), key=lambda pair: (-len(pair[1]), pair[0]))
    topics = []
    for title, members in ranked:
        if len(members) < min_count:
            continue
        ids = list(dict.fromkeys(str(m["conversation"]) for m in members))
        failures = [m for m in members if m.get("kind") in {"tool_failure", "failure_note"}]
        if len(failures) * 2 > len(members):
            proposal = {
                "kind": "note",
                "question": "",
                "answer": "",
                "note_type": "strategy",
                "content": f"{title}: this often fails ({len(members)} times recently). "
                "Tell the customer a person will follow up and hand the conversation over "
                "instead of retrying.",
            }
        else:
            question = next((m["text"] for m in members if m.get("text")), title)
            proposal = {
                "kind": "faq",
                "question": question[:300],
                "answer": f"[Offline demo draft — write the answer about {title.lower()} here "
                "before approving.]",
                "note_type": "",
                "content": "",
            }
        topics.append(
            {"title": title, "count": len(members), "conversation_ids": ids, "proposal": proposal}
        )
        if len(topics) >= max_topics:
            break
    return {"topics": topics}


# What a reply looks like (docs/llm-protocol.md shows it; a test validates it).
EXAMPLE: dict[str, Any] = {
    "topics": [
        {
            "title": "Late refunds",
            "count": 3,
            "conversation_ids": ["3f2a91c0", "a81d04be", "c07e55d2"],
            "proposal": {
                "kind": "faq",
                "question": "When will I get my refund?",
                "answer": "Refunds reach your account within [number] working days.",
                "note_type": "",
                "content": "",
            },
        }
    ]
}


STEP = Step(
    name="insights",
    output=InsightsOut,
    prompt=prompt,
    hint=hint,
    offline=offline,
    description="Batch job: groups what went wrong by topic and proposes FAQ entries or notes.",
    example=EXAMPLE,
)
