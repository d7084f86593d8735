"""The languages GuideDesk ships for customers: codes, names and writing direction.

Detection (which language a customer wrote in) and the reply-language rule build on this."""

from __future__ import annotations

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
