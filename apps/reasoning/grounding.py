"""Is a text grounded in a source text, claim by claim? Deterministic, with no word list of any
language: what the evaluation layer (`apps.reasoning.evaluation.improvement_problem`) asks of a
reviewer's `improved_response` before it may replace a draft.

A *claim* is one sentence or clause of the text: it ends at sentence punctuation of any script
(`. ! ? … ؟ ۔ 。`), a semicolon (`; ؛`), a comma or Arabic comma followed by a space, or a line
break. Inside a claim:

- every link, domain and e-mail address, and every figure (an amount, a duration, an order
  number: digits of any script, "5.00" = "5") must occur verbatim in the source text;
- its words (letter runs, after normalisation) must be found in the source text for at least
  `MIN_SUPPORT` of its letters. A word is found when the source holds the same word, or one
  sharing its first `MIN_STEM` letters and at least `STEM_SHARE` of the shorter word — an
  inflection: "refund"/"refunds", "devolución"/"devoluciones" — either of them possibly with
  up to `MAX_PREFIX` letters of a prefix joined to it, as Hebrew and Arabic write "and the",
  "in", "to" (והחזרות / החזרות, والمنتجات / المنتجات). Weighing by letters lets short
  function words ("at", "de", "של") count little and the content words decide.

Normalisation (`normalised`): Unicode NFKD with the combining marks dropped (accents, Hebrew
niqqud, Arabic harakat and hamza marks), case folded, Arabic tatweel removed, Hebrew final
letters written as their ordinary form.

What it cannot see: a claim made of supported words in a new order ("returns are not
accepted" when the source says "not" elsewhere). A text in another language than its source is
never grounded here — a reviewer's translation cannot be checked word by word, so the draft is
kept (the default when nothing supports a claim)."""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from dataclasses import dataclass

__all__ = [
    "FIGURE",
    "LINK",
    "MIN_SUPPORT",
    "Claim",
    "claims",
    "figure_forms",
    "figures",
    "normalised",
    "unsupported_claims",
]

MIN_SUPPORT = 0.75  # share of a claim's letters that must be found in the source
MIN_STEM = 4  # letters two words must share at their start to be one word inflected
STEM_SHARE = 0.75  # … and at least this share of the shorter one
MAX_PREFIX = 3  # letters of a joined prefix a word may carry (Hebrew ו/ה/ב/ל, Arabic و/ال)

# Figures: digit runs with their decimal/thousands separators, in any script's digits.
FIGURE = re.compile(r"\d+(?:[.,]\d+)*")
# Links: URLs, www. hosts, and bare domains / e-mail hosts (a dotted name ending in letters).
LINK = re.compile(
    r"(?:https?://|www\.)[^\s<>\"')\]]+"
    r"|[\w.+-]+@(?:[\w-]+\.)+[^\W\d_]{2,}"
    r"|(?<![\w.@-])(?:[\w-]+\.)+[^\W\d_]{2,}(?![\w-])",
    re.IGNORECASE,
)
_LETTERS = re.compile(r"[^\W\d_]+")
# Where a claim ends: sentence punctuation (followed by a space or the end), semicolons,
# an ellipsis, a comma followed by a space, a line break.
_CLAIM_END = re.compile(r"(?:[.!?؟۔。！？]+(?=\s|$)|[;؛…]+|\.{3}|[,،、](?=\s)|\n)+")
_SHIELD = 0xF0000  # Supplementary Private Use Area-A: never in a reply
_SHIELDED = re.compile("[\U000f0000-\U000ffffd]")
_FINALS = str.maketrans({"ך": "כ", "ם": "מ", "ן": "נ", "ף": "פ", "ץ": "צ", "\u0640": None})


def normalised(text: str) -> str:
    """`text` for comparison: marks dropped, case folded, tatweel and Hebrew final forms
    evened out (see the module docstring)."""
    decomposed = unicodedata.normalize("NFKD", text)
    bare = "".join(c for c in decomposed if not unicodedata.category(c).startswith("M"))
    return bare.casefold().translate(_FINALS)


def figure_forms(figure: str) -> set[str]:
    """The forms one figure is matched in: any script's digits as ASCII; "5", "5.0" and "5,00"
    are the same amount; "1,000" and "1000" too."""
    ascii_ = "".join(str(unicodedata.decimal(c, c)) for c in figure)
    trimmed = re.sub(r"[.,]0{1,2}$", "", ascii_)
    return {ascii_, trimmed, re.sub(r"[.,]", "", trimmed)}


def figures(text: str) -> set[str]:
    """Every form of every figure in `text`."""
    return {form for figure in FIGURE.findall(text) for form in figure_forms(figure)}


def _links(text: str) -> list[str]:
    return [link.rstrip(".,;:!?") for link in LINK.findall(text)]


def claims(text: str) -> list[str]:
    """The claims of `text`: its sentences and clauses, stripped, empty ones left out. Links
    and figures stay whole ("example.com", "4.99" are not split)."""
    # Shield the dots and commas inside links and figures from the splitter.
    shielded: list[str] = []

    def keep(match: re.Match[str]) -> str:
        shielded.append(match.group(0))
        return chr(_SHIELD + len(shielded) - 1)  # one private-use character, no digit

    masked = FIGURE.sub(keep, LINK.sub(keep, text))
    out = []
    for part in _CLAIM_END.split(masked):
        part = _SHIELDED.sub(lambda m: shielded[ord(m.group(0)) - _SHIELD], part).strip()
        if part:
            out.append(part)
    return out


def _words(text: str) -> list[str]:
    """The normalised words of `text`, links and figures left out (they are checked whole)."""
    return _LETTERS.findall(normalised(FIGURE.sub(" ", LINK.sub(" ", text))))


def _forms(word: str) -> list[str]:
    """The word, and the word without a joined prefix of 1–`MAX_PREFIX` letters where at least
    `MIN_STEM` letters remain."""
    return [word] + [word[n:] for n in range(1, MAX_PREFIX + 1) if len(word) - n >= MIN_STEM]


class _Source:
    """A source text's words, indexed for exact and inflected look-ups."""

    def __init__(self, text: str) -> None:
        self.exact: set[str] = set()
        self.by_stem: dict[str, set[str]] = defaultdict(set)
        for word in set(_words(text)):
            for form in _forms(word):
                self.exact.add(form)
                if len(form) >= MIN_STEM:
                    self.by_stem[form[:MIN_STEM]].add(form)
        self.figures = figures(text)
        self.lowered = text.casefold()

    def has_word(self, word: str) -> bool:
        for form in _forms(word):
            if form in self.exact:
                return True
            if len(form) < MIN_STEM:
                continue
            for known in self.by_stem.get(form[:MIN_STEM], ()):
                shorter = min(len(form), len(known))
                shared = len(_common_prefix(form, known))
                if shared >= MIN_STEM and shared >= STEM_SHARE * shorter:
                    return True
        return False


def _common_prefix(a: str, b: str) -> str:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return a[:n]


@dataclass(frozen=True)
class Claim:
    """A claim the source text does not support, and what in it is missing."""

    text: str
    missing_words: tuple[str, ...]
    missing_figures: tuple[str, ...]
    missing_links: tuple[str, ...]
    support: float  # share of the claim's letters found in the source (0–1)

    def why(self) -> str:
        """One line for staff: the claim, quoted, and what the source lacks."""
        missing = [*self.missing_figures, *self.missing_links, *self.missing_words]
        return f"«{self.text}» (not in the source text: {', '.join(missing)})"


def unsupported_claims(text: str, source: str) -> list[Claim]:
    """The claims of `text` the `source` text does not support (see the module docstring);
    [] when every claim is grounded. With no source text, every claim that says anything is
    unsupported."""
    known = _Source(source)
    out = []
    for claim in claims(text):
        missing_figures = tuple(
            f for f in dict.fromkeys(FIGURE.findall(claim)) if not figure_forms(f) & known.figures
        )
        missing_links = tuple(
            link for link in dict.fromkeys(_links(claim)) if link.casefold() not in known.lowered
        )
        words = list(dict.fromkeys(_words(claim)))
        missing_words = tuple(w for w in words if not known.has_word(w))
        letters = sum(len(w) for w in words)
        support = 1.0 if not letters else 1 - sum(len(w) for w in missing_words) / letters
        if missing_figures or missing_links or support < MIN_SUPPORT:
            out.append(Claim(claim, missing_words, missing_figures, missing_links, support))
    return out
