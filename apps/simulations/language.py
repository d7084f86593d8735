"""The language of a reply, for the `reply_language` expectation.

Detected with lingua (lingua-language-detector) over a bounded set of languages, `LANGUAGES`:
fewer candidates make it faster, lighter and more accurate on short texts. The detector is built
once, on first use (its models load lazily, per language, when a text needs them). A text too
short to tell, or one that two languages explain about as well, is "unknown" — and a
`reply_language` check on it fails with that detail rather than guessing."""

from __future__ import annotations

import re
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lingua import LanguageDetector

__all__ = ["LANGUAGES", "UNKNOWN", "detect_language"]

# ISO 639-1 codes the `reply_language` expectation accepts.
LANGUAGES = ("en", "es", "fr", "de", "pt", "it", "nl", "he", "ar")
UNKNOWN = "unknown"
MIN_LETTERS = 12  # fewer letters than this: too short to tell
# How far apart the best two languages must be (lingua's minimum relative distance, 0–0.99):
# closer than this, the text is ambiguous ("unknown").
MIN_DISTANCE = 0.1

_LETTER = re.compile(r"[^\W\d_]", re.UNICODE)
_lock = threading.Lock()
_detector: LanguageDetector | None = None


def _build() -> LanguageDetector:
    from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

    languages: list[Any] = [
        Language.from_iso_code_639_1(getattr(IsoCode639_1, code.upper())) for code in LANGUAGES
    ]
    return (
        LanguageDetectorBuilder.from_languages(*languages)
        .with_minimum_relative_distance(MIN_DISTANCE)
        .build()
    )


def _get() -> LanguageDetector:
    global _detector
    if _detector is None:
        with _lock:
            if _detector is None:
                _detector = _build()
    return _detector


def detect_language(text: str) -> str:
    """The ISO 639-1 code of `text`'s language (one of `LANGUAGES`), or "unknown"."""
    if len(_LETTER.findall(text or "")) < MIN_LETTERS:
        return UNKNOWN
    found = _get().detect_language_of(text)
    if found is None:
        return UNKNOWN
    code = found.iso_code_639_1.name.lower()
    return code if code in LANGUAGES else UNKNOWN
