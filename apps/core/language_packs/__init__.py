"""The shipped customer languages: one pack per language, one module each (`en.py`, `es.py`, …
`he.py`, `ar.py`), and their registry.

A pack declares everything GuideDesk knows about its language (`_pack.REQUIRED`): its names
(English, for prompts; its own, for settings.LANGUAGES and the admin), its direction, its place
in lists, its catalogue's plural rule, its stop-word file, its small talk and the phrases that
ask for a language (the conversation's sticky language, `apps.core.languages`), the phrases
that ask for a person (`apps.reasoning.services.wants_human`), the offline demo model's cue
words and phrases (`apps.reasoning.steps._demo`), and its confirmation tables (how customers say
yes and no: `apps.reasoning.confirmations`). Everything that lists languages — `SHIPPED`, the
detector's set, settings.LANGUAGES, the Makefile's catalogue list, the plural rules — is built
from the packs, so adding a language is adding one module here (docs/languages.md, "Adding a
language"). A module that lacks a constant fails the import of this package.

Values built from the packs are cached with `derived`; registering a pack (tests register one
of their own) clears them, so every consumer picks it up."""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable

from apps.core.language_packs._pack import (
    REPO,
    SOURCE_LANGUAGE,
    DemoCues,
    LanguagePack,
    LanguagePackError,
    RequestWords,
    pack_of,
)
from apps.core.registry import Registry

__all__ = [
    "DemoCues",
    "LanguagePack",
    "LanguagePackError",
    "RequestWords",
    "codes",
    "derived",
    "get",
    "missing",
    "pack_of",
    "packs",
    "register",
    "require",
    "settings_languages",
    "unregister",
]

_registry: Registry[LanguagePack] = Registry(
    error=LanguagePackError,
    duplicate="two language packs have the code {name}",
    kind=LanguagePack,
    same=lambda old, new: old.module is new.module,
)
_derived: list[Callable[..., object]] = []


def derived[F: Callable[..., object]](build: F) -> F:
    """Cache a value built from the packs (per arguments, like `functools.cache`);
    registering or unregistering a pack clears it."""
    cached = functools.cache(build)
    _derived.append(cached)
    return cached  # type: ignore[return-value]


def _changed() -> None:
    for cached in _derived:
        cached.cache_clear()  # type: ignore[attr-defined]


def register(pack: LanguagePack) -> LanguagePack:
    """Add a pack (discovery does this for every module of this package)."""
    _registry.register(pack.code, pack)
    _changed()
    return pack


def unregister(code: str) -> None:
    """Remove a pack (for tests that register one of their own)."""
    _registry.unregister(code)
    _changed()


def get(code: str) -> LanguagePack | None:
    return _registry.get(code)


def require(code: str) -> LanguagePack:
    """The pack of `code`; `KeyError` when none ships it."""
    return _registry.require(code)


@derived
def packs() -> tuple[LanguagePack, ...]:
    """Every pack, in the order lists of languages show them (`ORDER`)."""
    return tuple(sorted(_registry.values(), key=lambda pack: (pack.order, pack.code)))


@derived
def codes() -> tuple[str, ...]:
    return tuple(pack.code for pack in packs())


def settings_languages() -> list[tuple[str, str]]:
    """settings.LANGUAGES: (code, the name in the language itself) of every pack."""
    return [(pack.code, pack.native_name) for pack in packs()]


def missing() -> list[str]:
    """What a pack lacks outside its module: another pack's name in its request phrases, its
    stop-word file, its translation catalogue (`locale/<code>/`, but for English, the source
    language) and the widget's (`static/widget/i18n/<code>.json`). Empty when nothing is."""
    problems = [
        f"{pack.code}: REQUEST names no {other}"
        for pack in packs()
        for other in codes()
        if not pack.request.names.get(other)
    ]
    for pack in packs():
        files = [pack.stop_words, REPO / "static" / "widget" / "i18n" / f"{pack.code}.json"]
        if pack.code != SOURCE_LANGUAGE:
            files.append(REPO / "locale" / pack.code / "LC_MESSAGES" / "django.po")
        problems += [
            f"{pack.code}: no {path.relative_to(REPO)}" for path in files if not path.is_file()
        ]
    return problems


def _discover() -> None:
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            register(pack_of(importlib.import_module(f"{__name__}.{info.name}")))


_discover()
