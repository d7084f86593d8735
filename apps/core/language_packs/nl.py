"""Dutch (nl): its language pack (apps.core.language_packs).

"maar" is "but", except at the end of a clause after a verb: "annuleer hem maar" is a
go-ahead (`FINAL_PARTICLES`)."""

from __future__ import annotations

from apps.core.language_packs._pack import DemoCues, RequestWords

NAME = "Dutch"
NATIVE_NAME = "Nederlands"
RTL = False
ORDER = 6
PLURAL_FORMS = "nplurals=2; plural=(n != 1);"
STOP_WORDS = "apps/knowledge/stopwords/nl.txt"

# --- the conversation's language (apps.core.languages) -----------------------------------------
# Yes and no, thanks, please, greetings and one-word acknowledgements: no evidence of a language.
SMALL_TALK = (
    "ja nee ok oké dank bedankt je wel graag heel alstublieft alsjeblieft hallo hoi doei "
    "prima perfect goed top prima"
)
# Asking for a language in Dutch: how it names each shipped language, what puts a name after
# "in" / "speak", the request verbs, its "please" and its negations.
REQUEST = RequestWords(
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
)

# --- asking for a person (apps.reasoning.services.wants_human) ---------------------------------
WANTS_HUMAN = r"(met )?(een mens|een medewerker|iemand) (spreken|praten)|echte mens"

# --- the offline demo model (apps.reasoning.steps._demo) ---------------------------------------
DEMO = DemoCues(
    amount=("hoeveel", "prijs", "kost"),
)

# --- confirmations (apps.reasoning.confirmations) ------------------------------------------------
NO_START = (
    "nee",
    "neen",
    "nope",
    "niet doen",
    "wacht",
    "wacht even",
    "stop",
    "liever niet",
    "nog niet",
    "echt niet",
    "geen sprake van",
    "ho",
    "ho maar",
    "nee dank je",
)
NEGATIONS = ("nee", "neen", "niet", "nooit", "geen", "niets", "niks", "nergens")
HEDGES = (
    "als",
    "indien",
    "mits",
    "tenzij",
    "maar",
    "misschien",
    "wellicht",
    "mogelijk",
    "denk",
    "geloof",
    "waarschijnlijk",
    "wanneer",
    "eerst",
    "voordat",
    "daarna",
    "later",
    "straks",
    "morgen",
    "wacht",
    "welke",
    "welk",
    "waarom",
    "hoe",
    "waar",
    "wat",
    "wie",
    "hoeveel",
    "in plaats",
    "liever",
    "ander",
    "andere",
    "ook",
    "alleen",
    "behalve",
    "eigenlijk",
    "of",
    "hmm",
    "uh",
    "eh",
    "toch",
    "nog",
    "zolang",
    "totdat",
)
FINAL_PARTICLES = ("maar",)

# --- the yes grammar (`confirmations.reading`): every word of a yes must be listed below ------
ASSENT = (
    "ja",
    "jazeker",
    "jawel",
    "ja hoor",
    "ja graag",
    "jep",
    "jup",
    "zeker",
    "zeker weten",
    "natuurlijk",
    "tuurlijk",
    "uiteraard",
    "oké",
    "oke",
    "is goed",
    "dat is goed",
    "klopt",
    "dat klopt",
    "precies",
    "juist",
    "correct",
    "akkoord",
    "doe maar",
    "ga je gang",
    "ga uw gang",
    "ga maar door",
    "ga door",
    "bevestigd",
    "ik bevestig",
    "bevestig",
    "in orde",
    "afgesproken",
    "zeker doen",
    "doe het maar",
    "ja ja",
    "ja alsjeblieft",
    "ja alstublieft",
    "vooruit",
    "is prima",
    "dat is prima",
    "ja prima",
    "doe het",
    "graag",
)
IDIOMS = ("geen probleem", "geen punt", "geen zorgen")
WEAK = ("prima", "goed", "top", "perfect", "super", "fijn", "mooi", "helemaal goed", "uitstekend")
POLITE = (
    "alsjeblieft",
    "alstublieft",
    "aub",
    "graag",
    "dank",
    "dank je",
    "dank u",
    "dank je wel",
    "dank u wel",
    "bedankt",
    "hartelijk dank",
    "heel erg bedankt",
    "bedankt voor de hulp",
    "bedankt voor je hulp",
    "hoor",
)
ECHO = (
    "ga je gang en",
    "ga uw gang en",
    "nu",
    "meteen",
    "direct",
    "gelijk",
    "zo snel mogelijk",
    "ik weet het zeker",
    "ik wil",
    "u mag",
    "je mag",
    "voor mij",
    "gewoon",
)
OBJECTS = (
    "hem",
    "het",
    "die",
    "dat",
    "deze",
    "de bestelling",
    "mijn bestelling",
    "bestelling",
    "de order",
    "mijn order",
    "order",
    "nummer",
    "het nummer",
)
CONFIRM_VERBS: dict[str, tuple[str, ...]] = {
    "cancel": (
        "annulering",
        "de annulering",
        "annuleer",
        "annuleren",
        "annuleert",
        "cancel",
        "cancelen",
    ),
    "refund": ("terugbetalen", "betaal terug", "stort terug", "restitueer"),
    "delete": ("verwijder", "verwijderen", "wis"),
    "remove": ("verwijder", "verwijderen", "haal weg"),
}
REVERSALS = (
    "ongedaan",
    "terugdraaien",
    "draai terug",
    "herstel",
    "herstellen",
    "heractiveer",
    "de annulering annuleren",
    "annuleringsverzoek",
    "het annuleringsverzoek",
    "intrekken",
    "trek in",
)
SARCASM = (
    "bedankt voor niks",
    "bedankt voor niets",
    "ja hoor tuurlijk",
    "ja ja tuurlijk",
    "ja vast",
    "vast wel",
    "echt top",
    "lekker dan",
    "geweldig hoor",
    "nou geweldig",
    "nou top",
    "haha",
    "lol",
    "jaja",
)

# --- drafts (the unavailable-tool rule) ---------------------------------------------------------
HOLDING = (
    "een moment",
    "momentje",
    "laat me",
    "ik ga",
    "ik zal",
    "ik kijk",
    "even kijken",
    "ik controleer",
)
ACTIONS: dict[str, tuple[str, ...]] = {
    "cancel": ("annuleer", "geannuleerd", "annulering"),
    "delete": ("verwijder",),
    "remove": ("verwijder",),
    "update": ("bijgewerkt", "bijwerk", "gewijzigd", "wijzig"),
    "change": ("gewijzigd", "wijzig", "veranderd", "verander"),
    "refund": ("terugbetaal", "terugbetaald", "teruggestort", "terugstort", "restitu"),
    "reset": ("gereset", "reset"),
    "book": ("geboekt", "boeking", "gereserveerd", "reserveer"),
    "reschedule": ("verplaatst", "verzet"),
    "close": ("gesloten", "sluit"),
}
