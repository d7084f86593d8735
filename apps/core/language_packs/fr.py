"""French (fr): its language pack (apps.core.language_packs)."""

from __future__ import annotations

from apps.core.language_packs._pack import DemoCues, RequestWords

NAME = "French"
NATIVE_NAME = "Français"
RTL = False
ORDER = 2
PLURAL_FORMS = "nplurals=2; plural=(n > 1);"
STOP_WORDS = "apps/knowledge/stopwords/fr.txt"

# --- the conversation's language (apps.core.languages) -----------------------------------------
# Yes and no, thanks, please, greetings and one-word acknowledgements: no evidence of a language.
SMALL_TALK = (
    "oui non ok merci beaucoup bien sûr d'accord bonjour bonsoir salut au revoir parfait "
    "super très s'il plaît vous"
)
# Asking for a language in French: how it names each shipped language, what puts a name after
# "in" / "speak", the request verbs, its "please" and its negations.
REQUEST = RequestWords(
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
)

# --- asking for a person (apps.reasoning.services.wants_human) ---------------------------------
WANTS_HUMAN = (
    r"parler (à|a|avec) (un humain|une personne|un conseiller|quelqu'un)|vrai humain|"
    r"conseiller humain"
)

# --- the offline demo model (apps.reasoning.steps._demo) ---------------------------------------
DEMO = DemoCues(
    amount=("combien", "prix", "coûte", "tarif", "frais"),
)

# --- confirmations (apps.reasoning.confirmations) ------------------------------------------------
NO_START = (
    "non",
    "nan",
    "attendez",
    "attends",
    "stop",
    "arrête",
    "arrêtez",
    "surtout pas",
    "pas maintenant",
    "pas encore",
    "laisse tomber",
    "laissez tomber",
    "jamais",
)
NEGATIONS = (
    "non",
    "nan",
    "pas",
    "ne",
    "n",
    "jamais",
    "rien",
    "aucun",
    "aucune",
    "ni",
    "plus jamais",
)
HEDGES = (
    "si",
    "s'il",
    "s'ils",
    "s'elle",
    "mais",
    "peut-être",
    "peut être",
    "sauf",
    "à moins",
    "quand",
    "lorsque",
    "avant",
    "après",
    "plus tard",
    "d'abord",
    "attends",
    "attendez",
    "pense",
    "crois",
    "suppose",
    "quel",
    "quelle",
    "quels",
    "quelles",
    "pourquoi",
    "comment",
    "combien",
    "où",
    "qui",
    "plutôt",
    "au lieu",
    "autre",
    "aussi",
    "seulement",
    "uniquement",
    "demain",
    "en fait",
    "finalement",
    "sinon",
    "bof",
    "euh",
    "hmm",
    "moment",
    "un instant",
    "est-ce",
    "est-ce que",
    "lequel",
    "laquelle",
    "encore",
    "probablement",
    "tant que",
    "pourvu",
    "sauf si",
)

# --- the yes grammar (`confirmations.reading`): every word of a yes must be listed below ------
ASSENT = (
    "très bien",
    "oui",
    "ouais",
    "ouaip",
    "ouep",
    "d'accord",
    "dac",
    "daccord",
    "bien sûr",
    "évidemment",
    "absolument",
    "exactement",
    "exact",
    "c'est ça",
    "c'est bon",
    "c'est correct",
    "entendu",
    "allez-y",
    "allez y",
    "vas-y",
    "vas y",
    "je confirme",
    "confirmé",
    "confirmée",
    "tout à fait",
    "volontiers",
    "ça marche",
    "certainement",
    "oui oui",
    "bien entendu",
    "ok pour moi",
    "ça me va",
    "c'est parti",
    "si",
    "oui svp",
    "affirmatif",
    "carrément",
    "allez",
    "faites-le",
    "fais-le",
    "faites le",
    "fais le",
)
# "si" (yes, to a negative question) is also "if".
AMBIGUOUS = ("si",)
IDIOMS = ("pas de problème", "pas de souci", "pas de soucis", "aucun problème", "sans problème")
FORMULAS = (
    "s'il vous plaît",
    "s'il te plaît",
    "s'il vous plait",
)
WEAK = ("parfait", "bien", "super", "top", "génial", "nickel", "impeccable", "cool")
POLITE = (
    "svp",
    "stp",
    "merci",
    "merci beaucoup",
    "merci bien",
    "mille mercis",
    "merci pour votre aide",
    "merci pour ton aide",
    "bonne journée",
    "merci d'avance",
)
ECHO = (
    "maintenant",
    "tout de suite",
    "de suite",
    "je suis sûr",
    "je suis sûre",
    "je veux",
    "je voudrais",
    "vous pouvez",
    "tu peux",
    "pour moi",
    "dès que possible",
)
OBJECTS = (
    "la",
    "le",
    "l",
    "la commande",
    "ma commande",
    "commande",
    "cette commande",
    "celle-là",
    "celle-ci",
    "ça",
    "cela",
    "numéro",
    "le numéro",
    "ma réservation",
    "la réservation",
)
CONFIRM_VERBS: dict[str, tuple[str, ...]] = {
    "cancel": (
        "annulation",
        "l'annulation",
        "annulez",
        "annule",
        "annuler",
        "annulez-la",
        "annulez-le",
        "annule-la",
        "annule-le",
        "l'annuler",
        "l'annulez",
        "l'annule",
    ),
    "refund": ("remboursez", "rembourse", "rembourser", "remboursez-moi", "rembourse-moi"),
    "delete": ("supprimez", "supprime", "supprimer", "effacez"),
    "remove": ("retirez", "retire", "retirer", "supprimez", "supprimer"),
}
REVERSALS = (
    "annuler l'annulation",
    "annulez l'annulation",
    "défaire",
    "défaites",
    "revenir en arrière",
    "rétablir",
    "rétablissez",
    "restaurer",
    "restaurez",
    "réactiver",
    "réactivez",
    "la demande d'annulation",
    "demande d'annulation",
)
SARCASM = (
    "merci pour rien",
    "c'est ça oui",
    "mais oui bien sûr",
    "oui c'est ça",
    "super génial",
    "génial vraiment",
    "manquait plus que ça",
    "il manquait plus que ça",
    "mdr",
    "lol",
    "ben voyons",
    "bien sûr bien sûr",
    "trop bien",
    "mais bien sûr",
)

# --- drafts (the unavailable-tool rule) ---------------------------------------------------------
HOLDING = (
    "laissez-moi",
    "laisse-moi",
    "un instant",
    "un moment",
    "je vais",
    "je vérifie",
    "je regarde",
    "je m'en occupe",
    "patientez",
)
ACTIONS: dict[str, tuple[str, ...]] = {
    "cancel": ("annul",),
    "delete": ("supprim", "effac"),
    "remove": ("supprim", "retir"),
    "update": ("modifi", "actualis", "mis a jour", "mise a jour"),
    "change": ("modifi", "chang"),
    "refund": ("rembours",),
    "reset": ("reinitialis",),
    "book": ("reserv",),
    "reschedule": ("deplac", "reprogramm"),
    "close": ("ferm", "clotur"),
}
