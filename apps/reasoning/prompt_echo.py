"""A reply that repeats our instructions to the customer ("The customer has explicitly
requested this action…"): small models copy wording out of the system message. Checked in code
on every step whose text the customer reads (`Step.language == "reply"`), by word n-gram
overlap with the system text — less what the business wrote (business info, knowledge, tool
results: a reply may quote its returns policy word for word). A reply over the threshold is
refused like an invalid one: the turn asks again once, quoting why, then falls back
(`Turn.llm`). Pure functions."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

# Words per shingle, and how many of the reply's shingles may be our instructions' before the
# reply counts as repeating them: 3 shingles of 5 words = a run of 7 words (or several runs).
SHINGLE_WORDS = 5
ECHO_SHINGLES = 3

_WORD = re.compile(r"\w+", re.UNICODE)


def _words(text: str) -> list[str]:
    return [word.casefold() for word in _WORD.findall(text)]


def _shingles(words: list[str]) -> list[tuple[str, ...]]:
    n = SHINGLE_WORDS
    return [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]


# A text's shingles, kept for the texts seen last: a tenant's instructions and business text are
# the same in every turn, and shingling them was most of a check's CPU.
SHINGLE_SETS_KEPT = 64


@functools.lru_cache(maxsize=SHINGLE_SETS_KEPT)
def _shingle_set(text: str) -> frozenset[tuple[str, ...]]:
    return frozenset(_shingles(_words(text)))


def echoed_instructions(reply: str, *, system: Iterable[str], data: Iterable[str] = ()) -> str:
    """The reply's words that repeat the `system` text (not found in `data`, the business's
    own text), as one quote — '' when fewer than `ECHO_SHINGLES` shingles of the reply do."""
    words = _words(reply)
    if len(words) < SHINGLE_WORDS:
        return ""
    ours = [_shingle_set(text) for text in system]
    theirs = [_shingle_set(text) for text in data]
    shared = [
        i
        for i, shingle in enumerate(_shingles(words))
        if any(shingle in found for found in ours) and not any(shingle in found for found in theirs)
    ]
    if len(shared) < ECHO_SHINGLES:
        return ""
    first, last = shared[0], shared[-1] + SHINGLE_WORDS
    return " ".join(words[first:last])[:200]
