"""How customers say yes and no to a confirmation question, in every shipped language — data,
read by the confirmation rule (`apps.reasoning.guards.confirmation_answer`).

One module per language (`en.py`, `es.py`, … `ar.py`, plus `common.py` for what is the same in
every language: "ok", 👍), each with five tuples of phrases:

- `YES` — says yes ("sí", "vale", "go ahead", "כן", "نعم");
- `NO_START` — opens a no ("no", "wait", "mejor no");
- `NEGATIONS` — a no wherever it stands ("not", "nunca", "לא");
- `HEDGES` — never a yes, wherever it stands: conditions ("if", "si", "wenn", "אם"), question
  words, doubt, "but", time ("later", "first"), another thing ("other", "also");
- `ECHO` — may stand beside a yes without changing it: the action echoed back ("cancel it",
  "cancélalo", "בטל את ההזמנה"), politeness ("please", "s'il vous plaît", "لو سمحت"), fillers.

For the rule about drafts that stand in for an unavailable tool, each module also has
`HOLDING` (openings of a draft that only announces an action: "let me", "déjame", "רגע") and
`ACTIONS` (per English action word a tool name starts with, its stems in that language:
"cancel" → "anul", "stornier", "ביטל", "الغ").

and `PREFIXES` (clitics written onto words: Hebrew ו/ה/ש…, Arabic و/ال…),
`HEDGE_PREFIXES` (a clitic that makes any word a hedge: Hebrew כש "when") and
`FINAL_PARTICLES` (a hedge word that is only a softener at the end of a clause after a verb:
Dutch "annuleer hem maar").

Everything is normalised the same way (`normalise`): case folded, accents and diacritics
dropped (Hebrew niqqud, Arabic harakat and hamza seats), digits of every script made ASCII,
Hebrew and Arabic punctuation mapped to ASCII, emoji skin tones dropped. The vocabulary of all
shipped languages is built once (`vocabulary()`); the rule tries every language at once, and a
word that means yes in one language and something else in another ("si": yes in Spanish and
Italian, "if" in Spanish and French) is `ambiguous`: it can only say yes standing alone
("Si." / "si, cancélalo"), never inside a clause ("si cancelas …").
"""

from __future__ import annotations

import importlib
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType

from apps.core.languages import SHIPPED

Phrase = tuple[str, ...]

# Hebrew and Arabic punctuation, Spanish inverted marks, typographic quotes → ASCII.
_PUNCTUATION = str.maketrans(
    {
        "\u2019": "'",
        "\u2018": "'",
        "\u02bc": "'",
        "`": "'",
        "\u00b4": "'",
        "\u05f3": "'",  # Hebrew geresh
        "\u05f4": "",  # Hebrew gershayim (inside abbreviations: אח״כ)
        "\u05be": "-",  # Hebrew maqaf
        "\u05c0": "|",  # Hebrew paseq
        "\u05c3": ".",  # Hebrew sof pasuq
        "\u060c": ",",  # Arabic comma
        "\u061b": ";",  # Arabic semicolon
        "\u061f": "?",  # Arabic question mark
        "\u06d4": ".",  # Arabic full stop
        "\u00bf": "?",  # ¿
        "\u00a1": "!",  # ¡
        "\u2026": ".",  # …
        "\u0640": None,  # Arabic tatweel
        "\u0649": "\u064a",  # alef maqsura → ya
        "\u00df": "ss",
    }
)
_INNER_QUOTE = re.compile(r'(?<=[^\W\d_])"(?=[^\W\d_])')
_NUMBER_SIGN = re.compile(r"(?<!\w)(?:n[°o]?|nr|num)\.?\s*(?=#?\d)")
_SKIN_TONES = re.compile("[\U0001f3fb-\U0001f3ff\ufe0e\ufe0f\u200d]")


def _ascii_digits(text: str) -> str:
    return "".join(
        str(unicodedata.decimal(ch)) if ch.isdecimal() and not ch.isascii() else ch for ch in text
    )


def normalise(text: str) -> str:
    """One spelling per word: case folded, accents, niqqud, harakat and format marks dropped,
    every script's digits ASCII, Hebrew/Arabic/Spanish punctuation ASCII."""
    text = _SKIN_TONES.sub("", _ascii_digits(text)).translate(_PUNCTUATION).casefold()
    text = _INNER_QUOTE.sub("", text)  # אח"כ typed with an ASCII quote
    decomposed = unicodedata.normalize("NFKD", text)
    kept = "".join(ch for ch in decomposed if unicodedata.category(ch) not in {"Mn", "Cf"})
    text = unicodedata.normalize("NFC", kept).translate(_PUNCTUATION)
    # "nº 12345", "n° 12345", "No. 12345", "nr. 12345": "number", never the word "no"
    return _NUMBER_SIGN.sub("#", text)


# A word (letters, digits, ' - _ inside; "49.90" / "1,000" stay one word), a clause mark, or a
# symbol (an emoji is a word of its own; other symbols — # $ € quotes — are dropped).
_TOKEN_RE = re.compile(r"(?P<word>[\w'\-]+(?:[.,]\d+)*)|(?P<mark>[,.;:!?|])|(?P<symbol>\S)")
QUESTION = "?"


def tokenise(text: str) -> list[list[str]]:
    """The normalised text as clauses (split at , . ; : ! ? |) of words. A question mark is
    kept as a clause of its own: `["?"]`."""
    clauses: list[list[str]] = [[]]
    for match in _TOKEN_RE.finditer(normalise(text)):
        word, mark, symbol = match.group("word", "mark", "symbol")
        if word:
            word = word.strip("'-")
            if word:
                clauses[-1].append(word)
        elif mark:
            if mark == QUESTION:
                clauses.append([QUESTION])
            clauses.append([])
        elif symbol and unicodedata.category(symbol) == "So":  # emoji and pictographs
            clauses[-1].append(symbol)
    return [c for c in clauses if c]


def _phrases(items: tuple[str, ...]) -> set[Phrase]:
    found: set[Phrase] = set()
    for item in items:
        words = tuple(w for clause in tokenise(item) for w in clause if w != QUESTION)
        if words:
            found.add(words)
    return found


@dataclass(frozen=True)
class Vocabulary:
    """Every shipped language's phrases, normalised. `sources[phrase]` names the languages a
    YES phrase comes from (for the benchmark and the trace)."""

    yes: frozenset[Phrase]
    no_start: frozenset[Phrase]
    negations: frozenset[Phrase]
    hedges: frozenset[Phrase]
    echo: frozenset[Phrase]
    prefixes: tuple[str, ...]  # longest first
    hedge_prefixes: tuple[str, ...]
    final_particles: frozenset[str]  # no hedge at the end of a clause after a verb (nl "maar")
    ambiguous: frozenset[str]  # one-word yes that means something else somewhere
    longest: int  # words in the longest phrase
    yes_words: frozenset[str]  # the one-word yes phrases
    yes_phrases: frozenset[Phrase]  # the yes phrases of several words
    echo_phrases: frozenset[Phrase]  # the echo phrases of several words
    sources: dict[Phrase, tuple[str, ...]]


LANGUAGE_MODULES = ("common", *SHIPPED)


def language_data(code: str) -> ModuleType:
    return importlib.import_module(f"{__name__}.{code}")


@lru_cache(maxsize=1)
def vocabulary() -> Vocabulary:
    """Built once per process from every language module."""
    parts: dict[str, dict[str, set[Phrase]]] = {}
    prefixes: set[str] = set()
    hedge_prefixes: set[str] = set()
    final_particles: set[str] = set()
    for code in LANGUAGE_MODULES:
        module = language_data(code)
        parts[code] = {
            name: _phrases(tuple(getattr(module, name.upper(), ())))
            for name in ("yes", "no_start", "negations", "hedges", "echo")
        }
        prefixes |= {normalise(p) for p in getattr(module, "PREFIXES", ())}
        hedge_prefixes |= {normalise(p) for p in getattr(module, "HEDGE_PREFIXES", ())}
        final_particles |= {normalise(p) for p in getattr(module, "FINAL_PARTICLES", ())}

    def union(name: str) -> set[Phrase]:
        return set().union(*(p[name] for p in parts.values()))

    yes, hedges, negations = union("yes"), union("hedges"), union("negations")
    no_start, echo = union("no_start"), union("echo")
    # A one-word yes that is a hedge, a no or (in a language where it is no yes) an echo word
    # somewhere means different things in different languages: it may only stand alone.
    stop = {p[0] for p in hedges | negations | no_start if len(p) == 1}
    ambiguous = {p[0] for p in yes if len(p) == 1 and p[0] in stop}
    for part in parts.values():
        own_yes = {p[0] for p in part["yes"] if len(p) == 1}
        for phrase in part["echo"]:
            if len(phrase) == 1 and phrase[0] not in own_yes and (phrase in yes):
                ambiguous.add(phrase[0])
    sources: dict[Phrase, tuple[str, ...]] = {}
    for code, part in parts.items():
        for phrase in part["yes"]:
            sources[phrase] = (*sources.get(phrase, ()), code)
    everything = yes | hedges | negations | no_start | echo
    return Vocabulary(
        yes=frozenset(yes),
        no_start=frozenset(no_start),
        negations=frozenset(negations),
        hedges=frozenset(hedges),
        # A one-word echo that is a hedge or a no anywhere is that, not an echo.
        echo=frozenset(p for p in echo if len(p) > 1 or p[0] not in stop),
        prefixes=tuple(sorted(prefixes, key=len, reverse=True)),
        hedge_prefixes=tuple(sorted(hedge_prefixes, key=len, reverse=True)),
        final_particles=frozenset(final_particles),
        ambiguous=frozenset(ambiguous),
        longest=max(len(p) for p in everything),
        yes_words=frozenset(p[0] for p in yes if len(p) == 1),
        yes_phrases=frozenset(p for p in yes if len(p) > 1),
        echo_phrases=frozenset(p for p in echo if len(p) > 1),
        sources=sources,
    )


@dataclass(frozen=True)
class DraftVocabulary:
    """For the unavailable-tool rule (`guards.unavailable_tool_draft_problem`), every shipped
    language at once: openings that only announce an action (`HOLDING`), and per English action
    word a tool name starts with ("cancel", "delete", …) the stems of that action in each
    language (`ACTIONS`), normalised."""

    holding: tuple[str, ...]
    actions: dict[str, frozenset[str]]
    prefixes: tuple[str, ...]


@lru_cache(maxsize=1)
def draft_vocabulary() -> DraftVocabulary:
    holding: set[str] = set()
    actions: dict[str, set[str]] = {}
    for code in LANGUAGE_MODULES:
        module = language_data(code)
        holding |= {normalise(h) for h in getattr(module, "HOLDING", ())}
        for verb, stems in getattr(module, "ACTIONS", {}).items():
            actions.setdefault(verb, set()).update(normalise(stem) for stem in stems)
    return DraftVocabulary(
        holding=tuple(sorted(holding, key=len, reverse=True)),
        actions={verb: frozenset(stems) for verb, stems in actions.items()},
        prefixes=vocabulary().prefixes,
    )
