"""How customers say yes and no to a confirmation question, in every shipped language — data,
read by the confirmation grammar (`reading.read`, behind `guards.confirmation_reading`).

The tables live in each language's pack (`apps/core/language_packs/<code>.py`, its
confirmation section), plus `common.py` here for what is the same in every language: "ok", 👍.
The grammar reads an answer as yes only when these tables describe every word of it:

- `ASSENT` — a strong yes ("yes", "sí", "go ahead", "כן", "نعم"); one is needed;
- `IDIOMS` — a yes with a negation in it, matched whole ("no problem", "אין בעיה");
- `WEAK` — sarcasm-prone ("great", "perfect", "fine"): only beside a strong assent;
- `POLITE`, `FORMULAS` — politeness ("please", "merci"); FORMULAS may hold a hedge word
  ("s'il vous plaît", "لو سمحت");
- `ECHO`, `OBJECTS` — the go-ahead and what it is about ("right away", "the order", "ההזמנה");
- `CONFIRM_VERBS` — per action (the word a tool's name holds: "cancel", "refund" …) its verbs
  ("cancélalo", "stornieren", "בטל"); at most one, and only the question's own action;
- `AMBIGUOUS` — one-word assents that are something else elsewhere ("si": "if").

and what vetoes a yes wherever it stands, in any language: `REVERSALS` ("undo", "cancel the
cancellation"), `SARCASM` ("yeah right", "just great"), `NO_START` (opens a no: "no", "wait"),
`NEGATIONS` ("not", "nunca", "לא"), `HEDGES` (conditions, question words, "but", "later",
"other"). A veto is found before the yes grammar runs and no accepting table can hide one
(`build_vocabulary` leaves out phrases that would); see `reading` for the grammar.

For the rule about drafts that stand in for an unavailable tool, each pack also has
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
shipped languages is built once (`vocabulary()`); the rule tries every language at once.
"""

from __future__ import annotations

import importlib
import re
import unicodedata
from dataclasses import dataclass
from types import ModuleType

from apps.core import language_packs

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


# The tables of a language module and the role each gives its phrases. A verb is
# "verb:<action>" (CONFIRM_VERBS maps an action — the leading word of a tool's name — to its
# phrases).
ACCEPTING = {
    "ASSENT": "assent",
    "IDIOMS": "idiom",
    "WEAK": "weak",
    "POLITE": "polite",
    "FORMULAS": "formula",
    "ECHO": "echo",
    "OBJECTS": "object",
}
VETOING = {
    "REVERSALS": "reversal",
    "SARCASM": "sarcasm",
    "NO_START": "no_start",
    "NEGATIONS": "negation",
    "HEDGES": "hedge",
}
_HARD_VETOES = frozenset({"reversal", "sarcasm", "no_start", "negation"})


@dataclass(frozen=True)
class Vocabulary:
    """Every shipped language's phrases, normalised: `roles[phrase]` is what the phrase may
    be ("assent", "polite", "verb:cancel", "negation", …) in any language; `sources[phrase]`
    names the languages an assent comes from (for the trace and the benchmark)."""

    roles: dict[Phrase, frozenset[str]]
    sources: dict[Phrase, tuple[str, ...]]
    yes_words: frozenset[str]  # the one-word assents
    actions: frozenset[str]  # the actions CONFIRM_VERBS knows ("cancel", "refund", …)
    prefixes: tuple[str, ...]  # longest first
    hedge_prefixes: tuple[str, ...]
    final_particles: frozenset[str]  # no hedge at the end of a clause after a verb (nl "maar")
    longest: int  # words in the longest phrase


@language_packs.derived
def language_modules() -> tuple[str, ...]:
    """ "common" and every pack's code: whose tables the vocabulary is built from."""
    return ("common", *language_packs.codes())


def language_data(code: str) -> ModuleType:
    """The module that holds the tables of `code` ("common": this package's `common`)."""
    pack = language_packs.get(code)
    if pack is not None:
        return pack.module
    return importlib.import_module(f"{__name__}.{code}")


def _tables(module: ModuleType) -> list[tuple[str, set[Phrase]]]:
    """(role, phrases) for each table of one language module."""
    tables = [
        (role, _phrases(tuple(getattr(module, name, ()))))
        for name, role in (ACCEPTING | VETOING).items()
    ]
    for action, phrases in getattr(module, "CONFIRM_VERBS", {}).items():
        tables.append((f"verb:{action}", _phrases(tuple(phrases))))
    return tables


def _safe(
    phrase: Phrase,
    role: str,
    vetoes: dict[str, set[str]],
    own: dict[str, set[str]],
    ambiguous: frozenset[str],
) -> bool:
    """Whether an accepting phrase may stand in the vocabulary (`vetoes`: every language's
    one-word vetoes; `own`: its own language's, less its own one-word assents and softeners).
    Never one that could hide a veto:

    - a one-word assent that vetoes in any language, unless its module lists it in AMBIGUOUS
      (Spanish "sí" is "si", "if", once accents are dropped): such a word says yes only
      standing in a clause of nothing but yeses and politeness ("Si." / "si, cancélalo");
    - a phrase of several words holding a no, a reversal or sarcasm of any language, or a hedge
      of its own ("yes if" can never be listed; English "thank you so much" may hold Portuguese
      "só").

    Three small tables, read word by word in review, are the exceptions: AMBIGUOUS (above),
    IDIOMS (a yes with a negation in it: "no problem") and FORMULAS (politeness with a hedge in
    it: "s'il vous plaît", "لو سمحت"); neither may hold a reversal or sarcasm."""
    if role in {"idiom", "formula"}:
        return len(phrase) > 1 and not any(
            vetoes.get(w, set()) & {"reversal", "sarcasm"} for w in phrase
        )
    if len(phrase) == 1:
        return role != "assent" or not vetoes.get(phrase[0]) or phrase[0] in ambiguous
    return not any(vetoes.get(w, set()) & _HARD_VETOES or own.get(w) for w in phrase)


@language_packs.derived
def vocabulary() -> Vocabulary:
    """Built once per process from every language's tables (again when a pack is registered)."""
    return build_vocabulary({code: language_data(code) for code in language_modules()})


def build_vocabulary(modules: dict[str, ModuleType]) -> Vocabulary:
    """The vocabulary of these language modules (`vocabulary()`: the shipped ones)."""
    roles: dict[Phrase, set[str]] = {}
    sources: dict[Phrase, tuple[str, ...]] = {}
    prefixes: set[str] = set()
    hedge_prefixes: set[str] = set()
    final_particles: set[str] = set()
    tables = {code: _tables(module) for code, module in modules.items()}
    own: dict[str, dict[str, set[str]]] = {}
    for code, parts in tables.items():
        for role, phrases in parts:
            if role in VETOING.values():
                for word in (p[0] for p in phrases if len(p) == 1):
                    own.setdefault(code, {}).setdefault(word, set()).add(role)
    vetoes: dict[str, set[str]] = {}
    for words in own.values():
        for word, found in words.items():
            vetoes.setdefault(word, set()).update(found)
    for code, module in modules.items():
        # its own ambiguous assents ("si") and softeners ("maar") may stand inside its phrases
        spared = {normalise(w) for w in getattr(module, "AMBIGUOUS", ())}
        spared |= {normalise(p) for p in getattr(module, "FINAL_PARTICLES", ())}
        for word in spared:
            own.get(code, {}).pop(word, None)
    for code, parts in tables.items():
        module = modules[code]
        ambiguous = frozenset(normalise(w) for w in getattr(module, "AMBIGUOUS", ()))
        for role, phrases in parts:
            for phrase in phrases:
                if role in VETOING.values() or _safe(
                    phrase, role, vetoes, own.get(code, {}), ambiguous
                ):
                    roles.setdefault(phrase, set()).add(role)
                    if role in {"assent", "idiom"}:
                        sources[phrase] = (*sources.get(phrase, ()), code)
        prefixes |= {normalise(p) for p in getattr(module, "PREFIXES", ())}
        hedge_prefixes |= {normalise(p) for p in getattr(module, "HEDGE_PREFIXES", ())}
        final_particles |= {normalise(p) for p in getattr(module, "FINAL_PARTICLES", ())}
    for particle in final_particles:  # a softener after a verb ("annuleer hem maar")
        roles.setdefault((particle,), set()).add("polite")
    actions = {r.split(":", 1)[1] for rs in roles.values() for r in rs if r.startswith("verb:")}
    return Vocabulary(
        roles={phrase: frozenset(r) for phrase, r in roles.items()},
        sources=sources,
        yes_words=frozenset(p[0] for p, r in roles.items() if len(p) == 1 and "assent" in r),
        actions=frozenset(actions),
        prefixes=tuple(sorted(prefixes, key=len, reverse=True)),
        hedge_prefixes=tuple(sorted(hedge_prefixes, key=len, reverse=True)),
        final_particles=frozenset(final_particles),
        longest=max(len(p) for p in roles),
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


@language_packs.derived
def draft_vocabulary() -> DraftVocabulary:
    holding: set[str] = set()
    actions: dict[str, set[str]] = {}
    for code in language_modules():
        module = language_data(code)
        holding |= {normalise(h) for h in getattr(module, "HOLDING", ())}
        for verb, stems in getattr(module, "ACTIONS", {}).items():
            actions.setdefault(verb, set()).update(normalise(stem) for stem in stems)
    return DraftVocabulary(
        holding=tuple(sorted(holding, key=len, reverse=True)),
        actions={verb: frozenset(stems) for verb, stems in actions.items()},
        prefixes=vocabulary().prefixes,
    )
