"""Identifying tool parameters (an order, payment or account id: a schema property marked
`"x-identifier": true`, docs/tools.md) must have been *given* in this conversation — typed by
the customer in one of its messages, or returned by an earlier tool result — before a tool runs
or is put to the customer. A small model copies the example out of a parameter's description
("Track my order" → `{"order_id": "TH-10042"}`); this is the rule, in code, that stops it.

Pure functions: the texts to look in are gathered by the turn
(`apps.reasoning.turn.Turn.given_words`).

What counts as the same identifier (`spellings`): letters and digits only, lower case, so
"TH-10042", "th10042", "#TH 10042" and "Th_10042" are one id; and the whole digit run of an id
with a letter prefix ("12345" for "TH-12345", as a customer says "order 12345"), as the
confirmation reading does (`confirmations.reading.named_in`). Never part of the digits ("1004"
is not "TH-10042"), never an id inside a longer one ("TH-100421")."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

IDENTIFIER_KEYWORD = "x-identifier"

# What separates words in a message or a tool result (JSON punctuation included); what is left
# of a word is compared without its inner punctuation ("TH-10042" = "th10042").
_SEPARATORS = re.compile(r"[\s,;:!?()\[\]{}\"'<>|/\\=*«»“”„‘’]+")
_NOT_ALNUM = re.compile(r"[\W_]+", re.UNICODE)
# Adjacent words joined, so "TH 10042", "TH - 10042" and "4111 1111 1111 1111" are the id as well.
_MAX_JOINED = 4
_MIN_DIGITS = 4  # a shorter digit run alone is too common to stand for an id


def identifier_params(parameters: Mapping[str, Any] | None) -> list[str]:
    """The top-level parameters the tool's JSON Schema marks `"x-identifier": true`."""
    properties = (parameters or {}).get("properties")
    if not isinstance(properties, Mapping):
        return []
    return [
        name
        for name, spec in properties.items()
        if isinstance(spec, Mapping) and spec.get(IDENTIFIER_KEYWORD) is True
    ]


def _canonical(word: str) -> str:
    return _NOT_ALNUM.sub("", word).casefold()


def spellings(value: Any) -> set[str]:
    """The forms of a parameter value that count as the customer giving it."""
    if isinstance(value, bool) or value is None:
        return set()
    whole = _canonical(str(value))
    if not whole:
        return set()
    forms = {whole}
    digits = re.sub(r"\D", "", whole)
    if digits != whole and len(digits) >= _MIN_DIGITS and re.fullmatch(r"[^\d]+\d+", whole):
        forms.add(digits)  # "TH-12345" said as "order 12345"
    return forms


def given_words(texts: Iterable[str | Mapping[str, Any] | list[Any]]) -> set[str]:
    """Every word (and run of up to `_MAX_JOINED` adjacent words) of `texts`, canonical.
    A mapping or list (a tool's result) is read as its JSON."""
    words: set[str] = set()
    for text in texts:
        if not isinstance(text, str):
            text = json.dumps(text, ensure_ascii=False, default=str)
        parts = [_canonical(part) for part in _SEPARATORS.split(text)]
        parts = [part for part in parts if part]
        for size in range(1, _MAX_JOINED + 1):
            for start in range(len(parts) - size + 1):
                words.add("".join(parts[start : start + size]))
    return words


def ungiven(
    parameters: Mapping[str, Any] | None, params: Mapping[str, Any], words: set[str]
) -> list[str]:
    """The identifying params whose value is not among the `words` given in the conversation
    (a param the call leaves out is the schema's business: `required`)."""
    missing: list[str] = []
    for name in identifier_params(parameters):
        if name not in params:
            continue
        forms = spellings(params[name])
        if not forms or not forms & words:
            missing.append(name)
    return missing
