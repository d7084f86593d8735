"""Reading a typed answer to a confirmation question — a small grammar over the language data.

An answer is a yes ONLY when the data describes every word of it:

    answer := (assent | idiom | weak | polite | echo | object | verb | the params)+
              with at least one strong assent (or idiom), at most one verb — the question's own
              action — and no veto anywhere.

Vetoes are looked for first, on every word and independently of the yes grammar: a reversal
("cancel the cancellation", "undo"), sarcasm ("yeah right", "just great"), a no, a negation, a
condition or hedge ("if", "but", "other"), a question mark, an identifier the question was not
about. So adding a phrase to an accepting table (ASSENT, ECHO, OBJECTS, CONFIRM_VERBS …) can only
turn an unlisted word into a listed one; it can never hide a veto. The one table that may cover
a negation word is IDIOMS ("no problem"): whole phrases, matched exactly, with no verb in them.

Three readings: "yes", "no", and "other" — with `reask` when the answer looks like an answer to
the question but is not a clear one (thanks-but, sarcasm, a condition, a reversal, a question,
a yes with more in it), so the turn asks again with the buttons instead of guessing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from apps.reasoning.confirmations import QUESTION, Phrase, Vocabulary, tokenise, vocabulary

Answer = Literal["yes", "no", "other"]

# Longer answers are never a yes: a confirmation is short.
MAX_ANSWER_WORDS = 14
# Roles that let a yes through (a verb is "verb:<action>").
YES_ONLY_ROLES = frozenset({"assent", "idiom", "polite", "formula", "weak"})
STRONG = frozenset({"assent", "idiom"})
# Roles that make any answer "not yes", in the order they are reported.
VETOES = ("reversal", "sarcasm", "no_start", "hedge", "negation")
# Not a yes, but an attempt at an answer: ask again, with the buttons.
_ANSWER_LIKE = frozenset({"assent", "idiom", "weak"})

_HAS_DIGIT = re.compile(r"\d")
_NUMBER_RE = re.compile(r"^\d+(?:[.,]\d+)*$")
_DECIMAL_COMMA = re.compile(r"^\d+,\d{1,2}$")  # "49,90": a decimal comma, not thousands


@dataclass(frozen=True)
class Reading:
    """What the rule read in a typed answer, and why (written to the trace)."""

    answer: Answer
    reason: str
    languages: tuple[str, ...] = ()
    assent: str = ""  # the assent form that made it a yes
    echoes: tuple[str, ...] = ()  # the other phrases it was accepted with
    reask: bool = False  # not a clear answer: ask again with the buttons

    def as_data(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "reason": self.reason,
            "assent": self.assent,
            "echoes": list(self.echoes),
            "languages": list(self.languages),
            "reask": self.reask,
        }


# --- the params a customer may repeat back ------------------------------------------------------


def canonical(word: str) -> str:
    """One spelling per identifier: "#W-1001", "w1001" and "W_1001" are the same order, and
    "50.00" is the amount 50."""
    if _NUMBER_RE.match(word):
        number = word.replace(",", ".") if _DECIMAL_COMMA.match(word) else word.replace(",", "")
        try:
            return format(Decimal(number).normalize(), "f")
        except InvalidOperation:
            return word
    return re.sub(r"[^a-z0-9.]", "", word)


def _leaf_values(value: Any) -> list[str]:
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaf_values(v)]
    if isinstance(value, list | tuple):
        return [leaf for v in value for leaf in _leaf_values(v)]
    return [str(value)]


def named_in(params: Mapping[str, Any] | None) -> tuple[set[str], set[str]]:
    """(identifiers, plain words) a customer may repeat back when confirming these params."""
    identifiers: set[str] = set()
    words: set[str] = set()
    for leaf in _leaf_values(dict(params or {})):
        for word in (w for clause in tokenise(leaf) for w in clause if w != QUESTION):
            if not _HAS_DIGIT.search(word):
                words.add(word)
                continue
            identifiers.add(canonical(word))
            digits = re.sub(r"\D", "", canonical(word))
            if digits != canonical(word) and not _NUMBER_RE.match(canonical(word)):
                identifiers.add(digits)  # "order 1001" for W1001
    return identifiers, words


# --- words and their roles -----------------------------------------------------------------------


def forms(word: str, prefixes: tuple[str, ...]) -> list[str]:
    """The word, and the word without one or two clitics written onto it (Hebrew "ו"+"ה"…,
    Arabic "و"+"ال"…), as long as two letters stay."""
    forms = [word]
    for p in prefixes:
        if word.startswith(p) and len(word) - len(p) >= 2:
            stem = word[len(p) :]
            forms.append(stem)
            forms.extend(
                stem[len(q) :] for q in prefixes if stem.startswith(q) and len(stem) - len(q) >= 2
            )
    return forms


def _parts(word: str) -> list[str]:
    """A word joined with ' or - ("l'ordine", "annulez-la") read by its parts."""
    parts = [p for p in re.split(r"['\-]", word) if p]
    return parts if len(parts) > 1 else []


def _word_roles(word: str, vocab: Vocabulary) -> set[str]:
    """Every role of a single word, also without clitics: the word's own, else (a clitic form,
    else every part of a joined word having one) the form's."""
    own = set(vocab.roles.get((word,), ()))
    if own:
        return own
    for form in forms(word, vocab.prefixes)[1:]:
        if (form,) in vocab.roles:
            return set(vocab.roles[(form,)])
    parts = [_word_roles(p, vocab) for p in _parts(word)]
    if parts and all(parts):
        return set().union(*parts)
    return set()


def _veto_of_word(word: str, vocab: Vocabulary, *, in_phrase: bool = False) -> str:
    """The veto a single word carries in any language (any clitic form, any part), or ''.
    Inside an accepting phrase of several words (which never holds a hedge of its own
    language, see `confirmations._safe`) a hedge of another language is no veto."""
    spellings = forms(word, vocab.prefixes)
    spellings += [f for p in _parts(word) for f in forms(p, vocab.prefixes)]
    for veto in (v for v in VETOES if not (in_phrase and v == "hedge")):
        if any(veto in vocab.roles.get((form,), ()) for form in spellings):
            return veto
    if not in_phrase and any(
        word.startswith(p) and len(word) - len(p) >= 2 for p in vocab.hedge_prefixes
    ):
        return "hedge"
    return ""


@dataclass(frozen=True)
class Segment:
    words: Phrase
    roles: frozenset[str]


def _segments(clause: list[str], vocab: Vocabulary) -> list[Segment]:
    """The clause cut into the longest accepting phrases; a word no accepting phrase covers is a
    segment of its own with its single-word roles (maybe none)."""
    out: list[Segment] = []
    i = 0
    while i < len(clause):
        for n in range(min(vocab.longest, len(clause) - i), 1, -1):
            phrase = tuple(clause[i : i + n])
            roles = vocab.roles.get(phrase, frozenset())
            if roles and not roles & set(VETOES):
                out.append(Segment(phrase, frozenset(roles)))
                i += n
                break
        else:
            out.append(Segment((clause[i],), frozenset(_word_roles(clause[i], vocab))))
            i += 1
    return out


# --- vetoes ------------------------------------------------------------------------------------


def _yes_only(segments: list[Segment]) -> bool:
    """A clause of nothing but assents and politeness ("Si." / "si, por favor")."""
    return all(s.roles & YES_ONLY_ROLES for s in segments)


def _phrase_veto(words: list[str], vocab: Vocabulary) -> tuple[str, str]:
    """A veto phrase of several words anywhere, across clause marks ("Yeah, right.")."""
    for i in range(len(words)):
        for n in range(min(vocab.longest, len(words) - i), 1, -1):
            roles = vocab.roles.get(tuple(words[i : i + n]), frozenset())
            veto = next((v for v in VETOES if v in roles), "")
            if veto:
                return veto, " ".join(words[i : i + n])
    return "", ""


def _word_vetoes(clauses: list[list[Segment]], vocab: Vocabulary) -> dict[str, str]:
    """Each veto a single word carries (veto -> the first word carrying it): every word except
    those inside an idiom ("no problem"), a word that says yes in one language standing in a
    clause of yeses ("Si."), and a softener closing a clause after its verb (Dutch "annuleer hem
    maar")."""
    found: dict[str, str] = {}
    for segments in clauses:
        yes_only = _yes_only(segments)
        for k, segment in enumerate(segments):
            if "idiom" in segment.roles:
                continue
            for word in segment.words:
                if yes_only and word in vocab.yes_words:
                    continue  # "Si." / "claro que sí": standing among yeses it says yes
                softener = (
                    word in vocab.final_particles
                    and k == len(segments) - 1
                    and any(r.startswith("verb:") for s in segments[:k] for r in s.roles)
                )
                in_phrase = len(segment.words) > 1
                veto = "" if softener else _veto_of_word(word, vocab, in_phrase=in_phrase)
                if veto:
                    found.setdefault(veto, word)
    return found


# --- the reading ---------------------------------------------------------------------------------


def _action_of(tool: str | None, vocab: Vocabulary) -> str | None:
    """The action a tool's name says ("cancel_order" -> "cancel", "request_refund" ->
    "refund"); None: any action
    (no tool named), "": none of the listed ones (only "yes, go ahead" can confirm it)."""
    if tool is None:
        return None
    words = re.split(r"[_\-\s]+", tool.lower())
    return next((w for w in words if w in vocab.actions), "")


def _yes(
    segments: list[Segment], params: Mapping[str, Any] | None, action: str | None, vocab: Vocabulary
) -> tuple[Reading | None, str]:
    """A yes when every segment is accepted, else (None, the first word that is not)."""
    identifiers, param_words = named_in(params)
    assent = ""
    echoes: list[str] = []
    verbs: list[str] = []
    languages: list[str] = []
    for segment in segments:
        text = " ".join(segment.words)
        verb_roles = {r for r in segment.roles if r.startswith("verb:")}
        if segment.roles & STRONG:
            assent = assent or text
            languages.extend(vocab.sources.get(segment.words, ()))
        elif verb_roles:
            if action is not None and f"verb:{action}" not in verb_roles:
                return None, f"another action: {text}"
            verbs.append(text)
            echoes.append(text)
        elif segment.roles & {"weak", "polite", "formula", "echo", "object"}:
            echoes.append(text)
        elif _HAS_DIGIT.search(text):
            if canonical(text) not in identifiers:
                return None, f"names something the question was not about: {text}"
            echoes.append(text)
        elif text not in param_words:
            return None, f"an unlisted word: {text}"
        else:
            echoes.append(text)
    if len(verbs) > 1:
        return None, f"more than one action: {', '.join(verbs)}"
    if not assent:
        return None, "no clear yes"
    echo_text = f" with {', '.join(echoes)}" if echoes else ""
    reading = Reading(
        "yes",
        f"assent '{assent}'{echo_text}",
        tuple(dict.fromkeys(languages)),
        assent=assent,
        echoes=tuple(echoes),
    )
    return reading, ""


def _foreign_identifier(words: list[str], params: Mapping[str, Any] | None) -> str:
    identifiers, _ = named_in(params)
    return next((w for w in words if _HAS_DIGIT.search(w) and canonical(w) not in identifiers), "")


def _not_yes(
    clauses: list[list[str]], segments: list[list[Segment]], why: str, vocab: Vocabulary
) -> Reading:
    """What an answer that is no yes is: a no, or 'other' (asked again when it looks like an
    answer to the question)."""
    words = [w for c in clauses for w in c if w != QUESTION]
    answer_like = any(s.roles & _ANSWER_LIKE for c in segments for s in c) or any(
        r.startswith("verb:") for c in segments for s in c for r in s.roles
    )
    first = next(c for c in clauses if c != [QUESTION])
    opens_with_no = "idiom" not in segments[0][0].roles and any(
        "no_start" in vocab.roles.get(tuple(first[:n]), ()) for n in range(1, 4)
    )
    phrase_veto, phrase = _phrase_veto(words, vocab)
    vetoes = _word_vetoes(segments, vocab)
    if phrase_veto:
        vetoes = {phrase_veto: phrase, **vetoes}
    if "reversal" in vetoes:
        return Reading("other", f"a reversed action: {vetoes['reversal']}", reask=True)
    if opens_with_no:
        return Reading("no", "opens with a no")
    if "sarcasm" in vetoes:
        return Reading("other", f"sarcasm: {vetoes['sarcasm']}", reask=True)
    if [QUESTION] in clauses:
        return Reading("other", "a question", reask=answer_like)
    if "no_start" in vetoes:  # "wait", "don't", "never mind" anywhere
        return Reading("no", f"a no: {vetoes['no_start']}")
    if "hedge" in vetoes:  # a condition before a negation: "yes if it hasn't shipped"
        return Reading("other", f"a condition or hedge: {vetoes['hedge']}", reask=answer_like)
    if "negation" in vetoes:
        return Reading("no", f"a negation: {vetoes['negation']}")
    return Reading("other", why, reask=answer_like)


def read(
    text: str,
    params: Mapping[str, Any] | None = None,
    tool: str | None = None,
    *,
    vocab: Vocabulary | None = None,
) -> Reading:
    """Read a typed answer to the question about `tool` with `params`, in every shipped
    language at once (see the module's docstring for the grammar; `vocab`: another set of
    language tables than the shipped ones)."""
    vocab = vocab or vocabulary()
    clauses = tokenise(text)
    words = [w for c in clauses for w in c if w != QUESTION]
    if not words:
        return Reading("other", "empty")
    if len(words) > MAX_ANSWER_WORDS:
        return Reading("other", "too long for a confirmation")
    foreign = _foreign_identifier(words, params)
    if foreign:
        return Reading("other", f"names something the question was not about: {foreign}")
    segments = [_segments(c, vocab) for c in clauses if c != [QUESTION]]
    vetoed = [QUESTION] in clauses or _phrase_veto(words, vocab)[0] or _word_vetoes(segments, vocab)
    if not vetoed:
        flat = [s for c in segments for s in c]
        reading, why = _yes(flat, params, _action_of(tool, vocab), vocab)
        if reading is not None:
            return reading
    else:
        why = "a veto"
    return _not_yes(clauses, segments, why, vocab)
