"""Masking personal data and links in note text — one place, used at write time and at render time.

A note may reach the prompts of other customers' conversations, so before that happens its text
is made inert: every newline and control character collapsed into one space, and the shapes that
identify a person or point somewhere replaced by a fixed placeholder:

* ``[link]``    — URLs (``https://…``, ``www.…``) and bare domains (``refunds.example/claim``)
* ``[email]``   — e-mail addresses
* ``[iban]``    — IBANs (``DE89 3704 0044 0532 0130 00``)
* ``[card]``    — card numbers (13–19 digits, spaces or dashes allowed)
* ``[ip]``      — IPv4 and IPv6 addresses
* ``[phone]``   — phone numbers in international and national formats (7+ digits)
* ``[address]`` — street addresses with a house number: a number next to a street word of one of
  many languages (street, Straße, rue, calle, via, ulica, улица, 路, 丁目, 로, …), or a block
  number such as ``1-2-3``
* ``[id]``      — order, payment and reference ids: tokens that mix letters and digits (``W1001``,
  ``TH-12345``, ``A1B2C3``) and digit runs of four or more

The rules are shapes, not English words: they work in any script. What they cannot find are
names ("Jane Roe"): no rule tells a name from any other word in every language. That is why
nothing a customer or the model wrote reaches another conversation unless staff approved it
(`apps.notes.services.default_status`); this module is the second line, not the gate.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Callable

LINK = "[link]"
EMAIL = "[email]"
IBAN = "[iban]"
CARD = "[card]"
IP = "[ip]"
PHONE = "[phone]"
ADDRESS = "[address]"
ID = "[id]"

# Any run of whitespace or control/format characters (newlines, tabs, zero-width, bidi
# overrides, …) becomes one space.
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Zs"})

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_URL = re.compile(r"(?i)\b(?:[a-z][a-z0-9+.-]*://|www\.)\S+")
# A bare domain: labels of letters, digits or hyphens, a top-level label of 2+ letters, an
# optional path. "e.g." or "3.5" are not domains (one-letter / numeric top level).
_DOMAIN = re.compile(r"(?<![\w@])(?:[\w-]+\.)+[^\W\d_]{2,}\b(?:/\S*)?")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b")
_CARD = re.compile(r"(?<![\w+])\d(?:[ -]?\d){12,18}(?!\w)")
_IPV4 = re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b")
_IPV6 = re.compile(
    r"(?i)(?<![\w:])(?:(?:[0-9a-f]{1,4}:){5,7}[0-9a-f]{1,4}"
    r"|(?:[0-9a-f]{1,4}:){1,6}:(?:[0-9a-f]{1,4}:){0,5}[0-9a-f]{1,4}"
    r"|::(?:[0-9a-f]{1,4}:){0,6}[0-9a-f]{1,4})(?![\w:])"
)
# A phone number: optional +, digits with spaces, dots, dashes, slashes or brackets between;
# it counts when it holds at least 7 digits (checked in `_phone`).
_PHONE = re.compile(r"(?<![\w+])(?:\+|00)?\(?\d[\d\s().\-/]{5,}\d(?!\w)")
_PHONE_MIN_DIGITS = 7

# Street words of many languages. Where the house number comes first ("12 Elm Street",
# "10 rue de Rivoli", "5, avenue Foch") …
_NUMBER_FIRST_WORDS = (
    "street|road|avenue|lane|boulevard|blvd|drive|terrace|crescent|highway|"
    "rue|chemin|impasse|allée|quai|place|cours"
)
# … and where the street comes first ("Via Roma 1", "ul. Marszałkowska 10", "улица Ленина, д. 5",
# "Atatürk Caddesi No: 5", "شارع الملك فهد 12").
_STREET_FIRST_WORDS = (
    "street|road|avenue|straße|strasse|str|gasse|platz|allee|straat|laan|plein|gracht|gata|"
    "gatan|gade|vej|väg|vägen|veien|gate|calle|avenida|avda|paseo|plaza|carrera|carretera|via|"
    "viale|piazza|corso|vicolo|rua|travessa|praça|estrada|alameda|ulica|ul|aleja|plac|ulice|"
    "náměstí|улица|ул|проспект|переулок|пер|бульвар|шоссе|вулиця|вул|οδός|οδ|λεωφόρος|sokak|"
    "sokağı|sok|cadde|caddesi|cad|mahallesi|mah|شارع|רחוב|मार्ग|रोड"
)
# Compound street names end in one of these (Hauptstraße 5, Kalverstraat 12, Drottninggatan 3).
_STREET_SUFFIXES = (
    "straße|strasse|gasse|platz|allee|straat|laan|gracht|gatan|gata|gade|vej|vägen|weg"
)
_HOUSE_NUMBER = r"\d{1,5}[^\W\d_]?(?:[/-]\d{1,4}[^\W\d_]?)?"
_ADDRESS_NUMBER_FIRST = re.compile(
    rf"(?i)(?<![\w-]){_HOUSE_NUMBER},?\s+((?:\S+\s+){{0,3}}?)(?:{_NUMBER_FIRST_WORDS})\b\.?"
)
_ADDRESS_STREET_FIRST = re.compile(
    rf"(?i)(?<![\w-])(?:{_STREET_FIRST_WORDS})\b\.?,?\s+((?:\S+\s+){{1,3}}?){_HOUSE_NUMBER}(?![\w-])"
)
_ADDRESS_COMPOUND = re.compile(
    rf"(?i)[^\W\d_]+(?:{_STREET_SUFFIXES})\b\.?,?\s*{_HOUSE_NUMBER}(?![\w-])"
)
# East Asian forms: 千代田区1-2-3, 3丁目5番地, 中山路100号, 세종대로 175
_ADDRESS_EAST_ASIAN = re.compile(
    r"\d{1,4}(?:丁目|番地|番|号)|[\u4e00-\u9fff]+[路街道]\s?\d{1,5}号?|[가-힣]+(?:로|길)\s?\d{1,5}"
)
_BLOCK_NUMBER = re.compile(r"(?<![\d-])\d{1,3}(?:[-‐−]\d{1,4}){2,}(?![\w-])")

# Order / payment / reference ids.
_TOKEN = re.compile(r"[\w-]*\d[\w-]*")
_DIGITS = re.compile(r"\d")
_ID_MIN_DIGITS_WITH_LETTERS = 3
_ID_MIN_DIGIT_RUN = 4


def collapse(text: str) -> str:
    """`text` on one line: every run of whitespace or control/format characters is one space."""
    out: list[str] = []
    gap = False
    for char in text:
        if unicodedata.category(char) in _INVISIBLE_CATEGORIES:
            gap = True
            continue
        if gap and out:
            out.append(" ")
        gap = False
        out.append(char)
    return "".join(out)


def _phone(match: re.Match[str]) -> str:
    text = match.group(0)
    return PHONE if len(_DIGITS.findall(text)) >= _PHONE_MIN_DIGITS else text


def _street_name_words(words: str, *, need_name: bool) -> bool:
    """The words between a street word and a house number are the street's name: none starts
    with a lower-case letter except short connectors ("rue de la Paix", "calle del Sol"), and
    with `need_name` at least one does not ("via the app 2 times" is no address). Letters
    without case (CJK, Arabic, Hebrew, …) count as a name."""
    named = False
    for word in words.split():
        first = next((c for c in word if c.isalpha()), "")
        if first.islower():
            if len(word.strip(".,:")) > 3:
                return False
        elif first:
            named = True
    return named or not need_name


def _address_number_first(match: re.Match[str]) -> str:
    return ADDRESS if _street_name_words(match.group(1) or "", need_name=False) else match.group(0)


def _address_street_first(match: re.Match[str]) -> str:
    return ADDRESS if _street_name_words(match.group(1) or "", need_name=True) else match.group(0)


def _identifier(match: re.Match[str]) -> str:
    token = match.group(0)
    digits = len(_DIGITS.findall(token))
    letters = sum(1 for c in token if c.isalpha())
    longest_run = max((len(run) for run in re.findall(r"\d+", token)), default=0)
    if longest_run >= _ID_MIN_DIGIT_RUN:
        return ID
    if letters and digits >= _ID_MIN_DIGITS_WITH_LETTERS:
        return ID
    # letters and digits interleaved (A1B2): a code, not a word like "mp3" or "i18n"
    changes = sum(1 for a, b in itertools.pairwise(token) if a.isdigit() != b.isdigit())
    if letters and changes >= 3:
        return ID
    return token


# In order: the most specific shapes first, so "jo@shop.example" is an e-mail, not a domain,
# and a card number is a card, not a phone.
RULES: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    (_URL, LINK),
    (_EMAIL, EMAIL),
    (_IBAN, IBAN),
    (_IPV4, IP),
    (_IPV6, IP),
    (_DOMAIN, LINK),
    (_CARD, CARD),
    (_ADDRESS_EAST_ASIAN, ADDRESS),
    (_ADDRESS_NUMBER_FIRST, _address_number_first),
    (_ADDRESS_STREET_FIRST, _address_street_first),
    (_ADDRESS_COMPOUND, ADDRESS),
    (_BLOCK_NUMBER, ADDRESS),
    (_PHONE, _phone),
    (_TOKEN, _identifier),
)


def mask_personal_data(text: str) -> str:
    """`text` with links and personal-data shapes replaced by placeholders (module docstring).

    Newlines are kept; use `inert_line` for text that goes into a prompt line.
    """
    for pattern, replacement in RULES:
        text = pattern.sub(replacement, text)
    return text


def inert_line(text: str, *, limit: int | None = None) -> str:
    """`text` as one inert line: collapsed, masked, cut to `limit` characters (with "…")."""
    line = mask_personal_data(collapse(text)).strip()
    if limit is not None and len(line) > limit:
        line = line[: limit - 1] + "…"
    return line
