"""Deliberative mode's business context: what the message needs, not everything.

Every call of a deliberative turn (≈ 10) re-sends the same system prefix, so each token in it is
paid ten times (half price when cached). Standard mode's `context.full_context` (every policy,
about.full and every tool's JSON Schema: ≈ 2,500 tokens on the demo) is kept for standard mode;
deliberative mode sends

    the basics (name, about, hours, contact) · ai_instructions · one line per tool
    (name, kind, parameters) · the names of every section — a part that is the same in every
    turn of the client (the provider caches it across turns) —
    then the sections most relevant to the conversation's last customer messages, in full.

Relevance is a retrieval score over the sections, with no word list of any language: character
trigrams of the message and of each section (the key and its text), weighted by how few sections
hold them (tf-idf, the idf squared), cosine similarity. A section is included when it stands
out — at least `STANDOUT` × the mean score of all sections — and matches the message better than
the basics do (scored alongside the sections: a question the basics answer, "what are your opening
hours?", gets no section however the sections rank among themselves), at most `MAX_SECTIONS`.
Sections of `SMALL_SECTIONS_TOKENS` or fewer in all are all sent. The keys the turn already
fetched (adaptive's `needs_more_context` when "deliberate when needed" escalates) are always
included. A section left out is still named, and the synthesis may ask for it by key in
`needs_more_context` (modes/deliberative.py fetches it and writes the answer again), as adaptive
asks for its keys — so a message in another language than the business's texts costs a round,
never the facts.

A section that is knowledge-base content (`context.DATA_KEYS`: the FAQs a business info document
carries) is chosen like the others but never written into the context (a system message): it
goes to `DeliberativeContext.data`, sent as a data block after it (`context.reference_message`)."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from apps.clients.models import Client
from apps.reasoning.context import (
    DATA_KEYS,
    STATIC_KEYS,
    TOOL_SCHEMA_PREFIX,
    fetch_context,
    minimal_context,
    reference_message,
    signin_line,
    split_data,
)
from apps.reasoning.llm import estimate_tokens
from apps.reasoning.steps import data_blocks
from apps.tools.models import ClientTool

if TYPE_CHECKING:
    from apps.knowledge.retrieval import Hit

# Always in the context (short, and they apply to every answer): not scored.
ALWAYS = ("ai_instructions",)
# Never a section of its own: the basics carry the contact line.
NOT_SECTIONS = ("contact.full",)
STANDOUT = 1.8
MAX_SECTIONS = 2
# Sections this short in all are sent in full: choosing would save next to nothing.
SMALL_SECTIONS_TOKENS = 400
GRAM = 3
# The basics' key when they are scored with the sections (never a section's key).
BASICS = " basics"
_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class DeliberativeContext:
    text: str
    included: list[str]  # the sections sent in full, most relevant first
    listed: list[str]  # every section's key (the ones not included may be asked for)
    scores: dict[str, float] = field(default_factory=dict)
    floor: float = 0.0  # the basics' score: a section scoring no higher is not sent
    data: dict[str, str] = field(default_factory=dict)  # included knowledge sections (data)

    @property
    def available(self) -> list[str]:
        """The sections the synthesis may still ask for."""
        return [k for k in self.listed if k not in self.included]

    def as_data(self) -> dict[str, Any]:
        return {
            "included": self.included,
            "available": self.available,
            "scores": {k: round(v, 3) for k, v in self.scores.items()},
            "floor": round(self.floor, 3),
        }


def grams(text: str) -> Counter[str]:
    """Character trigrams of each word (padded with a space at both ends), case-folded; digits
    alone (order numbers, prices) do not count."""
    out: Counter[str] = Counter()
    for word in _WORD.findall(text.casefold()):
        if word.isdigit():
            continue
        padded = f" {word} "
        out.update(padded[i : i + GRAM] for i in range(len(padded) - GRAM + 1))
    return out


def relevance(query: str, sections: dict[str, str]) -> dict[str, float]:
    """Each section's tf-idf cosine similarity to `query` (0–1) over character trigrams; a
    section's key counts as part of its text (`tool_schema:cancel_order` → "cancel order")."""
    docs = {key: grams(f"{re.sub(r'[_.:]', ' ', key)} {text}") for key, text in sections.items()}
    if not docs:
        return {}
    count = len(docs)
    df = Counter(g for doc in docs.values() for g in doc)
    # Squared: a trigram most sections share ("you", "our") all but stops counting.
    idf = {g: math.log((count + 1) / (n + 0.5)) ** 2 for g, n in df.items()}

    def vector(counts: Counter[str]) -> dict[str, float]:
        return {g: (1 + math.log(n)) * idf[g] for g, n in counts.items() if g in idf}

    wanted = vector(grams(query))
    norm = math.sqrt(sum(v * v for v in wanted.values()))
    scores: dict[str, float] = {}
    for key, doc in docs.items():
        have = vector(doc)
        size = math.sqrt(sum(v * v for v in have.values()))
        dot = sum(v * have.get(g, 0.0) for g, v in wanted.items())
        scores[key] = dot / (norm * size) if norm and size else 0.0
    return scores


def select(
    scores: dict[str, float], *, wanted: Iterable[str] = (), floor: float = 0.0
) -> list[str]:
    """The sections to send in full: those already `wanted`, then the ones that stand out
    (≥ STANDOUT × the mean score) and score above `floor` (and 0), best first, MAX_SECTIONS in
    all (`wanted` beyond it are kept)."""
    chosen = [k for k in wanted if k in scores]
    if scores:
        mean = sum(scores.values()) / len(scores)
        for key, score in sorted(scores.items(), key=lambda item: (-item[1], item[0])):
            if len(chosen) >= MAX_SECTIONS:
                break
            if score > max(floor, 0.0) and score >= STANDOUT * mean and key not in chosen:
                chosen.append(key)
    return chosen


def tool_signature(tool: ClientTool) -> str:
    """One line per tool: name, kind, what it does and its parameters (`*` = required, with
    type, pattern or enum) — what calling it takes; the JSON Schema itself is a section
    (`tool_schema:<name>`) and the guards validate the params against it in code."""
    schema = tool.parameters if isinstance(tool.parameters, dict) else {}
    required = set(schema.get("required") or [])
    params = []
    for name, spec in (schema.get("properties") or {}).items():
        spec = spec if isinstance(spec, dict) else {}
        detail = [str(spec.get("type", "any"))]
        for constraint in ("pattern", "enum", "format"):
            if constraint in spec:
                detail.append(json.dumps(spec[constraint], ensure_ascii=False))
        params.append(f"{name}{'*' if name in required else ''} ({' '.join(detail)})")
    description = " ".join(str(tool.description).split())
    return f"- {tool.name} ({tool.kind}): {description} Params: {', '.join(params) or 'none'}"


def sections_of(*, client: Client, tools: list[ClientTool]) -> tuple[dict[str, str], str]:
    """(the scored sections by key, the instructions text). The FAQs are a section only when
    the business info document carries its own (as `full_context` does)."""
    info = client.business_info if isinstance(client.business_info, dict) else {}
    keys = [k for k in STATIC_KEYS if k not in NOT_SECTIONS]
    if "faqs" not in info:
        keys.remove("faqs")
    keys += [f"{TOOL_SCHEMA_PREFIX}{t.name}" for t in tools]
    found, _ = fetch_context(client=client, tools=tools, keys=keys)
    instructions = "\n".join(found.pop(k) for k in ALWAYS if k in found)
    about = info.get("about", {}) if isinstance(info.get("about"), dict) else {}
    if not about.get("full"):
        found.pop("about.full", None)  # the basics' About line says it already
    return found, instructions


def deliberative_context(
    *,
    client: Client,
    tools: list[ClientTool],
    query: str,
    wanted: Iterable[str] = (),
    signin_tools: list[ClientTool] | None = None,
) -> DeliberativeContext:
    """The context of a deliberative turn about `query` (the conversation's last customer
    messages); `wanted`: keys to include whatever their score."""
    sections, instructions = sections_of(client=client, tools=tools)
    basics = minimal_context(client=client, tools=[]).rsplit("\nTools", 1)[0]
    # The basics are scored with the sections (a key no section has): the reference a section
    # must beat — what the context says anyway.
    scores = relevance(query, {**sections, BASICS: basics})
    floor = scores.pop(BASICS, 0.0)
    if sum(estimate_tokens(text) for text in sections.values()) <= SMALL_SECTIONS_TOKENS:
        included = list(sections)
    else:
        included = select(scores, wanted=[k for k in wanted if k in sections], floor=floor)
    parts = [basics]
    if instructions:
        parts.append(f"## ai_instructions\n{instructions}")
    parts.append("## tools\n" + ("\n".join(tool_signature(t) for t in tools) if tools else "none"))
    if signin_tools:
        parts.append(f"## sign-in\n{signin_line(signin_tools)}")
    if sections:
        parts.append("## sections\n" + section_names(list(sections), tools))
    # The part above is the same in every turn of the client; the turn's own sections follow.
    parts.extend(
        f"## {key}\n{section_body(key, sections[key])}" for key in included if key not in DATA_KEYS
    )
    return DeliberativeContext(
        text="\n\n".join(parts),
        included=included,
        listed=list(sections),
        scores=scores,
        floor=floor,
        data={key: sections[key] for key in included if key in DATA_KEYS},
    )


def section_names(keys: list[str], tools: list[ClientTool]) -> str:
    """The `## sections` list: every key, the tools' schemas as one `tool_schema:<name>` (the
    tools are listed just above), and how to ask for one."""
    schemas = {f"{TOOL_SCHEMA_PREFIX}{t.name}" for t in tools}
    names = [k for k in keys if k not in schemas]
    if schemas & set(keys):
        names.append(f"{TOOL_SCHEMA_PREFIX}<name> (each tool's JSON Schema)")
    return (
        ", ".join(names) + "\nThose not given below can be asked for by key in needs_more_context."
    )


def section_body(key: str, text: str) -> str:
    """A section as the context gives it: a tool's schema without its first line (name, kind
    and description: the tool's line under `## tools` says them)."""
    if key.startswith(TOOL_SCHEMA_PREFIX) and "\n" in text:
        return text.split("\n", 1)[1]
    return text


def sections_text(found: dict[str, str]) -> str:
    """Sections fetched during the turn, as the context writes them."""
    return "\n\n".join(f"## {key}\n{text}" for key, text in found.items())


def fetched_message(found: dict[str, str]) -> list[dict[str, str]]:
    """Sections asked for during the turn, after the loop: those staff configured as a system
    message (like the context in the first system message — never customer text), knowledge
    (`context.DATA_KEYS`: the FAQs) as a data block."""
    configured, data = split_data(found)
    out = []
    if configured:
        text = "More business information (asked for):\n\n" + sections_text(configured)
        out.append({"role": "system", "content": text})
    return [*out, *reference_message(data)]


def knowledge_message(hits: list[Hit]) -> list[dict[str, str]]:
    """The knowledge-base chunks for the shared prefix: the same data block as
    `knowledge.knowledge_message`, each chunk under its heading only. The chunk's id in
    `knowledge.source_label` (the trace and the turn's sources keep it) tells the model nothing
    and would be re-sent in every call of the turn; the synthesis asks for more by search words
    (`kb:<words>`), never by id."""
    if not hits:
        return []
    text = "\n\n".join(
        f"## {h.heading if h.heading and h.heading != h.title else h.title}\n{h.text}" for h in hits
    )
    return [data_blocks.data_message(data_blocks.block(data_blocks.KNOWLEDGE, text))]
