"""Portuguese (pt): its language pack (apps.core.language_packs).

"já" (already) is left out on purpose: without its accent it is German "ja" (yes)."""

from __future__ import annotations

from apps.core.language_packs._pack import DemoCues, RequestWords

NAME = "Portuguese"
NATIVE_NAME = "Português"
RTL = False
ORDER = 4
PLURAL_FORMS = "nplurals=2; plural=(n != 1);"
STOP_WORDS = "apps/knowledge/stopwords/pt.txt"

# --- the conversation's language (apps.core.languages) -----------------------------------------
# Yes and no, thanks, please, greetings and one-word acknowledgements: no evidence of a language.
SMALL_TALK = (
    "sim não nao ok obrigado obrigada muito por favor olá ola oi tchau perfeito beleza bom "
    "boa dia tarde claro certo tá"
)
# Asking for a language in Portuguese: how it names each shipped language, what puts a name after
# "in" / "speak", the request verbs, its "please" and its negations.
REQUEST = RequestWords(
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
)

# --- asking for a person (apps.reasoning.services.wants_human) ---------------------------------
WANTS_HUMAN = r"falar com (uma pessoa|um humano|um atendente|alguém)|atendente humano"

# --- the offline demo model (apps.reasoning.steps._demo) ---------------------------------------
DEMO = DemoCues(
    amount=("preço", "custa"),
)

# --- confirmations (apps.reasoning.confirmations) ------------------------------------------------
NO_START = (
    "não",
    "nao",
    "espera",
    "espere",
    "aguarde",
    "pare",
    "ainda não",
    "melhor não",
    "nem pensar",
    "de jeito nenhum",
    "negativo",
)
NEGATIONS = (
    "não",
    "nao",
    "ñ",
    "nunca",
    "jamais",
    "nem",
    "nenhum",
    "nenhuma",
    "nada",
)
HEDGES = (
    "tá tudo bem",
    "está tudo bem",
    "se",
    "mas",
    "porém",
    "talvez",
    "acho",
    "penso",
    "suponho",
    "provavelmente",
    "quando",
    "antes",
    "depois",
    "mais tarde",
    "primeiro",
    "amanhã",
    "espera",
    "qual",
    "quais",
    "por que",
    "porque",
    "como",
    "onde",
    "quanto",
    "quem",
    "o que",
    "em vez",
    "ao invés",
    "outro",
    "outra",
    "também",
    "só",
    "somente",
    "apenas",
    "exceto",
    "menos",
    "ou",
    "na verdade",
    "aliás",
    "hum",
    "hmm",
    "ainda",
    "enquanto",
    "caso",
    "desde que",
)

# --- the yes grammar (`confirmations.reading`): every word of a yes must be listed below ------
ASSENT = (
    "sim",
    "claro",
    "claro que sim",
    "com certeza",
    "certo",
    "isso",
    "isso mesmo",
    "é isso",
    "exato",
    "exatamente",
    "correto",
    "tá bem",
    "tá certo",
    "está bem",
    "está certo",
    "pode",
    "pode sim",
    "pode fazer",
    "confirmo",
    "confirmado",
    "confirmada",
    "combinado",
    "fechado",
    "de acordo",
    "concordo",
    "positivo",
    "vai em frente",
    "siga",
    "prossiga",
    "sim sim",
    "sim por favor",
    "certamente",
    "pode ir",
    "tudo bem",
    "beleza",
    "bora",
    "uhum",
    "aham",
    "pode seguir",
    "manda ver",
    "obviamente",
    "sim claro",
)
IDIOMS = ("sem problema", "sem problemas", "não tem problema", "nenhum problema")
FORMULAS = ("se faz favor",)
WEAK = ("ótimo", "perfeito", "show", "legal", "bom", "tá", "massa", "excelente", "blz")
POLITE = (
    "por favor",
    "por gentileza",
    "faz favor",
    "obrigado",
    "obrigada",
    "muito obrigado",
    "muito obrigada",
    "valeu",
    "brigado",
    "brigada",
    "obrigado pela ajuda",
    "obrigada pela ajuda",
    "agradeço",
)
ECHO = (
    "vai em frente e",
    "pode ir e",
    "agora",
    "já",
    "agora mesmo",
    "imediatamente",
    "logo",
    "tenho certeza",
    "quero",
    "gostaria de",
    "pode",
    "podem",
    "pra mim",
    "para mim",
)
OBJECTS = (
    "do pedido",
    "da encomenda",
    "o pedido",
    "meu pedido",
    "pedido",
    "a encomenda",
    "minha encomenda",
    "encomenda",
    "a compra",
    "minha compra",
    "esse",
    "essa",
    "este",
    "esta",
    "isso",
    "isto",
    "o",
    "a",
    "número",
    "o número",
    "esse pedido",
    "este pedido",
)
CONFIRM_VERBS: dict[str, tuple[str, ...]] = {
    "cancel": (
        "cancelamento",
        "o cancelamento",
        "cancela",
        "cancele",
        "cancelar",
        "cancelem",
        "cancelá-lo",
        "cancela-o",
        "cancelar o",
    ),
    "refund": ("reembolsa", "reembolse", "reembolsar", "estorna", "estornar", "devolve"),
    "delete": ("apaga", "apague", "apagar", "exclui", "excluir", "exclua"),
    "remove": ("remove", "remova", "remover", "tira", "tirar"),
}
REVERSALS = (
    "desfazer",
    "desfaz",
    "desfaça",
    "reverter",
    "reverte",
    "restaurar",
    "restaura",
    "reativar",
    "reativa",
    "o pedido de cancelamento",
    "pedido de cancelamento",
    "voltar atrás",
    "volta atrás",
)
SARCASM = (
    "sei",
    "tá bom então",
    "ah tá",
    "aham sei",
    "claro claro",
    "ótimo mesmo",
    "que ótimo",
    "que maravilha",
    "só que não",
    "kkk",
    "kkkk",
    "rsrs",
    "haha",
    "até parece",
)

# --- drafts (the unavailable-tool rule) ---------------------------------------------------------
HOLDING = (
    "deixe-me",
    "deixa eu",
    "deixa-me",
    "um momento",
    "só um momento",
    "um instante",
    "vou ",
    "estou verificando",
    "estou a verificar",
    "verificando",
)
ACTIONS: dict[str, tuple[str, ...]] = {
    "cancel": ("cancel", "anul"),
    "delete": ("exclu", "apag", "elimin"),
    "remove": ("remov", "exclu", "apag"),
    "update": ("atualiz", "alterad", "alterei", "modific"),
    "change": ("alterad", "alterei", "alterar", "alteracao", "mud", "troc"),
    "refund": ("reembols", "estorn", "devolv", "devolu"),
    "reset": ("redefin", "reinici"),
    "book": ("reserv", "agend"),
    "reschedule": ("remarc", "reagend"),
    "close": ("fech", "encerr"),
}
