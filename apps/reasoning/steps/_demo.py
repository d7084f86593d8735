"""The offline demo model's knowledge, shared by the `respond` and `assess` answers: a small
deterministic responder that recognises intents, order numbers, FAQs and policies from the
structured hint the pipeline passes (it does not read the prompt).

Knowledge questions the FAQs and policies do not answer go to the knowledge base: adaptive
mode's `assess` asks for `kb:<the customer's question>`, and every step answers from the best
fetched chunk that shares words with the question (the hint's `knowledge`)."""

from __future__ import annotations

import re
from typing import Any

ORDER_RE = re.compile(r"\b(?:TH-?\s?)?(\d{5})\b", re.IGNORECASE)
# Written with its prefix: never mistaken for a postal code inside an address.
PREFIXED_ORDER_RE = re.compile(r"\bTH-?\s?(\d{5})\b", re.IGNORECASE)

# intent keywords -> tool name (first match wins, most specific first)
INTENTS: list[tuple[tuple[str, ...], str]] = [
    (("refund", "money back"), "request_refund"),
    (("return", "send back", "send it back"), "request_refund"),  # only with an order number
    (("cancel",), "cancel_order"),
    (("address", "ship to", "deliver to"), "update_shipping_address"),
    (("track", "tracking", "where is", "where's", "shipped yet"), "track_shipment"),
    (("status", "my order", "order"), "get_order_status"),
]
POLICY_WORDS = {
    "policies.returns": ("return", "exchange", "refund policy", "send back"),
    "policies.shipping": ("shipping", "delivery", "deliver", "ship ", "international"),
    "policies.privacy": ("privacy", "personal data", "my data", "gdpr"),
    "policies.terms": ("terms", "warranty", "liability", "price error"),
}
# A question about how something works ("When will I get my refund?") is answered from the
# policies and FAQs, not by starting the action — unless it names an order.
INFO_STARTS = ("when will", "how long", "how do i", "how does", "how can i", "how much")
# No exchange tool: an exchange is explained from the returns policy (it goes through a return).
EXCHANGE_WORDS = ("exchange", "swap", "different size", "another size", "bigger size")
GREETINGS = ("hi", "hello", "hey", "good morning", "good afternoon", "good evening")
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
    }
    if hint.get("confirmed"):
        confirmed = hint["confirmed"]
        return out | {
            "response": "Thanks for confirming — on it.",
            "confidence": 9,
            "tool_call": confirmed["tool"],
            "tool_params": confirmed["params"],
            "is_destructive": True,
        }
    if hint.get("declined"):
        return out | {
            "response": "No problem — I won't go ahead with that. Is there anything "
            "else I can help you with?",
            "confidence": 9,
        }

    informational = not ORDER_RE.search(low) and low.strip().startswith(INFO_STARTS)
    if _bare_order_number(low):  # "Order 12345" answers the previous question
        tool_name = _continued_intent(hint, tools)
    elif informational or any(w in low for w in EXCHANGE_WORDS):
        tool_name = None
    else:
        tool_name = _intent(low, tools) or _continued_intent(hint, tools)
    if tool_name:
        return _tool_answer(out, tool_name, tools[tool_name], text, hint)

    if low.strip(" !.") in GREETINGS or (
        len(low.split()) <= 3 and low.split()[:1] and low.split()[0].strip("!,.") in GREETINGS
    ):
        return out | {
            "response": f"Hi! I'm {hint.get('client_name', 'the')} assistant (offline "
            "demo model). I can check an order, track a parcel, cancel an order or "
            "request a refund, and answer questions about our policies.",
            "confidence": 9,
        }
    if any(w in low for w in ("hour", "open", "phone", "call you", "email", "contact")):
        contact = hint.get("contact", {})
        return out | {
            "response": f"Our hours are {contact.get('hours', 'on our website')}. "
            f"You can reach us at {contact.get('phone', '')} or "
            f"{contact.get('email', '')}.".replace(" or .", "."),
            "confidence": 9,
        }

    policy_key = next(
        (k for k, words in POLICY_WORDS.items() if any(w in low for w in words)), None
    )
    faq = None if any(w in low for w in EXCHANGE_WORDS) else _best_faq(low, hint.get("faqs", []))
    fetched = set(hint.get("fetched", []))
    if faq is not None and (not adaptive or "faqs" in fetched):
        return out | {"response": faq["answer"], "confidence": 8}
    if policy_key and (not adaptive or policy_key in fetched):
        policy = hint.get("policies", {}).get(policy_key.split(".", 1)[1], "")
        return out | {
            "response": _relevant_sentences(policy, low, 3) or "I don't have that policy.",
            "confidence": 8,
        }
    if adaptive and faq is not None:
        return out | {"confidence": 5, "needs_more_context": ["faqs"]}
    if adaptive and policy_key:
        return out | {"confidence": 5, "needs_more_context": [policy_key]}
    from_kb = _knowledge_answer(low, hint.get("knowledge", []))
    if from_kb:
        return out | {"response": from_kb, "confidence": 8}
    kb_key = f"kb:{text.strip()}"
    if adaptive and hint.get("kb") and kb_key not in fetched and _content_words(low):
        return out | {"confidence": 5, "needs_more_context": [kb_key]}
    return out | {
        "response": "I'm the offline demo assistant, so I only know a few things: I "
        "can check or track an order, cancel it, request a refund, and answer "
        "questions about returns, shipping and our FAQs. What would you like to do?",
        "confidence": 7,
    }


def _intent(low: str, tools: dict[str, dict[str, Any]]) -> str | None:
    for words, name in INTENTS:
        if name in tools and any(w in low for w in words):
            if name == "get_order_status" and not ORDER_RE.search(low) and "status" not in low:
                continue
            if "return" in words and not ORDER_RE.search(low):
                continue  # "Can I return boots?" is a policy question
            return name
    return None


def _bare_order_number(low: str) -> bool:
    rest = ORDER_RE.sub(" ", low)
    words = [
        w
        for w in re.findall(r"[a-z']+", rest)
        if w not in {"order", "number", "it's", "its", "is", "my", "the", "no", "th"}
    ]
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
        need = " and ".join(
            "your order number (it looks like TH-12345)"
            if p == "order_id"
            else f"the {p.replace('_', ' ')}"
            for p in missing
        )
        response = f"I'd be happy to help with that. Could you give me {need}?"
    elif destructive:
        response = f"I can {name.replace('_', ' ')} for order {params.get('order_id')}."
    else:
        response = "Let me look that up for you."
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


def _knowledge_answer(low: str, chunks: list[dict[str, str]]) -> str:
    """The most relevant sentences of the best-ranked fetched chunk that shares a word with the
    question ('' when none does)."""
    words = _content_words(low)
    for chunk in chunks:
        text = f"{chunk.get('heading', '')} {chunk.get('text', '')}".lower()
        if words & set(re.findall(r"\w+", text)):
            return _relevant_sentences(chunk.get("text", ""), low, 3)
    return ""


def _relevant_sentences(text: str, low: str, n: int) -> str:
    """The `n` sentences of a policy that share the most (and rarest) words with the question,
    in the policy's order; the first `n` when none does."""
    sentences = re.split(r"(?<=[.!?])\s+", text.strip())
    words = {w for w in re.findall(r"[a-z']+", low) if w not in STOP and len(w) > 2}
    lowered = [s.lower() for s in sentences]
    df = {w: sum(w in s for s in lowered) for w in words}
    scores = [sum(1 / df[w] for w in words if df[w] and w in s) for s in lowered]
    ranked = sorted(range(len(sentences)), key=lambda i: (-scores[i], i))[:n]
    if not any(scores[i] for i in ranked):
        return " ".join(sentences[:n])
    return " ".join(sentences[i] for i in sorted(ranked) if scores[i])
