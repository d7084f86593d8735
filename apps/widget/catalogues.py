"""The widget's words: one JSON catalogue per language in `static/widget/i18n/<lang>.json`.

The chat frame, the loader and the address-confirmation page all read these (the browser fetches
them as static files; the server renders the first screen from them), so a language is shipped
for the widget exactly when its file is there. Django's .po catalogues are not used for the
widget's own words; the server's replies (confirmation questions, hand-off notices…) are.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from pathlib import Path

from django.conf import settings

from apps.core.languages import is_rtl, normalise

FALLBACK = "en"
_PLACEHOLDER = re.compile(r"%\((\w+)\)s")
_CODE = re.compile(r"^[a-z]{2,3}$")


def catalogue_dir() -> Path:
    return Path(settings.BASE_DIR) / "static" / "widget" / "i18n"


@functools.cache
def shipped() -> tuple[str, ...]:
    """The languages the widget has a catalogue for (en first)."""
    codes = sorted(p.stem for p in catalogue_dir().glob("*.json") if _CODE.match(p.stem))
    return tuple(sorted(codes, key=lambda code: code != FALLBACK))


@functools.cache
def catalogue(code: str) -> dict[str, str]:
    """A language's strings; a key missing from it (never in a shipped file: a test checks)
    falls back to English rather than showing nothing."""
    english = _read(FALLBACK)
    if code == FALLBACK or code not in shipped():
        return english
    return english | _read(code)


def _read(code: str) -> dict[str, str]:
    with (catalogue_dir() / f"{code}.json").open(encoding="utf-8") as f:
        data = json.load(f)
    return {str(k): str(v) for k, v in data.items()}


def placeholders(template: str) -> set[str]:
    return set(_PLACEHOLDER.findall(template))


def fill(template: str, **values: object) -> str:
    """'Chat with %(name)s' + name="Trailhead" → 'Chat with Trailhead' (unknown names stay)."""
    return _PLACEHOLDER.sub(
        lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), template
    )


def accept_language(header: str) -> list[str]:
    """The languages of an Accept-Language header, most wanted first ('he-IL,en;q=0.8')."""
    ranked: list[tuple[float, int, str]] = []
    for index, part in enumerate((header or "").split(",")):
        tag, _, params = part.strip().partition(";")
        quality = 1.0
        if params.strip().startswith("q="):
            try:
                quality = float(params.strip()[2:])
            except ValueError:
                quality = 0.0
        if tag and tag != "*" and quality > 0:
            ranked.append((-quality, index, tag))
    return [tag for _, _, tag in sorted(ranked)]


def choose(candidates: Iterable[str | None]) -> str:
    """The first candidate the widget ships (by its base language), else English."""
    available = shipped()
    for candidate in candidates:
        code = normalise(candidate)
        if code in available:
            return code
    return FALLBACK


def direction(code: str) -> str:
    return "rtl" if is_rtl(code) else "ltr"
