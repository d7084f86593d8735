"""The languages GuideDesk ships for customers: codes, names and writing direction.

Detection (which language a text is written in), the evidence that moves a conversation to
another language (`language_evidence`: the conversation's language is sticky) and the
reply-language rule build on this."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# Code → English name (the name goes into prompts: "Reply in Hebrew (he)."). The widget, the
# confirmation phrasings and the catalogues ship for each of these.
SHIPPED = {
    "en": "English",
    "es": "Spanish",
    "fr": "French",
    "de": "German",
    "pt": "Portuguese",
    "it": "Italian",
    "nl": "Dutch",
    "he": "Hebrew",
    "ar": "Arabic",
}

# Written right to left (the widget mirrors its layout for these).
RTL = frozenset({"he", "ar", "fa", "ur", "yi"})


def normalise(code: str | None) -> str:
    """'en-GB' / 'EN_us' / ' pt-BR ' → 'en' / 'en' / 'pt'; None or '' → ''."""
    return (code or "").strip().lower().replace("_", "-").split("-")[0]


def is_rtl(code: str | None) -> bool:
    return normalise(code) in RTL


def language_name(code: str | None) -> str:
    """The English name of a shipped language; the code itself for any other."""
    base = normalise(code)
    return SHIPPED.get(base, base)


# Detection (lingua-language-detector). A detector is built once per candidate set and cached;
# lingua loads each language's models lazily, the first time a text needs them.
#
# A text with fewer letters than `MIN_LETTERS` is too short to tell ("ok", "12345") — except
# in a script only one shipped language uses (Hebrew, Arabic): lingua decides those by script.
# A text shorter than `SHORT_LETTERS` is judged among the client's allowed languages only
# (fewer candidates: "gracias" cannot come out Portuguese for a client that serves en and es);
# a longer one among all shipped languages. The best language must reach `MIN_CONFIDENCE`
# and be `MIN_RATIO` times as likely as the second; otherwise the answer is "" (unsure). A
# conversation's language does not follow this guess (see `language_evidence` below); the
# evaluation checks the assistant's replies with it. Chosen on the shipped set of short
# customer messages (docs/benchmarks.md, "Language detection"): no setting tried there gave a
# wrong language, only more or fewer "unsure".
MIN_LETTERS = 3
SHORT_LETTERS = 30
MIN_CONFIDENCE = 0.25
MIN_RATIO = 1.25

_LETTER = re.compile(r"[^\W\d_]", re.UNICODE)
_DIGIT = re.compile(r"\d", re.UNICODE)
_detectors: dict[frozenset[str], Any] = {}
_detectors_lock = threading.Lock()


def _detector(codes: frozenset[str]) -> Any:
    detector = _detectors.get(codes)
    if detector is None:
        from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

        languages = [
            Language.from_iso_code_639_1(getattr(IsoCode639_1, code.upper()))
            for code in sorted(codes)
        ]
        with _detectors_lock:
            detector = _detectors.get(codes)
            if detector is None:
                detector = LanguageDetectorBuilder.from_languages(*languages).build()
                _detectors[codes] = detector
    return detector


def _candidate_set(candidates: Iterable[str] | None) -> frozenset[str]:
    codes = frozenset(normalise(c) for c in candidates or ()).intersection(SHIPPED)
    return codes if len(codes) >= 2 else frozenset(SHIPPED)


def detect(text: str, *, candidates: Iterable[str] | None = None) -> str:
    """The shipped language `text` is written in, or "" when unsure.

    `candidates` are the client's allowed languages: a short text is judged among them only
    (when there are at least two), a longer one among all shipped languages."""
    letters = len(_LETTER.findall(text or ""))
    if letters == 0:
        return ""
    scripts_only = _single_script_language(text)
    if scripts_only:
        return scripts_only
    if letters < MIN_LETTERS:
        return ""
    codes = _candidate_set(candidates) if letters < SHORT_LETTERS else frozenset(SHIPPED)
    values = _detector(codes).compute_language_confidence_values(text)
    if not values:
        return ""
    best = values[0]
    second = values[1].value if len(values) > 1 else 0.0
    if best.value < MIN_CONFIDENCE or best.value < MIN_RATIO * second:
        return ""
    code = best.language.iso_code_639_1.name.lower()
    return code if code in SHIPPED else ""


# Letters of a script exactly one shipped language is written in.
_HEBREW = re.compile(r"[\u0590-\u05ff]")
_ARABIC = re.compile(r"[\u0600-\u06ff\u0750-\u077f]")


def _single_script_language(text: str) -> str:
    """'he' or 'ar' when most of the letters are Hebrew or Arabic ("כן", "نعم"), else ''."""
    letters = _LETTER.findall(text)
    for code, script in (("he", _HEBREW), ("ar", _ARABIC)):
        if sum(1 for ch in letters if script.match(ch)) * 2 > len(letters):
            return code
    return ""


def allowed_languages(client: Any) -> list[str]:
    """The languages a client answers in: `Client.languages`, or its default alone."""
    default = normalise(client.language) or "en"
    allowed = [normalise(c) for c in (client.languages or []) if normalise(c)]
    return allowed or [default]


def reply_language(*, detected: str, client: Any, current: str = "") -> str:
    """The language a turn replies in — the conversation's language, which is sticky.

    `detected` is the clear evidence a customer message gave (`language_evidence`: a long clear
    message, or an explicit request): that language when the client allows it, else the
    client's default. Without evidence ('' — an order number, a name, "ok", "Ja") the
    conversation keeps its `current` language, when allowed."""
    allowed = allowed_languages(client)
    default = normalise(client.language) or "en"
    code = normalise(detected) or normalise(current)
    return code if code in allowed else default


# ---------------------------------------------------------------- the conversation's language
# A conversation's language is sticky: it starts from the widget's language (the shop's
# data-language, the page's <html lang>, the browser's) and changes only on clear evidence
# (`language_evidence`): a long enough message clearly in another language, or the customer
# asking for one ("can you answer in Spanish?", "¿puede responder en español?"). Order numbers,
# digits, names, emoji and one-word answers never change it.
#
# A message is long enough with at least `SWITCH_WORDS` words of at least two letters and
# `SWITCH_LETTERS` letters in them, not counting words with a digit (order ids, numbers) nor
# the answers and courtesies of `_SMALL_TALK` ("Sí, muchas gracias", "Nein, vielen Dank", "כן,
# בבקשה" say nothing about the conversation's language); and one of its words must have four
# letters or more and not be capitalised (in a script with capitals): a name — "Jean-Pierre de
# la Fontaine", "Maria dos Santos Silva" — has none. It is then judged among all shipped
# languages (Hebrew and Arabic by script), and the best must reach `SWITCH_CONFIDENCE` and be
# `SWITCH_RATIO` times as likely as the second.
SWITCH_WORDS = 3
SWITCH_LETTERS = 12
SWITCH_CONFIDENCE = 0.3
SWITCH_RATIO = 1.5

_WORD = re.compile(r"[^\W\d_]{2,}(?:['’\-][^\W\d_]+)*", re.UNICODE)

# Per shipped language: yes and no, thanks, please, greetings and one-word acknowledgements.
_SMALL_TALK_BY_LANGUAGE = {
    "en": "yes yeah yep no nope ok okay thanks thank thx you please pls hi hello hey bye goodbye "
    "sure great perfect fine cool good nice very much lot",
    "es": "sí si no vale ok gracias muchas muchísimas por favor hola adiós buenas buenos días "
    "tardes noches perfecto bien muy claro genial de nada",
    "fr": "oui non ok merci beaucoup bien sûr d'accord bonjour bonsoir salut au revoir parfait "
    "super très s'il plaît vous",
    "de": "ja nein ok okay danke dank vielen schön bitte sehr gerne gern hallo tschüss genau "
    "super perfekt gut klar guten tag morgen",
    "pt": "sim não nao ok obrigado obrigada muito por favor olá ola oi tchau perfeito beleza bom "
    "boa dia tarde claro certo tá",
    "it": "sì si no ok grazie mille tante per favore ciao salve perfetto bene va certo buongiorno "
    "arrivederci molto",
    "nl": "ja nee ok oké dank bedankt je wel graag heel alstublieft alsjeblieft hallo hoi doei "
    "prima perfect goed top prima",
    "he": "כן לא אוקיי תודה רבה בבקשה שלום היי ביי בסדר מעולה סבבה אחלה מצוין",
    "ar": "نعم لا أوكي اوكي شكرا شكراً جزيلا جزيلاً من فضلك لو سمحت مرحبا أهلا اهلا السلام عليكم "
    "حسنا حسناً تمام ممتاز طيب",
}
_SMALL_TALK = frozenset(
    word.replace("’", "'") for words in _SMALL_TALK_BY_LANGUAGE.values() for word in words.split()
)


_SENTENCE_END = ".!?¿¡:;…\n"


def _words(text: str) -> list[str]:
    """The words of `text` but names: capitalised words that do not start a sentence (in a
    script with capitals; in German also nouns) — "My name is Hans Müller" → My name is."""
    words = []
    for match in _WORD.finditer(text):
        word = match.group()
        before = text[: match.start()].rstrip()
        if not word[0].isupper() or not before or before[-1] in _SENTENCE_END:
            words.append(word)
    return words


def clear_language(text: str) -> str:
    """The shipped language `text` is clearly written in, or '' when it is too short or too
    mixed to tell (see `SWITCH_WORDS`…): only such a message changes a conversation's language."""
    # Ids and numbers say nothing ("TH-12345", "A12B", "#4412", "١٢٣٤٥"): words with a digit go.
    text = " ".join(word for word in (text or "").split() if not _DIGIT.search(word))
    cased = [ch for ch in _LETTER.findall(text) if ch.lower() != ch.upper()]
    if cased and all(ch.isupper() for ch in cased):
        text = text.lower()  # "WHERE IS MY ORDER": shouted, not a run of names
    words = _words(text)
    # What counts towards "long enough": not the answers and courtesies ("Nein, vielen Dank").
    counted = [word for word in words if word.lower().replace("’", "'") not in _SMALL_TALK]
    if len(counted) < SWITCH_WORDS or len("".join(counted)) < SWITCH_LETTERS:
        return ""
    if not any(len(word) >= 4 and not word[0].isupper() for word in counted):
        return ""  # only names and short particles: "Jean-Pierre de la Fontaine"
    scripts_only = _single_script_language(text)
    if scripts_only:
        return scripts_only
    return _confident(" ".join(words))  # judged without the names


def _confident(text: str) -> str:
    """The shipped language lingua finds `text` clearly in (see `SWITCH_CONFIDENCE`), or ''."""
    values = _detector(frozenset(SHIPPED)).compute_language_confidence_values(text)
    if not values:
        return ""
    best = values[0]
    second = values[1].value if len(values) > 1 else 0.0
    if best.value < SWITCH_CONFIDENCE or best.value < SWITCH_RATIO * second:
        return ""
    code = best.language.iso_code_639_1.name.lower()
    return code if code in SHIPPED else ""


def language_evidence(text: str) -> str:
    """The language a customer message moves its conversation to, or '' (it stays): the
    language the customer asks for (`requested_language`), else the one the message is clearly
    written in (`clear_language`)."""
    return requested_language(text) or clear_language(text)


# Asking for a language, per shipped language the request is written in: how it names each
# shipped language, the words that put a language name after "in" ("in Spanish", "en español",
# "auf Deutsch", "בעברית", "بالعربية") or after "speak" ("do you speak Spanish?"), the verbs of
# a request (answer, write, continue…), its "please" and its negations ("I don't speak Spanish"
# asks for nothing). A request is: a language name after "in" or "speak", no negation, and a
# request verb (or "speak" itself) — or a short message of the name and "please" ("Spanish
# please", "auf Deutsch bitte"). A request naming two languages is ambiguous: nothing changes.
@dataclass(frozen=True)
class _RequestWords:
    names: dict[str, str]
    before: str  # what puts a language name after "in" / "speak" (regex, right before the name)
    verbs: str
    please: str
    negation: str


_REQUEST_WORDS: dict[str, _RequestWords] = {
    "en": _RequestWords(
        names={
            "en": "english",
            "es": "spanish",
            "fr": "french",
            "de": "german",
            "pt": "portuguese",
            "it": "italian",
            "nl": "dutch",
            "he": "hebrew",
            "ar": "arabic",
        },
        before=r"\b(?:in|speak|speaks|speaking|talk)\s+",
        verbs=r"\b(?:answer\w*|repl\w*|respond\w*|writ\w*|wrote|speak\w*|talk\w*|continu\w*|"
        r"switch\w*|chat\w*|help\w*|communicat\w*)\b",
        please=r"\b(?:please|pls|plz|thanks?)\b",
        negation=r"\b(?:not|never|cannot)\b|n['’]t\b|\bno\b(?!\s*[,.!;:])",
    ),
    "es": _RequestWords(
        names={
            "en": "ingl[eé]s",
            "es": "español|espanol|castellano",
            "fr": "franc[eé]s",
            "de": "alem[aá]n",
            "pt": "portugu[eé]s",
            "it": "italiano",
            "nl": "neerland[eé]s|holand[eé]s",
            "he": "hebreo",
            "ar": "[aá]rabe",
        },
        before=r"\b(?:en|habl\w*(?:\s+usted)?)\s+",
        verbs=r"\b(?:respond\w*|resp[oó]nd\w*|contest\w*|escrib\w*|habl\w*|continu\w*|"
        r"segu\w*|sigamos|cambi\w*|atiend\w*|ayud\w*)\b",
        please=r"\bpor\s+favor\b|\bgracias\b",
        negation=r"\b(?:nunca|tampoco)\b|\bno\b(?!\s*[,.!;:])",
    ),
    "fr": _RequestWords(
        names={
            "en": "anglais",
            "es": "espagnol",
            "fr": "fran[cç]ais",
            "de": "allemand",
            "pt": "portugais",
            "it": "italien",
            "nl": "n[ée]erlandais|hollandais",
            "he": "h[ée]breu",
            "ar": "arabe",
        },
        before=r"\b(?:en|parl\w*(?:-vous)?)\s+",
        verbs=r"(?:\b|^)(?:r[ée]pond\w*|[ée]cri\w*|parl\w*|continu\w*|pass\w*|chang\w*|"
        r"aid\w*)\b",
        please=r"\bs['’]il\s+(?:vous|te)\s+pla[iî]t\b|\bsvp\b|\bstp\b|\bmerci\b",
        negation=r"\b(?:ne|pas|jamais)\b|\bn['’]",
    ),
    "de": _RequestWords(
        names={
            "en": "englisch",
            "es": "spanisch",
            "fr": "französisch|franzoesisch",
            "de": "deutsch",
            "pt": "portugiesisch",
            "it": "italienisch",
            "nl": "niederländisch|holländisch",
            "he": "hebräisch",
            "ar": "arabisch",
        },
        before=r"\b(?:auf|in|sprechen(?:\s+sie)?|sprichst(?:\s+du)?)\s+",
        verbs=r"\b(?:antwort\w*|beantwort\w*|schreib\w*|sprech\w*|sprich\w*|rede\w*|redet|"
        r"weiter\w*|wechs\w*|helf\w*|hilf\w*)\b",
        please=r"\bbitte\b|\bdanke\b",
        negation=r"\b(?:nicht|nie|niemals|kein\w*)\b",
    ),
    "pt": _RequestWords(
        names={
            "en": "ingl[eê]s",
            "es": "espanhol",
            "fr": "franc[eê]s",
            "de": "alem[aã]o",
            "pt": "portugu[eê]s",
            "it": "italiano",
            "nl": "holand[eê]s|neerland[eê]s",
            "he": "hebraico",
            "ar": "[aá]rabe",
        },
        before=r"\b(?:em|fal\w*)\s+",
        verbs=r"\b(?:respond\w*|escrev\w*|fal\w*|continu\w*|mud\w*|atend\w*|ajud\w*)\b",
        please=r"\bpor\s+favor\b|\bobrigad[oa]\b",
        negation=r"\b(?:nunca|n[aã]o)\b(?!\s*[,.!;:])",
    ),
    "it": _RequestWords(
        names={
            "en": "inglese",
            "es": "spagnolo",
            "fr": "francese",
            "de": "tedesco",
            "pt": "portoghese",
            "it": "italiano",
            "nl": "olandese|neerlandese",
            "he": "ebraico",
            "ar": "arabo",
        },
        before=r"\b(?:in|parl\w*)\s+",
        verbs=r"\b(?:rispond\w*|scriv\w*|parl\w*|continu\w*|cambi\w*|aiut\w*)\b",
        please=r"\bper\s+(?:favore|piacere|cortesia)\b|\bgrazie\b",
        negation=r"\bmai\b|\bnon\b(?!\s*[,.!;:])",
    ),
    "nl": _RequestWords(
        names={
            "en": "engels",
            "es": "spaans",
            "fr": "frans",
            "de": "duits",
            "pt": "portugees",
            "it": "italiaans",
            "nl": "nederlands|vlaams",
            "he": "hebreeuws",
            "ar": "arabisch",
        },
        before=r"\b(?:in\s+het|in|(?:spreek\w*|spreken|praat\w*)(?:\s+(?:u|je|jij|jullie))?)\s+",
        verbs=r"\b(?:antwoord\w*|beantwoord\w*|schrij\w*|spre\w*|praat\w*|praten|verder|"
        r"overschakel\w*|help\w*)\b",
        please=r"\b(?:alstublieft|alsjeblieft|aub|graag|bedankt|dank)\b",
        negation=r"\b(?:niet|geen|nooit)\b",
    ),
    "he": _RequestWords(
        names={
            "en": "אנגלית",
            "es": "ספרדית",
            "fr": "צרפתית",
            "de": "גרמנית",
            "pt": "פורטוגזית|פורטוגלית",
            "it": "איטלקית",
            "nl": "הולנדית",
            "he": "עברית",
            "ar": "ערבית",
        },
        # "ב" is written onto the name: "בעברית" (in Hebrew).
        before=r"(?:(?<!\w)ב|(?<!\w)(?:מדבר|מדברת|מדברים|לדבר|דבר|דברי)\s+)",
        verbs=r"(?<!\w)(?:לענות|תענה|תעני|ענה|עני|לכתוב|תכתוב|תכתבי|כתוב|לדבר|מדבר|מדברת|"
        r"מדברים|דבר|דברי|להמשיך|נמשיך|תמשיך|תמשיכי|לעזור|לעבור|נעבור)(?!\w)",
        please=r"(?<!\w)(?:בבקשה|תודה)(?!\w)",
        negation=r"(?<!\w)(?:לא|אין|אינני|איני)(?!\w)",
    ),
    "ar": _RequestWords(
        names={
            "en": "الإنجليزية|الانجليزية|الإنكليزية|الانكليزية|انجليزي|إنجليزي",
            "es": "الإسبانية|الاسبانية|اسباني|إسباني",
            "fr": "الفرنسية|فرنسي",
            "de": "الألمانية|الالمانية|ألماني|الماني",
            "pt": "البرتغالية|برتغالي",
            "it": "الإيطالية|الايطالية|إيطالي|ايطالي",
            "nl": "الهولندية|هولندي",
            "he": "العبرية|عبري",
            "ar": "العربية|عربي",
        },
        # "ب" is written onto the name: "بالعربية" (in Arabic); or "باللغة العربية".
        before=r"(?:(?<!\w)ب(?=ال)|(?<!\w)باللغة\s+|(?<!\w)(?:تتكلم|تتحدث|تحكي|نتكلم|نتحدث|"
        r"التحدث|التكلم|تكلم|تحدث|يتكلم|يتحدث)\s+)",
        verbs=r"(?<!\w)(?:الرد|ترد|رد|ردوا|أجب|اجب|أجيبوا|تجيب|الإجابة|الاجابة|تكتب|اكتب|الكتابة|"
        r"تتحدث|التحدث|تتكلم|التكلم|تحدث|تكلم|نكمل|أكمل|اكمل|نتابع|تساعد|المساعدة|نتحدث|نتكلم)"
        r"(?!\w)",
        please=r"(?<!\w)(?:من\s+فضلك|لو\s+سمحت|رجاء|شكرا)(?!\w)",
        negation=r"(?<!\w)(?:لا|لست|ليس|لن|لم)(?!\w)",
    ),
}
# "Spanish please": the name and "please" with at most this many words in all.
_PLEASE_WORDS = 5


def requested_language(text: str) -> str:
    """The shipped language the customer asks the conversation to continue in, or '' when the
    message asks for none (see `_REQUEST_WORDS`)."""
    text = (text or "").strip()
    if not text:
        return ""
    words = len(_WORD.findall(text))
    asked: set[str] = set()
    for table in _REQUEST_WORDS.values():
        if re.search(table.negation, text, re.IGNORECASE):
            continue
        verb = re.search(table.verbs, text, re.IGNORECASE)
        please = words <= _PLEASE_WORDS and re.search(table.please, text, re.IGNORECASE)
        if not (verb or please):
            continue
        for code, name in table.names.items():
            if re.search(rf"(?:{table.before})(?:{name})(?!\w)", text, re.IGNORECASE) or (
                # "Spanish please", "Deutsch, bitte": the name first, in a short message.
                please and re.match(rf"\W*(?:{name})(?!\w)", text, re.IGNORECASE)
            ):
                asked.add(code)
    return asked.pop() if len(asked) == 1 else ""
