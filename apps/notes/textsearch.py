"""Which PostgreSQL text-search configuration a language uses (stemming, stop words)."""

from __future__ import annotations

# The configurations every supported PostgreSQL (13+) ships (`\dF`); a language without one
# searches with 'simple'.
_CONFIGS = {
    "ar": "arabic",
    "da": "danish",
    "nl": "dutch",
    "en": "english",
    "fi": "finnish",
    "fr": "french",
    "de": "german",
    "el": "greek",
    "hu": "hungarian",
    "id": "indonesian",
    "ga": "irish",
    "it": "italian",
    "lt": "lithuanian",
    "ne": "nepali",
    "no": "norwegian",
    "nb": "norwegian",
    "nn": "norwegian",
    "pt": "portuguese",
    "ro": "romanian",
    "ru": "russian",
    "es": "spanish",
    "sv": "swedish",
    "ta": "tamil",
    "tr": "turkish",
}


def search_config_for(language: str) -> str:
    """'en' / 'en-GB' / 'EN_us' → 'english'; unknown or empty → 'simple'."""
    base = (language or "").strip().lower().replace("_", "-").split("-")[0]
    return _CONFIGS.get(base, "simple")
