"""German (de): its language pack (apps.core.language_packs)."""

from __future__ import annotations

from apps.core.language_packs._pack import DemoCues, RequestWords

NAME = "German"
NATIVE_NAME = "Deutsch"
RTL = False
ORDER = 3
PLURAL_FORMS = "nplurals=2; plural=(n != 1);"
STOP_WORDS = "apps/knowledge/stopwords/de.txt"

# --- the conversation's language (apps.core.languages) -----------------------------------------
# Yes and no, thanks, please, greetings and one-word acknowledgements: no evidence of a language.
SMALL_TALK = (
    "ja nein ok okay danke dank vielen schön bitte sehr gerne gern hallo tschüss genau "
    "super perfekt gut klar guten tag morgen"
)
# Asking for a language in German: how it names each shipped language, what puts a name after
# "in" / "speak", the request verbs, its "please" and its negations.
REQUEST = RequestWords(
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
)

# --- asking for a person (apps.reasoning.services.wants_human) ---------------------------------
WANTS_HUMAN = r"(einem menschen|einer person|einem mitarbeiter) (sprechen|reden)|echten menschen"

# --- the offline demo model (apps.reasoning.steps._demo) ---------------------------------------
DEMO = DemoCues(
    amount=("wie viel", "wieviel", "kostet", "preis", "gebühr"),
)

# --- confirmations (apps.reasoning.confirmations) ------------------------------------------------
NO_START = (
    "nein",
    "nee",
    "nö",
    "ne",
    "stopp",
    "stop",
    "halt",
    "warte",
    "warten sie",
    "moment",
    "lieber nicht",
    "noch nicht",
    "auf keinen fall",
    "bloß nicht",
    "nein danke",
)
NEGATIONS = (
    "nein",
    "nicht",
    "nie",
    "niemals",
    "kein",
    "keine",
    "keinen",
    "keinem",
    "nichts",
    "nee",
    "nö",
    "weder",
)
HEDGES = (
    "wenn",
    "falls",
    "sofern",
    "ob",
    "aber",
    "vielleicht",
    "eventuell",
    "womöglich",
    "glaube",
    "denke",
    "vermutlich",
    "wahrscheinlich",
    "außer",
    "es sei denn",
    "erst",
    "zuerst",
    "vorher",
    "bevor",
    "nachher",
    "später",
    "danach",
    "morgen",
    "warte",
    "moment",
    "welche",
    "welcher",
    "welches",
    "warum",
    "wieso",
    "weshalb",
    "wie",
    "wo",
    "wann",
    "wer",
    "was",
    "stattdessen",
    "lieber",
    "andere",
    "anderen",
    "anderes",
    "auch",
    "nur",
    "eigentlich",
    "oder",
    "hmm",
    "ähm",
    "naja",
    "na ja",
    "sondern",
    "jedoch",
    "obwohl",
    "als",
    "solange",
    "bis",
    "noch",
)

# --- the yes grammar (`confirmations.reading`): every word of a yes must be listed below ------
ASSENT = (
    "sehr gut",
    "das ist richtig",
    "das ist korrekt",
    "das stimmt",
    "ja",
    "jap",
    "jo",
    "jep",
    "jawohl",
    "jawoll",
    "jaja",
    "klar",
    "na klar",
    "sicher",
    "natürlich",
    "selbstverständlich",
    "genau",
    "richtig",
    "korrekt",
    "stimmt",
    "passt",
    "passt so",
    "das passt so",
    "in ordnung",
    "alles klar",
    "einverstanden",
    "bestätigt",
    "ich bestätige",
    "bestätige",
    "gerne",
    "gern",
    "mach das",
    "machen sie das",
    "mach es",
    "machen sie es",
    "auf jeden fall",
    "unbedingt",
    "sehr gerne",
    "geht klar",
    "ja bitte",
    "ja gerne",
    "okay",
    "sicherlich",
    "absolut",
    "exakt",
    "bitte ja",
    "ja doch",
    "los",
    "ja klar",
    "ja genau",
)
IDIOMS = ("kein problem", "keine sorge", "kein thema")
WEAK = ("gut", "perfekt", "super", "prima", "toll", "klasse", "schön", "wunderbar")
POLITE = (
    "bitte",
    "danke",
    "vielen dank",
    "danke schön",
    "dankeschön",
    "besten dank",
    "danke sehr",
    "herzlichen dank",
    "bitteschön",
    "danke für ihre hilfe",
    "danke für die hilfe",
    "danke dir",
    "danke ihnen",
)
ECHO = (
    "jetzt",
    "sofort",
    "gleich",
    "ich bin sicher",
    "ich will",
    "ich möchte",
    "sie können",
    "du kannst",
    "für mich",
    "so schnell wie möglich",
    "einfach",
    "dann",
    "gerne doch",
)
OBJECTS = (
    "es",
    "sie",
    "das",
    "die bestellung",
    "meine bestellung",
    "bestellung",
    "den auftrag",
    "meinen auftrag",
    "auftrag",
    "diese bestellung",
    "die",
    "nummer",
    "die nummer",
    "ihn",
)
CONFIRM_VERBS: dict[str, tuple[str, ...]] = {
    "cancel": (
        "stornierung",
        "storno",
        "storniere",
        "stornieren",
        "stornier",
        "stornieren sie",
        "storniert",
        "stornierst",
        "abbrechen",
        "brich ab",
        "brechen sie ab",
    ),
    "refund": ("erstatten", "erstatte", "zurückerstatten", "erstatten sie", "erstattet"),
    "delete": ("löschen", "lösche", "löschen sie"),
    "remove": ("entfernen", "entferne", "entfernen sie"),
}
REVERSALS = (
    "rückgängig",
    "widerrufen",
    "widerrufe",
    "zurücknehmen",
    "zurückziehen",
    "wiederherstellen",
    "reaktivieren",
    "die stornierung stornieren",
    "stornierungsanfrage",
    "die stornoanfrage",
    "stornoanfrage",
)
SARCASM = (
    "danke für nichts",
    "ja klar sicher",
    "na super",
    "na toll",
    "na prima",
    "ganz toll",
    "ja ne is klar",
    "ja nee is klar",
    "jaja schon klar",
    "schon klar",
    "super gemacht",
    "lol",
    "haha",
    "wer's glaubt",
    "ja sicher doch",
)

# --- drafts (the unavailable-tool rule) ---------------------------------------------------------
HOLDING = (
    "einen moment",
    "moment bitte",
    "lassen sie mich",
    "lass mich",
    "ich werde",
    "ich prüfe",
    "ich schaue",
    "ich sehe nach",
    "ich kümmere mich",
)
ACTIONS: dict[str, tuple[str, ...]] = {
    "cancel": ("stornier", "storno", "abbestell", "annullier", "gekundigt", "kundig"),
    "delete": ("losch", "geloscht", "entfern"),
    "remove": ("entfern", "losch"),
    "update": ("aktualisier", "geandert", "anderung", "andern"),
    "change": ("geandert", "anderung", "andern", "umgestellt"),
    "refund": ("erstatt", "ruckerstatt", "zuruckerstatt", "zuruckgezahlt"),
    "reset": ("zuruckgesetzt", "zurucksetz"),
    "book": ("gebucht", "buchung", "reservier"),
    "reschedule": ("verschob", "verleg"),
    "close": ("geschlossen", "schliessung", "schliessen"),
}
