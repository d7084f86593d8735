"""The offline demo model's knowledge, shared by the `respond`, `assess` and `compose` answers: a
small deterministic responder that recognises intents, order numbers, FAQs and policies from the
structured hint the pipeline passes. Like a model, it writes in the language the prompt asks for
(`hint["language"]`, read from the system message's last line by apps.reasoning.offline):
English, Spanish and Hebrew, from the per-language phrases below (`PHRASES`); any other
language gets the English phrases. The business's own texts (policies, FAQs) are quoted as
written.

Knowledge questions the FAQs and policies do not answer go to the knowledge base: adaptive
mode's `assess` asks for `kb:<the customer's question>`, and every step answers from the best
fetched chunk that shares words with the question (the hint's `knowledge`)."""

from __future__ import annotations

import re
from typing import Any

ORDER_RE = re.compile(r"\b(?:TH-?\s?)?(\d{5})\b", re.IGNORECASE)
# Written with its prefix: never mistaken for a postal code inside an address.
PREFIXED_ORDER_RE = re.compile(r"\bTH-?\s?(\d{5})\b", re.IGNORECASE)

# intent keywords (English, Spanish, Hebrew) -> tool name (first match wins, most specific first)
INTENTS: list[tuple[tuple[str, ...], str]] = [
    (("refund", "money back", "reembolso", "החזר כספי", "זיכוי"), "request_refund"),
    # only with an order number
    (
        ("return", "send back", "send it back", "devolver", "devolución", "להחזיר", "החזרה"),
        "request_refund",
    ),
    (("cancel", "anular", "anula", "לבטל", "בטל", "ביטול"), "cancel_order"),
    (("address", "ship to", "deliver to", "dirección", "כתובת"), "update_shipping_address"),
    (
        (
            "track",
            "tracking",
            "where is",
            "where's",
            "shipped yet",
            "dónde está",
            "seguimiento",
            "rastrear",
            "איפה",
            "מעקב",
        ),
        "track_shipment",
    ),
    (("status", "my order", "order", "estado", "pedido", "הזמנה", "סטטוס"), "get_order_status"),
]
# Words that ask for an order's status outright (without an order number).
STATUS_WORDS = ("status", "estado", "סטטוס")
RETURN_WORDS = ("return", "send back", "send it back", "devolver", "devolución", "להחזיר", "החזרה")
POLICY_WORDS = {
    "policies.returns": (
        "return",
        "exchange",
        "refund policy",
        "send back",
        "devoluci",
        "devolver",
        "cambio",
        "החזרה",
        "להחזיר",
        "החזרות",
    ),
    "policies.shipping": (
        "shipping",
        "delivery",
        "deliver",
        "ship ",
        "international",
        "envío",
        "entrega",
        "משלוח",
    ),
    "policies.privacy": ("privacy", "personal data", "my data", "gdpr", "privacidad", "פרטיות"),
    "policies.terms": ("terms", "warranty", "liability", "price error", "garantía", "אחריות"),
}
# A question about how something works ("When will I get my refund?") is answered from the
# policies and FAQs, not by starting the action — unless it names an order.
INFO_STARTS = (
    "when will",
    "how long",
    "how do i",
    "how does",
    "how can i",
    "how much",
    "¿cuándo",
    "cuándo",
    "¿cuánto",
    "cuánto",
    "¿cómo",
    "cómo",
    "מתי",
    "כמה זמן",
    "איך",
)
# No exchange tool: an exchange is explained from the returns policy (it goes through a return).
EXCHANGE_WORDS = ("exchange", "swap", "different size", "another size", "bigger size", "cambiar")
GREETINGS = (
    "hi",
    "hello",
    "hey",
    "good morning",
    "good afternoon",
    "good evening",
    "hola",
    "buenos días",
    "buenas tardes",
    "שלום",
    "היי",
)
CONTACT_WORDS = (
    "hour",
    "open",
    "phone",
    "call you",
    "email",
    "contact",
    "horario",
    "abren",
    "teléfono",
    "correo",
    "contacto",
    "שעות",
    "פתוחים",
    "טלפון",
)
# Words around an order number that do not make it a new request ("Order 12345").
ORDER_FILLER = {
    "order",
    "number",
    "it's",
    "its",
    "is",
    "my",
    "the",
    "no",
    "th",
    "pedido",
    "número",
    "el",
    "es",
    "mi",
    "de",
    "הזמנה",
    "ההזמנה",
    "מספר",
    "זה",
    "שלי",
    "היא",
}
_WORDS = re.compile(r"[a-zà-ÿ\u0590-\u05ff']+")

# What the demo says, per language: {placeholders} are filled in by `say`.
PHRASES: dict[str, dict[str, str]] = {
    "en": {
        "confirmed": "Thanks for confirming — on it.",
        "declined": "No problem — I won't go ahead with that. Is there anything else I can help "
        "you with?",
        "greeting": "Hi! I'm {client} assistant (offline demo model). I can check an order, "
        "track a parcel, cancel an order or request a refund, and answer questions about our "
        "policies.",
        "hours": "Our hours are {hours}. You can reach us at {phone} or {email}.",
        "no_policy": "I don't have that policy.",
        "policy": "{text}",
        "fallback": "I'm the offline demo assistant, so I only know a few things: I can check "
        "or track an order, cancel it, request a refund, and answer questions about returns, "
        "shipping and our FAQs. What would you like to do?",
        "need": "I'd be happy to help with that. Could you give me {need}?",
        "need_order": "your order number (it looks like TH-12345)",
        "need_other": "the {name}",
        "and": " and ",
        "can_do": "I can {action} for order {order}.",
        "looking": "Let me look that up for you.",
        "failed": "Sorry, I couldn't do that: {error}",
        "cancelled": "Done! Order {order} has been cancelled. A refund of {refund} will go "
        "back to your original payment method within 5 business days.",
        "refunded": "I've submitted refund {refund_id} for {amount} on order {order}; expect "
        "it within {days} business days.",
        "status": "Order {order} (placed {placed_on}, {items} item(s), {total}) is {status}.",
        "tracking": "Order {order} is {status} with {carrier}, tracking number {tracking}.",
        "no_tracking": "Order {order} is still {status}, so there's no tracking number yet.",
        "address": "Done — order {order} will ship to {address}.",
        "done": "Done: {details}",
        "anything_else": " Anything else I can help with?",
        "cannot": "Sorry, I can't do that here.",
    },
    "es": {
        "confirmed": "Gracias por confirmarlo; me pongo con ello.",
        "declined": "De acuerdo, no lo haré. ¿Hay algo más en lo que pueda ayudarle?",
        "greeting": "¡Hola! Soy el asistente de {client} (modelo de demostración sin conexión). "
        "Puedo consultar un pedido, seguir un paquete, cancelar un pedido o solicitar un "
        "reembolso, y responder preguntas sobre nuestras políticas.",
        "hours": "Nuestro horario es {hours}. Puede contactarnos en el {phone} o en {email}.",
        "no_policy": "No tengo esa política.",
        "policy": "Esto dice nuestra política: {text}",
        "fallback": "Soy el asistente de demostración sin conexión y sé pocas cosas: puedo "
        "consultar o seguir un pedido, cancelarlo, solicitar un reembolso y responder "
        "preguntas sobre devoluciones, envíos y nuestras preguntas frecuentes. ¿Qué desea hacer?",
        "need": "Con gusto le ayudo. ¿Me indica {need}?",
        "need_order": "su número de pedido (tiene este aspecto: TH-12345)",
        "need_other": "el dato «{name}»",
        "and": " y ",
        "can_do": "Puedo {action} el pedido {order}.",
        "looking": "Un momento, lo consulto.",
        "failed": "Lo siento, no he podido hacerlo: {error}",
        "cancelled": "¡Hecho! El pedido {order} ha sido cancelado. El reembolso de {refund} "
        "volverá a su método de pago original en un plazo de 5 días hábiles.",
        "refunded": "He solicitado el reembolso {refund_id} de {amount} del pedido {order}; lo "
        "recibirá en un plazo de {days} días hábiles.",
        "status": "El pedido {order} (realizado el {placed_on}, {items} artículo(s), {total}) "
        "está en estado: {status}.",
        "tracking": "El pedido {order} está en estado «{status}» con {carrier}; número de "
        "seguimiento {tracking}.",
        "no_tracking": "El pedido {order} sigue en estado «{status}», así que aún no tiene "
        "número de seguimiento.",
        "address": "Hecho: el pedido {order} se enviará a {address}.",
        "done": "Hecho: {details}",
        "anything_else": " ¿Puedo ayudarle en algo más?",
        "cannot": "Lo siento, eso no lo puedo hacer aquí.",
    },
    "he": {
        "confirmed": "תודה על האישור, אני מטפל בזה.",
        "declined": "אין בעיה, לא אבצע את הפעולה. אפשר לעזור במשהו אחר?",
        "greeting": "שלום! אני העוזר של {client} (מודל הדגמה לא מקוון). אני יכול לבדוק הזמנה, "
        "לעקוב אחר משלוח, לבטל הזמנה או לבקש החזר כספי, ולענות על שאלות לגבי המדיניות שלנו.",
        "hours": "שעות הפעילות שלנו: {hours}. אפשר להשיג אותנו בטלפון {phone} או במייל {email}.",
        "no_policy": "אין לי את המדיניות הזאת.",
        "policy": "כך כתוב במדיניות שלנו: {text}",
        "fallback": "אני עוזר ההדגמה הלא מקוון, ואני יודע רק כמה דברים: אני יכול לבדוק הזמנה או "
        "לעקוב אחריה, לבטל אותה, לבקש החזר כספי ולענות על שאלות לגבי החזרות, משלוחים ושאלות "
        "נפוצות. במה אפשר לעזור?",
        "need": "אשמח לעזור. תוכלו למסור לי {need}?",
        "need_order": "את מספר ההזמנה (הוא נראה כך: TH-12345)",
        "need_other": "את {name}",
        "and": " וגם ",
        "can_do": "אני יכול לבצע {action} להזמנה {order}.",
        "looking": "רק רגע, אני בודק.",
        "failed": "מצטער, לא הצלחתי לבצע את זה: {error}",
        "cancelled": "בוצע! הזמנה {order} בוטלה. החזר של {refund} יחזור לאמצעי התשלום המקורי "
        "תוך 5 ימי עסקים.",
        "refunded": "הגשתי את בקשת ההחזר {refund_id} על סך {amount} להזמנה {order}; ההחזר "
        "יתקבל תוך {days} ימי עסקים.",
        "status": "הזמנה {order} (בוצעה ב-{placed_on}, {items} פריטים, {total}) במצב: {status}.",
        "tracking": "הזמנה {order} במצב {status} אצל {carrier}, מספר מעקב {tracking}.",
        "no_tracking": "הזמנה {order} עדיין במצב {status}, ולכן אין לה מספר מעקב עדיין.",
        "address": "בוצע: הזמנה {order} תישלח אל {address}.",
        "done": "בוצע: {details}",
        "anything_else": " אפשר לעזור במשהו נוסף?",
        "cannot": "מצטער, את זה אני לא יכול לעשות כאן.",
    },
}
# How each language names the actions (tool names stay as they are in others).
ACTIONS: dict[str, dict[str, str]] = {
    "es": {
        "cancel_order": "cancelar",
        "request_refund": "solicitar el reembolso de",
        "update_shipping_address": "cambiar la dirección de envío de",
    },
    "he": {
        "cancel_order": "ביטול",
        "request_refund": "בקשת החזר",
        "update_shipping_address": "שינוי כתובת משלוח",
    },
}


def say(hint: dict[str, Any], key: str, **values: Any) -> str:
    """The phrase `key` in the language the prompt asked for (English when it has none)."""
    phrases = PHRASES.get(str(hint.get("language", "")), PHRASES["en"])
    return phrases[key].format(**values)


def action_name(hint: dict[str, Any], tool: str) -> str:
    return ACTIONS.get(str(hint.get("language", "")), {}).get(tool, tool.replace("_", " "))


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
    if hint.get("confirmed"):
        confirmed = hint["confirmed"]
        return out | {
            "response": say(hint, "confirmed"),
            "confidence": 9,
            "tool_call": confirmed["tool"],
            "tool_params": confirmed["params"],
            "is_destructive": True,
        }
    if hint.get("declined"):
        return out | {
            "response": say(hint, "declined"),
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

    if low.strip(" !.¡") in GREETINGS or (
        len(low.split()) <= 3 and low.split()[:1] and low.split()[0].strip("!,.¡") in GREETINGS
    ):
        return out | {
            "response": say(hint, "greeting", client=hint.get("client_name", "the")),
            "confidence": 9,
        }
    if any(w in low for w in CONTACT_WORDS):
        contact = hint.get("contact", {})
        return out | {
            "response": say(
                hint,
                "hours",
                hours=contact.get("hours", "—"),
                phone=contact.get("phone", ""),
                email=contact.get("email", ""),
            ),
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
        relevant = _relevant_sentences(policy, low, 3)
        return out | {
            "response": say(hint, "policy", text=relevant) if relevant else say(hint, "no_policy"),
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
        "response": say(hint, "fallback"),
        "confidence": 7,
    }


def _intent(low: str, tools: dict[str, dict[str, Any]]) -> str | None:
    for words, name in INTENTS:
        if name in tools and any(w in low for w in words):
            if (
                name == "get_order_status"
                and not ORDER_RE.search(low)
                and not any(w in low for w in STATUS_WORDS)
            ):
                continue
            if words[0] == RETURN_WORDS[0] and not ORDER_RE.search(low):
                continue  # "Can I return boots?" is a policy question
            return name
    return None


def _bare_order_number(low: str) -> bool:
    rest = ORDER_RE.sub(" ", low)
    words = [w for w in _WORDS.findall(rest) if w not in ORDER_FILLER]
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


# A question that asks for an amount (a price, a fee, how much), in each shipped language: its
# answer is the sentence that holds one, not the one that shares the most words with it.
AMOUNT_CUES = (
    "how much", "cost", "price", "fee", "charge",  # en
    "cuánto", "cuanto", "precio", "cuesta", "tarifa",  # es
    "wie viel", "wieviel", "kostet", "preis", "gebühr",  # de
    "combien", "prix", "coûte", "tarif", "frais",  # fr
    "quanto", "prezzo", "costa",  # it
    "hoeveel", "prijs", "kost",  # nl
    "preço", "custa",  # pt
    "كم", "سعر", "تكلفة", "رسوم",  # ar
    "כמה", "מחיר", "עולה", "עלות",  # he
)  # fmt: skip
_AMOUNT = re.compile(r"[$€£₪]\s?\d|\d\s?(?:€|\$|£|₪|usd|eur|gbp)\b", re.IGNORECASE)


def _asks_amount(low: str) -> bool:
    return any(cue in low for cue in AMOUNT_CUES)


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
    if worded and language not in PHRASES:
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
