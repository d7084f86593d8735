"""Italian (it): its language pack (apps.core.language_packs)."""

from __future__ import annotations

from apps.core.language_packs._pack import DemoCues, RequestWords

NAME = "Italian"
NATIVE_NAME = "Italiano"
RTL = False
ORDER = 5
PLURAL_FORMS = "nplurals=2; plural=(n != 1);"
STOP_WORDS = "apps/knowledge/stopwords/it.txt"

# --- the conversation's language (apps.core.languages) -----------------------------------------
# Yes and no, thanks, please, greetings and one-word acknowledgements: no evidence of a language.
SMALL_TALK = (
    "sì si no ok grazie mille tante per favore ciao salve perfetto bene va certo buongiorno "
    "arrivederci molto"
)
# Asking for a language in Italian: how it names each shipped language, what puts a name after
# "in" / "speak", the request verbs, its "please" and its negations.
REQUEST = RequestWords(
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
)

# --- asking for a person (apps.reasoning.services.wants_human) ---------------------------------
WANTS_HUMAN = r"parlare con (una persona|un operatore|un umano|qualcuno)|operatore umano"

# --- the offline demo model (apps.reasoning.steps._demo) ---------------------------------------
DEMO = DemoCues(
    amount=("quanto", "prezzo", "costa"),
)

# --- confirmations (apps.reasoning.confirmations) ------------------------------------------------
NO_START = (
    "no",
    "nono",
    "aspetta",
    "aspetti",
    "fermo",
    "ferma",
    "fermati",
    "stop",
    "mai",
    "meglio di no",
    "non ancora",
    "per niente",
    "lascia stare",
    "lascia perdere",
)
NEGATIONS = (
    "non",
    "no",
    "niente",
    "nulla",
    "nessuno",
    "nessuna",
    "nessun",
    "né",
    "neanche",
    "nemmeno",
    "neppure",
)
HEDGES = (
    "se",
    "ma",
    "però",
    "forse",
    "magari",
    "penso",
    "credo",
    "suppongo",
    "probabilmente",
    "quando",
    "dopo",
    "più tardi",
    "domani",
    "aspetta",
    "quale",
    "quali",
    "perché",
    "come",
    "dove",
    "quanto",
    "chi",
    "invece",
    "altro",
    "altra",
    "anche",
    "solo",
    "soltanto",
    "tranne",
    "eccetto",
    "a meno",
    "oppure",
    "veramente",
    "in realtà",
    "comunque",
    "boh",
    "mah",
    "ehm",
    "hmm",
    "purché",
    "mentre",
    "finché",
    "ancora",
)

# --- the yes grammar (`confirmations.reading`): every word of a yes must be listed below ------
ASSENT = (
    "sì",
    "si",
    "certo",
    "certamente",
    "certo che sì",
    "sicuro",
    "esatto",
    "esattamente",
    "giusto",
    "corretto",
    "va bene",
    "va bene così",
    "d'accordo",
    "daccordo",
    "confermo",
    "confermato",
    "confermata",
    "procedi",
    "procedete",
    "proceda",
    "vai",
    "vai pure",
    "fallo",
    "fai pure",
    "assolutamente",
    "assolutamente sì",
    "senz'altro",
    "volentieri",
    "sì sì",
    "va benissimo",
    "okay",
    "vabene",
    "sì certo",
    "sì per favore",
    "ovviamente",
    "affermativo",
    "andiamo",
)
# "sì" typed without its accent is "si" (Spanish and French "if").
AMBIGUOUS = ("si",)
IDIOMS = ("come no", "nessun problema", "non c'è problema", "nessuna preoccupazione")
WEAK = ("perfetto", "ottimo", "benissimo", "bene", "ovvio", "fantastico", "super", "prima")
POLITE = (
    "per favore",
    "per piacere",
    "per cortesia",
    "grazie",
    "grazie mille",
    "grazie tante",
    "mille grazie",
    "molte grazie",
    "grazie dell'aiuto",
    "grazie per l'aiuto",
    "gentilissimo",
    "gentilissima",
    "ti ringrazio",
    "la ringrazio",
)
ECHO = (
    "vai pure e",
    "procedi e",
    "adesso",
    "ora",
    "subito",
    "pure",
    "sono sicuro",
    "sono sicura",
    "voglio",
    "vorrei",
    "puoi",
    "può",
    "per me",
    "al più presto",
)
OBJECTS = (
    "dell'ordine",
    "dell",
    "l'ordine",
    "l",
    "lo",
    "la",
    "ordine",
    "il mio ordine",
    "mio ordine",
    "l'ordinazione",
    "quello",
    "quella",
    "questo",
    "questa",
    "numero",
    "il numero",
    "quell'ordine",
)
CONFIRM_VERBS: dict[str, tuple[str, ...]] = {
    "cancel": (
        "annullamento",
        "l'annullamento",
        "cancellazione",
        "annulla",
        "annullala",
        "annullalo",
        "annullare",
        "annullate",
        "annullarlo",
        "annullarla",
        "cancella",
        "cancellala",
        "cancellalo",
        "cancellare",
        "cancellarlo",
        "annulli",
    ),
    "refund": ("rimborsa", "rimborsare", "rimborsami", "rimborsatemi", "rimborsi"),
    "delete": ("elimina", "eliminare", "eliminalo", "cancella", "cancellalo"),
    "remove": ("rimuovi", "rimuovere", "togli", "togliere"),
}
REVERSALS = (
    "disfare",
    "annulla l'annullamento",
    "ripristina",
    "ripristinare",
    "riattiva",
    "riattivare",
    "tornare indietro",
    "torna indietro",
    "la richiesta di annullamento",
    "richiesta di annullamento",
    "revoca",
    "revocare",
)
SARCASM = (
    "grazie per niente",
    "sì certo come no",
    "sì, come no",
    "ma certo",
    "ottimo davvero",
    "bravi bravi",
    "che bello",
    "proprio perfetto",
    "ci mancava solo questa",
    "ahah",
    "ahahah",
    "lol",
    "figurati",
    "sì vabbè",
)

# --- drafts (the unavailable-tool rule) ---------------------------------------------------------
HOLDING = (
    "lasciami",
    "mi lasci",
    "un momento",
    "un attimo",
    "vado a",
    "sto controllando",
    "controllo subito",
    "verifico",
    "attendi",
)
ACTIONS: dict[str, tuple[str, ...]] = {
    "cancel": ("annull", "cancell", "disdett"),
    "delete": ("elimin", "cancell", "rimoss"),
    "remove": ("rimoss", "rimuov", "elimin"),
    "update": ("aggiorn", "modific"),
    "change": ("cambi", "modific"),
    "refund": ("rimbors",),
    "reset": ("reimpost", "resett"),
    "book": ("prenot",),
    "reschedule": ("spostat", "riprogramm"),
    "close": ("chius", "chiud"),
}
