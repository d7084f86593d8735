"""The offline demo model's knowledge, shared by the `respond`, `assess` and `compose` answers: a
small deterministic responder that recognises intents, order numbers, FAQs and policies from the
structured hint the pipeline passes. Like a model, it writes in the language the prompt asks for
(`hint["language"]`, read from the system message's last line by apps.reasoning.llm.offline):
English, Spanish and Hebrew, from the phrases of their language packs (`DEMO.phrases`,
apps/core/language_packs/); any other language gets the English phrases. It recognises the cue
words of every pack (`cues`). The business's own texts (policies, FAQs) are quoted as
written.

Knowledge questions the FAQs and policies do not answer go to the knowledge base: adaptive
mode's `assess` asks for `kb:<the customer's question>`, and every step answers from the best
fetched chunk that shares words with the question (the hint's `knowledge`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from apps.core import language_packs

ORDER_RE = re.compile(r"\b(?:TH-?\s?)?(\d{5})\b", re.IGNORECASE)
# Written with its prefix: never mistaken for a postal code inside an address.
PREFIXED_ORDER_RE = re.compile(r"\bTH-?\s?(\d{5})\b", re.IGNORECASE)


@dataclass(frozen=True)
class Cues:
    """The demo's words of every language pack (`DEMO`: `apps.core.language_packs.DemoCues`),
    joined: the demo recognises a cue in any language and answers in the one asked for."""

    # intent keywords -> tool name (first match wins, most specific first)
    intents: tuple[tuple[tuple[str, ...], str], ...]
    returns: tuple[str, ...]  # a return: only with an order number
    status_words: tuple[str, ...]  # ask for an order's status outright (no order number)
    policies: dict[str, tuple[str, ...]]
    # A question about how something works ("When will I get my refund?") is answered from
    # the policies and FAQs, not by starting the action — unless it names an order.
    info_starts: tuple[str, ...]
    # No exchange tool: an exchange is explained from the returns policy (it goes through a
    # return).
    exchange: tuple[str, ...]
    greetings: tuple[str, ...]
    contact: tuple[str, ...]
    # Words around an order number that do not make it a new request ("Order 12345").
    order_filler: frozenset[str]
    # A question that asks for an amount (a price, a fee, how much): its answer is the
    # sentence that holds one, not the one that shares the most words with it.
    amount: tuple[str, ...]
    phrases: dict[str, dict[str, str]]  # what the demo says, per language it speaks
    actions: dict[str, dict[str, str]]  # how each language names the actions


_POLICY_KEYS = ("policies.returns", "policies.shipping", "policies.privacy", "policies.terms")


@language_packs.derived
def cues() -> Cues:
    demos = [pack.demo for pack in language_packs.packs()]

    def joined(name: str) -> tuple[str, ...]:
        return tuple(word for demo in demos for word in getattr(demo, name))

    returns = joined("returns")
    return Cues(
        intents=(
            (joined("refund"), "request_refund"),
            (returns, "request_refund"),
            (joined("cancel"), "cancel_order"),
            (joined("address"), "update_shipping_address"),
            (joined("track"), "track_shipment"),
            (joined("status"), "get_order_status"),
        ),
        returns=returns,
        status_words=joined("status_words"),
        policies={
            key: tuple(w for demo in demos for w in demo.policies.get(key, ()))
            for key in _POLICY_KEYS
        },
        info_starts=joined("info_starts"),
        exchange=joined("exchange"),
        greetings=joined("greetings"),
        contact=joined("contact"),
        order_filler=frozenset(joined("order_filler")),
        amount=joined("amount"),
        phrases={p.code: p.demo.phrases for p in language_packs.packs() if p.demo.phrases},
        actions={p.code: p.demo.actions for p in language_packs.packs() if p.demo.actions},
    )


def phrases() -> dict[str, dict[str, str]]:
    """What the demo says, per language it speaks (a pack's `DEMO.phrases`): {placeholders}
    are filled in by `say`."""
    return cues().phrases


_WORDS = re.compile(r"[a-zà-ÿ\u0590-\u05ff']+")


def say(hint: dict[str, Any], key: str, **values: Any) -> str:
    """The phrase `key` in the language the prompt asked for (English when it has none)."""
    spoken = phrases()
    return spoken.get(str(hint.get("language", "")), spoken["en"])[key].format(**values)


def action_name(hint: dict[str, Any], tool: str) -> str:
    named = cues().actions.get(str(hint.get("language", "")), {})
    return named.get(tool, tool.replace("_", " "))


STOP = {
    "the",
    "a",
    "an",
    "i",
    "my",
    "you",
    "your",
    "do",
    "is",
    "are",
    "can",
    "to",
    "of",
    "for",
    "in",
    "on",
    "it",
    "what",
    "how",
    "and",
    "or",
    "me",
    "we",
    "with",
    "if",
    "does",
    "there",
}


def answer(hint: dict[str, Any], *, adaptive: bool) -> dict[str, Any]:
    """The `respond` answer, or with `adaptive=True` the `assess` answer (which may ask for
    more context instead of answering from context it has not fetched)."""
    text: str = hint.get("user_text", "")
    low = text.lower()
    tools = {t["name"]: t for t in hint.get("tools", [])}
    out: dict[str, Any] = {
        "response": "",
        "confidence": 8,
        "tool_call": None,
        "tool_params": {},
        "missing_params": [],
        "is_destructive": False,
        "needs_confirmation": False,
        "needs_more_context": [],
        "complaint": False,
    }
    settled = _settled_answer(hint)
    if settled is not None:
        return out | settled
    tool_name = _requested_tool(hint, low, tools)
    if tool_name:
        return _tool_answer(out, tool_name, tools[tool_name], text, hint)
    return out | (
        _small_talk_answer(hint, low) or _knowledge_answer_or_need(hint, text, adaptive=adaptive)
    )


def _settled_answer(hint: dict[str, Any]) -> dict[str, Any] | None:
    """The answer to a confirmation the customer settled (yes: run it; no: it is dropped)."""
    if hint.get("confirmed"):
        confirmed = hint["confirmed"]
        return {
            "response": say(hint, "confirmed"),
            "confidence": 9,
            "tool_call": confirmed["tool"],
            "tool_params": confirmed["params"],
            "is_destructive": True,
        }
    if hint.get("declined"):
        return {
            "response": say(hint, "declined"),
            "confidence": 9,
        }
    return None


def _requested_tool(hint: dict[str, Any], low: str, tools: dict[str, dict[str, Any]]) -> str | None:
    """The tool the message asks for, if any: a question about how something works, or about
    an exchange, asks for none."""
    informational = not ORDER_RE.search(low) and low.strip().startswith(cues().info_starts)
    if _bare_order_number(low):  # "Order 12345" answers the previous question
        return _continued_intent(hint, tools)
    if informational or any(w in low for w in cues().exchange):
        return None
    return _intent(low, tools) or _continued_intent(hint, tools)


def _small_talk_answer(hint: dict[str, Any], low: str) -> dict[str, Any] | None:
    """A greeting back, or the business's opening hours and contact details."""
    if low.strip(" !.¡") in cues().greetings or (
        len(low.split()) <= 3
        and low.split()[:1]
        and low.split()[0].strip("!,.¡") in cues().greetings
    ):
        return {
            "response": say(hint, "greeting", client=hint.get("client_name", "the")),
            "confidence": 9,
        }
    if any(w in low for w in cues().contact):
        contact = hint.get("contact", {})
        return {
            "response": say(
                hint,
                "hours",
                hours=contact.get("hours", "—"),
                phone=contact.get("phone", ""),
                email=contact.get("email", ""),
            ),
            "confidence": 9,
        }
    return None


def _knowledge_answer_or_need(hint: dict[str, Any], text: str, *, adaptive: bool) -> dict[str, Any]:
    """An answer from an FAQ, a policy or the knowledge base; in adaptive mode, a request for
    the context that would answer it when it has not been fetched yet; else the fallback."""
    low = text.lower()
    policy_key = next(
        (k for k, words in cues().policies.items() if any(w in low for w in words)), None
    )
    faq = None if any(w in low for w in cues().exchange) else _best_faq(low, hint.get("faqs", []))
    fetched = set(hint.get("fetched", []))
    if faq is not None and (not adaptive or "faqs" in fetched):
        return {"response": faq["answer"], "confidence": 8}
    if policy_key and (not adaptive or policy_key in fetched):
        policy = hint.get("policies", {}).get(policy_key.split(".", 1)[1], "")
        relevant = _relevant_sentences(policy, low, 3)
        return {
            "response": say(hint, "policy", text=relevant) if relevant else say(hint, "no_policy"),
            "confidence": 8,
        }
    if adaptive and faq is not None:
        return {"confidence": 5, "needs_more_context": ["faqs"]}
    if adaptive and policy_key:
        return {"confidence": 5, "needs_more_context": [policy_key]}
    from_kb = _knowledge_answer(low, hint.get("knowledge", []))
    if from_kb:
        return {"response": from_kb, "confidence": 8}
    kb_key = f"kb:{text.strip()}"
    if adaptive and hint.get("kb") and kb_key not in fetched and _content_words(low):
        return {"confidence": 5, "needs_more_context": [kb_key]}
    return {
        "response": say(hint, "fallback"),
        "confidence": 7,
    }


def _intent(low: str, tools: dict[str, dict[str, Any]]) -> str | None:
    for words, name in cues().intents:
        if name in tools and any(w in low for w in words):
            if (
                name == "get_order_status"
                and not ORDER_RE.search(low)
                and not any(w in low for w in cues().status_words)
            ):
                continue
            if words is cues().returns and not ORDER_RE.search(low):
                continue  # "Can I return boots?" is a policy question
            return name
    return None


def _bare_order_number(low: str) -> bool:
    rest = ORDER_RE.sub(" ", low)
    words = [w for w in _WORDS.findall(rest) if w not in cues().order_filler]
    return bool(ORDER_RE.search(low)) and not words


def _continued_intent(hint: dict[str, Any], tools: dict[str, dict[str, Any]]) -> str | None:
    """'Order 12345' right after 'Cancel my order', or the new address right after 'Change
    the address of TH-12345': carry the earlier request forward."""
    earlier = [m["text"].lower() for m in hint.get("history", [])[:-1] if m["role"] == "user"]
    if (
        earlier
        and _looks_like_address(hint.get("user_text", ""))
        and _intent(earlier[-1], tools) == "update_shipping_address"
    ):
        return "update_shipping_address"
    if not ORDER_RE.search(hint.get("user_text", "")):
        return None
    for text in reversed(earlier[-3:]):
        name = _intent(text, tools)
        if name:
            return name
    return "get_order_status" if "get_order_status" in tools else None


def _tool_answer(
    out: dict[str, Any], name: str, tool: dict[str, Any], text: str, hint: dict[str, Any]
) -> dict[str, Any]:
    params: dict[str, Any] = {}
    address = None
    if name == "update_shipping_address":
        # "… to 12 Pine Street, …": an address starts with its house number ("I need to change
        # the address" names none).
        to = re.search(r"\bto\s+(\d.{9,})$", text, re.IGNORECASE)
        address = to.group(1).strip() if to else text.strip() if _looks_like_address(text) else None
    # An address's postal code is not an order number: only "TH-…" counts next to an address.
    match = (
        PREFIXED_ORDER_RE.search(text) if address else ORDER_RE.search(text)
    ) or _order_in_history(hint)
    if match and "order_id" in tool["properties"]:
        params["order_id"] = f"TH-{match.group(1)}"
    if name == "request_refund":
        params["reason"] = text[:200]
    if address:
        params["address"] = address
    missing = [p for p in tool["required"] if p not in params]
    destructive = tool["kind"] == "destructive"
    if missing:
        need = say(hint, "and").join(
            say(hint, "need_order")
            if p == "order_id"
            else say(hint, "need_other", name=p.replace("_", " "))
            for p in missing
        )
        response = say(hint, "need", need=need)
    elif destructive:
        response = say(hint, "can_do", action=action_name(hint, name), order=params.get("order_id"))
    else:
        response = say(hint, "looking")
    return out | {
        "response": response,
        "confidence": 9 if not missing else 8,
        "tool_call": name,
        "tool_params": params,
        "missing_params": missing,
        "is_destructive": destructive,
        "needs_confirmation": destructive,
    }


def _looks_like_address(text: str) -> bool:
    """'12 Pine Street, Boulder, CO 80302, USA': a house number, commas, no question."""
    stripped = text.strip()
    return (
        len(stripped) >= 10
        and "?" not in stripped
        and stripped.count(",") >= 2
        and bool(re.match(r"^\d+\s+\w", stripped))
    )


def _order_in_history(hint: dict[str, Any]) -> re.Match[str] | None:
    for message in reversed(hint.get("history", [])):
        if message["role"] == "user":
            text = message["text"]
            match = PREFIXED_ORDER_RE.search(text) or (
                None if _looks_like_address(text) else ORDER_RE.search(text)
            )
            if match:
                return match
    return None


def _best_faq(low: str, faqs: list[dict[str, str]]) -> dict[str, str] | None:
    words = {w for w in re.findall(r"[a-z']+", low) if w not in STOP and len(w) > 2}
    best, best_score = None, 0
    for faq in faqs:
        q_words = {w for w in re.findall(r"[a-z']+", faq["question"].lower()) if w not in STOP}
        score = len(words & q_words)
        if score > best_score:
            best, best_score = faq, score
    if best_score >= 2 or (best_score == 1 and len(words) == 1):
        return best  # "What is your warranty?" names one thing, and the FAQ has it
    return None


def _content_words(low: str) -> set[str]:
    return {w for w in re.findall(r"\w+", low) if w not in STOP and len(w) > 2}


_AMOUNT = re.compile(r"[$€£₪]\s?\d|\d\s?(?:€|\$|£|₪|usd|eur|gbp)\b", re.IGNORECASE)


def _asks_amount(low: str) -> bool:
    return any(cue in low for cue in cues().amount)


def _knowledge_answer(low: str, chunks: list[dict[str, str]]) -> str:
    """The most relevant sentences of the best-ranked fetched chunk that shares a word with the
    question ('' when none does); for a question about an amount, of the best-ranked such chunk
    that states one, with the sentences that state it first in line."""
    words = _content_words(low)
    sharing = [
        chunk
        for chunk in chunks
        if words
        & set(re.findall(r"\w+", f"{chunk.get('heading', '')} {chunk.get('text', '')}".lower()))
    ]
    if not sharing:
        return ""
    amount = _asks_amount(low)
    if amount:
        stated = [c for c in sharing if _AMOUNT.search(c.get("text", ""))]
        sharing = stated or sharing
    return _relevant_sentences(sharing[0].get("text", ""), low, 3, amount=amount)


def _relevant_sentences(text: str, low: str, n: int, *, amount: bool = False) -> str:
    """The `n` sentences of a policy that share the most (and rarest) words with the question,
    in the policy's order; the first `n` when none does. With `amount`, a sentence (or a table
    row: lines count as sentences) that states an amount and shares a word outranks the rest."""
    sentences = [
        part.strip(" |")
        for line in text.strip().splitlines()
        for part in re.split(r"(?<=[.!?])\s+", line.strip())
        if part.strip(" |-")
    ]
    words = {w for w in re.findall(r"[a-z']+", low) if w not in STOP and len(w) > 2}
    lowered = [s.lower() for s in sentences]
    df = {w: sum(w in s for s in lowered) for w in words}
    scores = [sum(1 / df[w] for w in words if df[w] and w in s) for s in lowered]
    if amount:
        scores = [
            0
            if sentence.endswith("?")
            else score + (10 if score and _AMOUNT.search(sentence) else 0)
            for score, sentence in zip(scores, sentences, strict=True)
        ]  # a question in the text is never the answer to one
    ranked = sorted(range(len(sentences)), key=lambda i: (-scores[i], i))[:n]
    if not any(scores[i] for i in ranked):
        return " ".join(sentences[:n])
    return " ".join(sentences[i] for i in sorted(ranked) if scores[i])


def compose_answer(hint: dict[str, Any]) -> dict[str, Any]:
    """The `compose` answer: the outcome of the tool that ran, in the language asked for. A
    refusal, a tool the demo has no phrase for, or a language it has no phrases in is told in
    GuideDesk's own translated words (`hint["worded"]`, apps/tools/wording.py); amounts are
    written by the language's rules."""
    result = hint.get("result") or {}
    worded = str(hint.get("worded") or "")
    language = str(hint.get("language", "")) or "en"
    if not hint.get("ok"):
        return {"response": worded or say(hint, "failed", error=hint.get("error", "?"))}
    if worded and language not in phrases():
        return {"response": worded}
    order = result.get("order_id", "")
    tool = hint.get("tool")
    shown = hint.get("shown") or {}

    def value(key: str) -> Any:
        """The value as the customer reads it (a status in their words, an amount by their
        language's rules) where the pipeline passed it, else as the tool returned it."""
        return shown.get(key, result.get(key))

    if tool == "cancel_order":
        text = say(hint, "cancelled", order=order, refund=value("refund"))
    elif tool == "request_refund":
        text = say(
            hint,
            "refunded",
            refund_id=result.get("refund_id"),
            amount=value("amount"),
            order=order,
            days=result.get("eta_days", 5),
        )
    elif tool == "get_order_status":
        text = say(
            hint,
            "status",
            order=order,
            placed_on=result.get("placed_on"),
            items=result.get("items"),
            total=value("total"),
            status=value("status"),
        )
    elif tool == "track_shipment":
        text = (
            say(
                hint,
                "tracking",
                order=order,
                status=value("status"),
                carrier=result.get("carrier"),
                tracking=result.get("tracking_number"),
            )
            if result.get("tracking_number")
            else say(hint, "no_tracking", order=order, status=value("status"))
        )
    elif tool == "update_shipping_address":
        text = say(hint, "address", order=order, address=result.get("shipping_address"))
    elif worded:
        return {"response": worded}
    else:
        text = say(hint, "done", details=", ".join(f"{k} {v}" for k, v in result.items()))
    return {"response": text + say(hint, "anything_else")}
