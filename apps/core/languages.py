"""The languages GuideDesk ships for customers: codes, names and writing direction.

Detection (which language a customer wrote in) and the reply-language rule build on this."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from typing import Any

# Code → English name (the name goes into prompts: "Reply in Hebrew (he)."). The widget, the
# confirmation phrasings and the catalogues ship for each of these.
SHIPPED = {
    "en": "English",
    "es": "Spanish",
    "fr": "French",
    "de": "German",
    "pt": "Portuguese",
    "it": "Italian",
    "nl": "Dutch",
    "he": "Hebrew",
    "ar": "Arabic",
}

# Written right to left (the widget mirrors its layout for these).
RTL = frozenset({"he", "ar", "fa", "ur", "yi"})


def normalise(code: str | None) -> str:
    """'en-GB' / 'EN_us' / ' pt-BR ' → 'en' / 'en' / 'pt'; None or '' → ''."""
    return (code or "").strip().lower().replace("_", "-").split("-")[0]


def is_rtl(code: str | None) -> bool:
    return normalise(code) in RTL


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
# and be `MIN_RATIO` times as likely as the second; otherwise the answer is "" (unsure: the
# conversation keeps its language). Chosen on the shipped set of short customer messages
# (docs/benchmarks.md, "Language detection"): no setting tried there gave a wrong language, only
# more or fewer "unsure".
MIN_LETTERS = 3
SHORT_LETTERS = 30
MIN_CONFIDENCE = 0.25
MIN_RATIO = 1.25

_LETTER = re.compile(r"[^\W\d_]", re.UNICODE)
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
    return codes if len(codes) >= 2 else frozenset(SHIPPED)


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
    codes = _candidate_set(candidates) if letters < SHORT_LETTERS else frozenset(SHIPPED)
    values = _detector(codes).compute_language_confidence_values(text)
    if not values:
        return ""
    best = values[0]
    second = values[1].value if len(values) > 1 else 0.0
    if best.value < MIN_CONFIDENCE or best.value < MIN_RATIO * second:
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
    """The language a turn replies in: the customer message's detected language when the client
    allows it, else the client's default language. A message too short to tell ("12345", "ok":
    `detected` is '') keeps the conversation in its `current` language, when allowed."""
    allowed = allowed_languages(client)
    default = normalise(client.language) or "en"
    code = normalise(detected) or normalise(current)
    return code if code in allowed else default
