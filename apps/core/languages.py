"""The languages GuideDesk ships for customers — codes, names and writing direction, read from
the language packs (`apps.core.language_packs`, one module per language).

Detection (which language a text is written in), the evidence that moves a conversation to
another language (`language_evidence`: the conversation's language is sticky) and the
reply-language rule build on this."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from apps.core import language_packs
from apps.core.language_packs import RequestWords


# Code → English name of every language pack (`apps.core.language_packs`), in the packs' order:
# the name goes into prompts ("Reply in Hebrew (he)."). A live view: a pack registered later
# (a test's) is in it.
class _Shipped(Mapping[str, str]):
    def __getitem__(self, code: str) -> str:
        pack = language_packs.get(code)
        if pack is None:
            raise KeyError(code)
        return pack.name

    def __iter__(self) -> Iterator[str]:
        return iter(language_packs.codes())

    def __len__(self) -> int:
        return len(language_packs.codes())

    def __repr__(self) -> str:
        return repr(dict(self))


SHIPPED: Mapping[str, str] = _Shipped()

# Right-to-left languages a page may be written in that no pack ships (the widget mirrors its
# layout for these too).
_OTHER_RTL = frozenset({"fa", "ur", "yi"})


@language_packs.derived
def rtl_codes() -> frozenset[str]:
    """Written right to left: the packs that say so, and `_OTHER_RTL`."""
    return _OTHER_RTL | {pack.code for pack in language_packs.packs() if pack.rtl}


@language_packs.derived
def shipped_codes() -> frozenset[str]:
    """The detector's set: every pack's code."""
    return frozenset(language_packs.codes())


def normalise(code: str | None) -> str:
    """'en-GB' / 'EN_us' / ' pt-BR ' → 'en' / 'en' / 'pt'; None or '' → ''."""
    return (code or "").strip().lower().replace("_", "-").split("-")[0]


def is_rtl(code: str | None) -> bool:
    return normalise(code) in rtl_codes()


def language_name(code: str | None) -> str:
    """The English name of a shipped language; the code itself for any other."""
    base = normalise(code)
    return SHIPPED.get(base, base)


# Detection (lingua-language-detector). A detector is built once per candidate set and cached;
# lingua loads each language's models lazily, the first time a text needs them.
#
# A text with fewer letters than `MIN_LETTERS` is too short to tell ("ok", "12345") — except
# in a script only one shipped language uses (Hebrew, Arabic): lingua decides those by script.
# A text shorter than `SHORT_LETTERS` is judged among the client's allowed languages only
# (fewer candidates: "gracias" cannot come out Portuguese for a client that serves en and es);
# a longer one among all shipped languages. The best language must reach `MIN_CONFIDENCE`
# and be `MIN_RATIO` times as likely as the second; otherwise the answer is "" (unsure). A
# conversation's language does not follow this guess (see `language_evidence` below); the
# evaluation checks the assistant's replies with it. Chosen on the shipped set of short
# customer messages (docs/benchmarks.md, "Language detection"): no setting tried there gave a
# wrong language, only more or fewer "unsure".
MIN_LETTERS = 3
SHORT_LETTERS = 30
MIN_CONFIDENCE = 0.25
MIN_RATIO = 1.25

_LETTER = re.compile(r"[^\W\d_]", re.UNICODE)
_DIGIT = re.compile(r"\d", re.UNICODE)
_detectors: dict[frozenset[str], Any] = {}
_detectors_lock = threading.Lock()


def _detector(codes: frozenset[str]) -> Any:
    detector = _detectors.get(codes)
    if detector is None:
        from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

        languages = [
            Language.from_iso_code_639_1(getattr(IsoCode639_1, code.upper()))
            for code in sorted(codes)
        ]
        with _detectors_lock:
            detector = _detectors.get(codes)
            if detector is None:
                detector = LanguageDetectorBuilder.from_languages(*languages).build()
                _detectors[codes] = detector
    return detector


def _candidate_set(candidates: Iterable[str] | None) -> frozenset[str]:
    codes = frozenset(normalise(c) for c in candidates or ()).intersection(SHIPPED)
    return codes if len(codes) >= 2 else shipped_codes()


def detect(text: str, *, candidates: Iterable[str] | None = None) -> str:
    """The shipped language `text` is written in, or "" when unsure.

    `candidates` are the client's allowed languages: a short text is judged among them only
    (when there are at least two), a longer one among all shipped languages."""
    letters = len(_LETTER.findall(text or ""))
    if letters == 0:
        return ""
    scripts_only = _single_script_language(text)
    if scripts_only:
        return scripts_only
    if letters < MIN_LETTERS:
        return ""
    codes = _candidate_set(candidates) if letters < SHORT_LETTERS else shipped_codes()
    return _clear_language(text, codes, confidence=MIN_CONFIDENCE, ratio=MIN_RATIO)


def _clear_language(text: str, codes: frozenset[str], *, confidence: float, ratio: float) -> str:
    """The language of `codes` lingua finds `text` in with at least `confidence`, and at least
    `ratio` times as confident as in the runner-up, or ''."""
    values = _detector(codes).compute_language_confidence_values(text)
    if not values:
        return ""
    best = values[0]
    second = values[1].value if len(values) > 1 else 0.0
    if best.value < confidence or best.value < ratio * second:
        return ""
    code = best.language.iso_code_639_1.name.lower()
    return code if code in SHIPPED else ""


# Letters of a script exactly one shipped language is written in.
_HEBREW = re.compile(r"[\u0590-\u05ff]")
_ARABIC = re.compile(r"[\u0600-\u06ff\u0750-\u077f]")


def _single_script_language(text: str) -> str:
    """'he' or 'ar' when most of the letters are Hebrew or Arabic ("כן", "نعم"), else ''."""
    letters = _LETTER.findall(text)
    for code, script in (("he", _HEBREW), ("ar", _ARABIC)):
        if sum(1 for ch in letters if script.match(ch)) * 2 > len(letters):
            return code
    return ""


def allowed_languages(client: Any) -> list[str]:
    """The languages a client answers in: `Client.languages`, or its default alone."""
    default = normalise(client.language) or "en"
    allowed = [normalise(c) for c in (client.languages or []) if normalise(c)]
    return allowed or [default]


def reply_language(*, detected: str, client: Any, current: str = "") -> str:
    """The language a turn replies in — the conversation's language, which is sticky.

    `detected` is the clear evidence a customer message gave (`language_evidence`: a long clear
    message, or an explicit request): that language when the client allows it, else the
    client's default. Without evidence ('' — an order number, a name, "ok", "Ja") the
    conversation keeps its `current` language, when allowed."""
    allowed = allowed_languages(client)
    default = normalise(client.language) or "en"
    code = normalise(detected) or normalise(current)
    return code if code in allowed else default


# ---------------------------------------------------------------- the conversation's language
# A conversation's language is sticky: it starts from the widget's language (the shop's
# data-language, the page's <html lang>, the browser's) and changes only on clear evidence
# (`language_evidence`): a long enough message clearly in another language, or the customer
# asking for one ("can you answer in Spanish?", "¿puede responder en español?"). Order numbers,
# digits, names, emoji and one-word answers never change it.
#
# A message is long enough with at least `SWITCH_WORDS` words of at least two letters and
# `SWITCH_LETTERS` letters in them, not counting words with a digit (order ids, numbers) nor
# the answers and courtesies of `_small_talk` ("Sí, muchas gracias", "Nein, vielen Dank", "כן,
# בבקשה" say nothing about the conversation's language); and one of its words must have four
# letters or more and not be capitalised (in a script with capitals): a name — "Jean-Pierre de
# la Fontaine", "Maria dos Santos Silva" — has none. It is then judged among all shipped
# languages (Hebrew and Arabic by script), and the best must reach `SWITCH_CONFIDENCE` and be
# `SWITCH_RATIO` times as likely as the second.
SWITCH_WORDS = 3
SWITCH_LETTERS = 12
SWITCH_CONFIDENCE = 0.3
SWITCH_RATIO = 1.5

_WORD = re.compile(r"[^\W\d_]{2,}(?:['’\-][^\W\d_]+)*", re.UNICODE)


# Yes and no, thanks, please, greetings and one-word acknowledgements of every pack
# (`SMALL_TALK`): they say nothing about a conversation's language.
@language_packs.derived
def _small_talk() -> frozenset[str]:
    return frozenset(
        word.replace("’", "'") for pack in language_packs.packs() for word in pack.small_talk
    )


_SENTENCE_END = ".!?¿¡:;…\n"


def _words(text: str) -> list[str]:
    """The words of `text` but names: capitalised words that do not start a sentence (in a
    script with capitals; in German also nouns) — "My name is Hans Müller" → My name is."""
    words = []
    for match in _WORD.finditer(text):
        word = match.group()
        before = text[: match.start()].rstrip()
        if not word[0].isupper() or not before or before[-1] in _SENTENCE_END:
            words.append(word)
    return words


def clear_language(text: str) -> str:
    """The shipped language `text` is clearly written in, or '' when it is too short or too
    mixed to tell (see `SWITCH_WORDS`…): only such a message changes a conversation's language."""
    # Ids and numbers say nothing ("TH-12345", "A12B", "#4412", "١٢٣٤٥"): words with a digit go.
    text = " ".join(word for word in (text or "").split() if not _DIGIT.search(word))
    cased = [ch for ch in _LETTER.findall(text) if ch.lower() != ch.upper()]
    if cased and all(ch.isupper() for ch in cased):
        text = text.lower()  # "WHERE IS MY ORDER": shouted, not a run of names
    words = _words(text)
    small_talk = _small_talk()
    # What counts towards "long enough": not the answers and courtesies ("Nein, vielen Dank").
    counted = [word for word in words if word.lower().replace("’", "'") not in small_talk]
    if len(counted) < SWITCH_WORDS or len("".join(counted)) < SWITCH_LETTERS:
        return ""
    if not any(len(word) >= 4 and not word[0].isupper() for word in counted):
        return ""  # only names and short particles: "Jean-Pierre de la Fontaine"
    scripts_only = _single_script_language(text)
    if scripts_only:
        return scripts_only
    return _confident(" ".join(words))  # judged without the names


def _confident(text: str) -> str:
    """The shipped language lingua finds `text` clearly in (see `SWITCH_CONFIDENCE`), or ''."""
    return _clear_language(text, shipped_codes(), confidence=SWITCH_CONFIDENCE, ratio=SWITCH_RATIO)


def language_evidence(text: str) -> str:
    """The language a customer message moves its conversation to, or '' (it stays): the
    language the customer asks for (`requested_language`), else the one the message is clearly
    written in (`clear_language`)."""
    return requested_language(text) or clear_language(text)


# Asking for a language, per shipped language the request is written in: how it names each
# shipped language, the words that put a language name after "in" ("in Spanish", "en español",
# "auf Deutsch", "בעברית", "بالعربية") or after "speak" ("do you speak Spanish?"), the verbs of
# a request (answer, write, continue…), its "please" and its negations ("I don't speak Spanish"
# asks for nothing). A request is: a language name after "in" or "speak", no negation, and a
# request verb (or "speak" itself) — or a short message of the name and "please" ("Spanish
# please", "auf Deutsch bitte"). A request naming two languages is ambiguous: nothing changes.
# Per pack (`REQUEST`, `apps.core.language_packs.RequestWords`): code of the language the
# request is written in → its words.
@language_packs.derived
def _request_words() -> dict[str, RequestWords]:
    return {pack.code: pack.request for pack in language_packs.packs()}


# "Spanish please": the name and "please" with at most this many words in all.
_PLEASE_WORDS = 5


def requested_language(text: str) -> str:
    """The shipped language the customer asks the conversation to continue in, or '' when the
    message asks for none (see `_request_words`)."""
    text = (text or "").strip()
    if not text:
        return ""
    words = len(_WORD.findall(text))
    asked: set[str] = set()
    for table in _request_words().values():
        if re.search(table.negation, text, re.IGNORECASE):
            continue
        verb = re.search(table.verbs, text, re.IGNORECASE)
        please = words <= _PLEASE_WORDS and re.search(table.please, text, re.IGNORECASE)
        if not (verb or please):
            continue
        for code, name in table.names.items():
            if re.search(rf"(?:{table.before})(?:{name})(?!\w)", text, re.IGNORECASE) or (
                # "Spanish please", "Deutsch, bitte": the name first, in a short message.
                please and re.match(rf"\W*(?:{name})(?!\w)", text, re.IGNORECASE)
            ):
                asked.add(code)
    return asked.pop() if len(asked) == 1 else ""
