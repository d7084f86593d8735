"""English (en): its language pack (apps.core.language_packs)."""

from __future__ import annotations

from apps.core.language_packs._pack import DemoCues, RequestWords

NAME = "English"
NATIVE_NAME = "English"
RTL = False
ORDER = 0
PLURAL_FORMS = "nplurals=2; plural=(n != 1);"
STOP_WORDS = "apps/knowledge/stopwords/en.txt"

# --- the conversation's language (apps.core.languages) -----------------------------------------
# Yes and no, thanks, please, greetings and one-word acknowledgements: no evidence of a language.
SMALL_TALK = (
    "yes yeah yep no nope ok okay thanks thank thx you please pls hi hello hey bye goodbye "
    "sure great perfect fine cool good nice very much lot"
)
# Asking for a language in English: how it names each shipped language, what puts a name after
# "in" / "speak", the request verbs, its "please" and its negations.
REQUEST = RequestWords(
    names={
        "en": "english",
        "es": "spanish",
        "fr": "french",
        "de": "german",
        "pt": "portuguese",
        "it": "italian",
        "nl": "dutch",
        "he": "hebrew",
        "ar": "arabic",
    },
    before=r"\b(?:in|speak|speaks|speaking|talk)\s+",
    verbs=r"\b(?:answer\w*|repl\w*|respond\w*|writ\w*|wrote|speak\w*|talk\w*|continu\w*|"
    r"switch\w*|chat\w*|help\w*|communicat\w*)\b",
    please=r"\b(?:please|pls|plz|thanks?)\b",
    negation=r"\b(?:not|never|cannot)\b|n['’]t\b|\bno\b(?!\s*[,.!;:])",
)

# --- asking for a person (apps.reasoning.services.wants_human) ---------------------------------
WANTS_HUMAN = (
    r"\b(human|real person|live (agent|person|chat)|(talk|speak|chat) (to|with) (a |an )?"
    r"(person|someone|agent|representative|human)|customer service rep|representative)\b"
)

# --- the offline demo model (apps.reasoning.steps._demo) ---------------------------------------
DEMO = DemoCues(
    amount=("how much", "cost", "price", "fee", "charge"),
    refund=("refund", "money back"),
    returns=("return", "send back", "send it back"),
    cancel=("cancel",),
    address=("address", "ship to", "deliver to"),
    track=("track", "tracking", "where is", "where's", "shipped yet"),
    status=("status", "my order", "order"),
    status_words=("status",),
    policies={
        "policies.returns": ("return", "exchange", "refund policy", "send back"),
        "policies.shipping": ("shipping", "delivery", "deliver", "ship ", "international"),
        "policies.privacy": ("privacy", "personal data", "my data", "gdpr"),
        "policies.terms": ("terms", "warranty", "liability", "price error"),
    },
    info_starts=("when will", "how long", "how do i", "how does", "how can i", "how much"),
    exchange=("exchange", "swap", "different size", "another size", "bigger size"),
    greetings=("hi", "hello", "hey", "good morning", "good afternoon", "good evening"),
    contact=("hour", "open", "phone", "call you", "email", "contact"),
    order_filler=("order", "number", "it's", "its", "is", "my", "the", "no", "th"),
    phrases={
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
)

# --- confirmations (apps.reasoning.confirmations) ------------------------------------------------
NO_START = (
    "no",
    "nope",
    "nah",
    "stop",
    "wait",
    "abort",
    "never mind",
    "nevermind",
    "hold on",
    "not now",
    "no thanks",
    "don't",
    "dont",
    "do not",
    "not yet",
    "no way",
    "negative",
    "hang on",
)
NEGATIONS = (
    "no",
    "not",
    "nope",
    "nah",
    "never",
    "stop",
    "don't",
    "dont",
    "do not",
    "nothing",
    "neither",
    "nor",
)
HEDGES = (
    "if",
    "but",
    "maybe",
    "perhaps",
    "think",
    "guess",
    "suppose",
    "probably",
    "possibly",
    "unless",
    "which",
    "what",
    "what's",
    "whats",
    "why",
    "how",
    "when",
    "where",
    "who",
    "whether",
    "wait",
    "hold",
    "later",
    "actually",
    "hmm",
    "hm",
    "hmmm",
    "uhh",
    "first",
    "before",
    "after",
    "instead",
    "only",
    "except",
    "other",
    "another",
    "else",
    "different",
    "also",
    "too",
    "as well",
    "either",
    "or",
    "whatever",
    "kinda",
    "sort of",
    "kind of",
    "unsure",
    "until",
    "till",
    "once",
    "though",
    "although",
    "however",
    "rather",
    "tomorrow",
    "still",
    "yet",
    "mean",
    "depends",
    "assuming",
)

# --- the yes grammar (`confirmations.reading`): every word of a yes must be listed below ------
ASSENT = (
    "very well",
    "yes",
    "go ahead and",
    "please go ahead and",
    "yeah",
    "yea",
    "yep",
    "yup",
    "ya",
    "yas",
    "yess",
    "yesss",
    "yes yes",
    "aye",
    "sure",
    "sure thing",
    "certainly",
    "definitely",
    "absolutely",
    "of course",
    "ofc",
    "indeed",
    "confirm",
    "confirmed",
    "i confirm",
    "go ahead",
    "go for it",
    "please do",
    "do it",
    "let's do it",
    "lets do it",
    "do that",
    "correct",
    "that's right",
    "thats right",
    "that's correct",
    "thats correct",
    "exactly",
    "proceed",
    "please proceed",
    "affirmative",
    "alright",
    "all right",
    "sounds good",
    "that works",
    "works for me",
    "fine by me",
    "yes please",
    "please go ahead",
    "yes sir",
    "yes ma'am",
)
# A negation inside a fixed phrase that says yes: matched whole, never word by word.
IDIOMS = ("no problem", "no worries", "not a problem", "no prob", "no probs")
# Sarcasm-prone: never a yes alone, only beside a strong assent ("ok, perfect").
WEAK = (
    "great",
    "fine",
    "cool",
    "perfect",
    "awesome",
    "good",
    "nice",
    "lovely",
    "excellent",
    "brilliant",
    "wonderful",
    "super",
)
POLITE = (
    "for your help",
    "thank you so much for your help",
    "thanks so much for your help",
    "please",
    "pls",
    "plz",
    "thanks",
    "thank you",
    "thank u",
    "thanks a lot",
    "thanks so much",
    "thank you so much",
    "thank you very much",
    "many thanks",
    "thx",
    "ty",
    "cheers",
    "appreciate it",
    "much appreciated",
    "thanks for your help",
    "thank you for your help",
    "thanks for the help",
    "thanks for checking",
    "thank you kindly",
)
ECHO = (
    "for",
    "go ahead and",
    "please go ahead and",
    "i'm sure",
    "im sure",
    "i am sure",
    "right away",
    "right now",
    "now",
    "asap",
    "for me",
    "i'd like to",
    "id like to",
    "i would like to",
    "i want to",
    "you can",
    "you may",
    "i'd like that",
    "i confirm that",
    "go on",
)
OBJECTS = (
    "it",
    "that",
    "this",
    "that one",
    "this one",
    "the order",
    "my order",
    "order",
    "number",
    "order number",
    "the order please",
)
# The action a tool's name says ("cancel_order", "request_refund"): the verb that may echo it.
CONFIRM_VERBS: dict[str, tuple[str, ...]] = {
    "cancel": ("cancel", "cancellation", "the cancellation"),
    "refund": ("refund", "refund me", "issue the refund"),
    "delete": ("delete",),
    "remove": ("remove",),
}
# An action turned back on itself: never a yes, asked again.
REVERSALS = (
    "undo",
    "reverse",
    "revert",
    "uncancel",
    "un-cancel",
    "reinstate",
    "restore",
    "withdraw",
    "rollback",
    "roll back",
    "take back",
    "take it back",
    "cancel the cancellation",
    "cancel cancellation",
    "cancel my cancellation",
    "cancel the cancel",
    "cancel request",
    "the cancel request",
    "cancellation request",
    "delete the cancel",
    "stop the cancellation",
    "cancel the refund",
    "cancel my refund",
)
SARCASM = (
    "yeah right",
    "yea right",
    "yeah sure whatever",
    "sure sure",
    "just great",
    "oh great",
    "oh perfect",
    "great just great",
    "as if",
    "lol",
    "lmao",
    "suuure",
    "riiight",
    "oh yeah",
    "oh sure",
    "thanks for nothing",
    "🙄",
)

# --- drafts (the unavailable-tool rule, `guards.unavailable_tool_draft_problem`) ---------------
# Openings of a draft that only announces what the assistant is about to do.
HOLDING = (
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
# English words are matched by the tool name's own leading word ("cancel" → "cancelled").
ACTIONS: dict[str, tuple[str, ...]] = {
    "delete": ("remov", "eras"),
    "remove": ("delet", "eras"),
    "change": ("updat", "modif"),
    "update": ("chang", "modif"),
    "book": ("reserv", "schedul"),
    "reschedule": ("moved",),
}
