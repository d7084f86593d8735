"""What a language pack declares, and the check that it declares all of it.

A pack is one module of `apps.core.language_packs` named by its ISO 639-1 code (`es.py`). It
holds data only — strings, tuples, dicts, the two small records below — and imports nothing
but this module, so the settings can read it before Django starts. `pack_of` reads a module
into a `LanguagePack` and fails, naming the module and the constant, when one is missing or of
the wrong kind."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["DemoCues", "LanguagePack", "LanguagePackError", "RequestWords", "pack_of"]

REPO = Path(__file__).resolve().parents[3]
# The language GuideDesk's own texts are written in: it has no translation catalogue.
SOURCE_LANGUAGE = "en"


class LanguagePackError(Exception):
    """A language pack that lacks a table (or declares one of the wrong kind)."""


@dataclass(frozen=True)
class RequestWords:
    """How a customer asks, in this language, for the conversation to continue in a language
    (`apps.core.languages.requested_language`): how it names each shipped language (a regex
    per code), the words that put a name after "in" / "speak" (`before`: a regex right before
    the name), the verbs of a request, its "please" and its negations."""

    names: dict[str, str]
    before: str
    verbs: str
    please: str
    negation: str


@dataclass(frozen=True)
class DemoCues:
    """The offline demo model's cue words in this language (`apps/reasoning/steps/_demo.py`):
    per intent the words that start it, and the words that steer its answers. A language the
    demo does not speak leaves them empty (`amount` at least: a knowledge answer about a price
    is picked by it in every language)."""

    amount: tuple[str, ...]  # the question asks for an amount ("how much", "precio")
    refund: tuple[str, ...] = ()
    returns: tuple[str, ...] = ()  # a return: a refund only with an order number
    cancel: tuple[str, ...] = ()
    address: tuple[str, ...] = ()
    track: tuple[str, ...] = ()
    status: tuple[str, ...] = ()  # anything about an order
    status_words: tuple[str, ...] = ()  # asks for the status outright
    policies: dict[str, tuple[str, ...]] = field(default_factory=dict)  # "policies.returns": …
    info_starts: tuple[str, ...] = ()  # "when will", "how long": a question, not an action
    exchange: tuple[str, ...] = ()
    greetings: tuple[str, ...] = ()
    contact: tuple[str, ...] = ()
    order_filler: tuple[str, ...] = ()  # words around an order number ("order", "my")
    # What the demo says ({placeholders} filled in) and how it names each tool's action; empty:
    # the demo answers in English.
    phrases: dict[str, str] = field(default_factory=dict)
    actions: dict[str, str] = field(default_factory=dict)


# The confirmation tables (how customers say yes and no: `apps.reasoning.confirmations`) and
# the unavailable-tool rule's (`HOLDING`, `ACTIONS`). Every pack has these; the optional ones
# are only where a language needs them (clitics, ambiguous assents, formulas, softeners).
CONFIRMATION_TABLES = (
    "ASSENT",
    "IDIOMS",
    "WEAK",
    "POLITE",
    "ECHO",
    "OBJECTS",
    "CONFIRM_VERBS",
    "REVERSALS",
    "SARCASM",
    "NO_START",
    "NEGATIONS",
    "HEDGES",
    "HOLDING",
    "ACTIONS",
)
OPTIONAL_TABLES = ("FORMULAS", "AMBIGUOUS", "PREFIXES", "HEDGE_PREFIXES", "FINAL_PARTICLES")

# Every constant a pack declares and the kind it must be.
REQUIRED: dict[str, type | tuple[type, ...]] = {
    "NAME": str,  # the English name: it goes into prompts ("Reply in Hebrew (he).")
    "NATIVE_NAME": str,  # the name in the language itself (settings.LANGUAGES, the admin)
    "RTL": bool,  # written right to left (the widget mirrors its layout)
    "ORDER": int,  # its place in every list of languages (lowest first)
    "PLURAL_FORMS": str,  # the gettext plural rule of its catalogue
    "STOP_WORDS": str,  # its stop-word file for retrieval, from the repository root
    "SMALL_TALK": str,  # yes/no/thanks/greetings: no evidence of a language
    "REQUEST": RequestWords,
    "WANTS_HUMAN": str,  # a regex: the customer asks for a person
    "DEMO": DemoCues,
    **dict.fromkeys(CONFIRMATION_TABLES, (tuple, dict)),
}


@dataclass(frozen=True)
class LanguagePack:
    """One shipped language, read from its module (`module`: the confirmation tables are read
    from it by name, `apps.reasoning.confirmations.language_data`)."""

    code: str
    name: str
    native_name: str
    rtl: bool
    order: int
    plural_forms: str
    stop_words: Path
    small_talk: tuple[str, ...]
    request: RequestWords
    wants_human: str
    demo: DemoCues
    module: ModuleType


def _checked(module: ModuleType) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, kind in REQUIRED.items():
        value = getattr(module, name, None)
        if value is None:
            raise LanguagePackError(f"the language pack {module.__name__} lacks {name}")
        if not isinstance(value, kind) or (name in CONFIRMATION_TABLES and not value):
            raise LanguagePackError(f"{module.__name__}.{name} is empty or of the wrong kind")
        values[name] = value
    return values


def pack_of(module: ModuleType) -> LanguagePack:
    """The pack a module declares (its code: the module's last name); `LanguagePackError` when
    it lacks a constant of `REQUIRED`."""
    values = _checked(module)
    return LanguagePack(
        code=module.__name__.rsplit(".", 1)[-1],
        name=values["NAME"],
        native_name=values["NATIVE_NAME"],
        rtl=values["RTL"],
        order=values["ORDER"],
        plural_forms=values["PLURAL_FORMS"],
        stop_words=REPO / values["STOP_WORDS"],
        small_talk=tuple(values["SMALL_TALK"].split()),
        request=values["REQUEST"],
        wants_human=values["WANTS_HUMAN"],
        demo=values["DEMO"],
        module=module,
    )
