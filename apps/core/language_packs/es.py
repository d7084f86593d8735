"""Spanish (es): its language pack (apps.core.language_packs)."""

from __future__ import annotations

from apps.core.language_packs._pack import DemoCues, RequestWords

NAME = "Spanish"
NATIVE_NAME = "Español"
RTL = False
ORDER = 1
PLURAL_FORMS = "nplurals=2; plural=(n != 1);"
STOP_WORDS = "apps/knowledge/stopwords/es.txt"

# --- the conversation's language (apps.core.languages) -----------------------------------------
# Yes and no, thanks, please, greetings and one-word acknowledgements: no evidence of a language.
SMALL_TALK = (
    "sí si no vale ok gracias muchas muchísimas por favor hola adiós buenas buenos días "
    "tardes noches perfecto bien muy claro genial de nada"
)
# Asking for a language in Spanish: how it names each shipped language, what puts a name after
# "in" / "speak", the request verbs, its "please" and its negations.
REQUEST = RequestWords(
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
)

# --- asking for a person (apps.reasoning.services.wants_human) ---------------------------------
WANTS_HUMAN = (
    r"(hablar|habla) con (una persona|un humano|un agente|alguien)|agente humano|"
    r"persona real"
)

# --- the offline demo model (apps.reasoning.steps._demo) ---------------------------------------
DEMO = DemoCues(
    amount=("cuánto", "cuanto", "precio", "cuesta", "tarifa"),
    refund=("reembolso",),
    returns=("devolver", "devolución"),
    cancel=("anular", "anula"),
    address=("dirección",),
    track=("dónde está", "seguimiento", "rastrear"),
    status=("estado", "pedido"),
    status_words=("estado",),
    policies={
        "policies.returns": ("devoluci", "devolver", "cambio"),
        "policies.shipping": ("envío", "entrega"),
        "policies.privacy": ("privacidad",),
        "policies.terms": ("garantía",),
    },
    info_starts=("¿cuándo", "cuándo", "¿cuánto", "cuánto", "¿cómo", "cómo"),
    exchange=("cambiar",),
    greetings=("hola", "buenos días", "buenas tardes"),
    contact=("horario", "abren", "teléfono", "correo", "contacto"),
    order_filler=("pedido", "número", "el", "es", "mi", "de"),
    phrases={
        "confirmed": "Gracias por confirmarlo; me pongo con ello.",
        "declined": "De acuerdo, no lo haré. ¿Hay algo más en lo que pueda ayudarle?",
        "greeting": "¡Hola! Soy el asistente de {client} (modelo de demostración sin conexión). "
        "Puedo consultar un pedido, seguir un paquete, cancelar un pedido o solicitar un "
        "reembolso, y responder preguntas sobre nuestras políticas.",
        "hours": "Nuestro horario es {hours}. Puede contactarnos en el {phone} o en {email}.",
        "no_policy": "No tengo esa política.",
        "policy": "Esto dice nuestra política: {text}",
        "fallback": "Soy el asistente de demostración sin conexión y sé pocas cosas: puedo "
        "consultar o seguir un pedido, cancelarlo, solicitar un reembolso y responder "
        "preguntas sobre devoluciones, envíos y nuestras preguntas frecuentes. ¿Qué desea hacer?",
        "need": "Con gusto le ayudo. ¿Me indica {need}?",
        "need_order": "su número de pedido (tiene este aspecto: TH-12345)",
        "need_other": "el dato «{name}»",
        "and": " y ",
        "can_do": "Puedo {action} el pedido {order}.",
        "looking": "Un momento, lo consulto.",
        "failed": "Lo siento, no he podido hacerlo: {error}",
        "cancelled": "¡Hecho! El pedido {order} ha sido cancelado. El reembolso de {refund} "
        "volverá a su método de pago original en un plazo de 5 días hábiles.",
        "refunded": "He solicitado el reembolso {refund_id} de {amount} del pedido {order}; lo "
        "recibirá en un plazo de {days} días hábiles.",
        "status": "El pedido {order} (realizado el {placed_on}, {items} artículo(s), {total}) "
        "está en estado: {status}.",
        "tracking": "El pedido {order} está en estado «{status}» con {carrier}; número de "
        "seguimiento {tracking}.",
        "no_tracking": "El pedido {order} sigue en estado «{status}», así que aún no tiene "
        "número de seguimiento.",
        "address": "Hecho: el pedido {order} se enviará a {address}.",
        "done": "Hecho: {details}",
        "anything_else": " ¿Puedo ayudarle en algo más?",
        "cannot": "Lo siento, eso no lo puedo hacer aquí.",
    },
    actions={
        "cancel_order": "cancelar",
        "request_refund": "solicitar el reembolso de",
        "update_shipping_address": "cambiar la dirección de envío de",
    },
)

# --- confirmations (apps.reasoning.confirmations) ------------------------------------------------
NO_START = (
    "no",
    "nop",
    "espera",
    "espere",
    "mejor no",
    "todavía no",
    "aún no",
    "ni hablar",
    "de ninguna manera",
    "detente",
    "alto",
    "para ya",
)
NEGATIONS = (
    "no",
    "nunca",
    "jamás",
    "tampoco",
    "ni",
    "nada",
    "ninguno",
    "ninguna",
    "nadie",
)
HEDGES = (
    "ya está",
    "eso es todo",
    "si",
    "pero",
    "aunque",
    "quizás",
    "quizá",
    "tal vez",
    "a lo mejor",
    "creo",
    "pienso",
    "supongo",
    "depende",
    "cuando",
    "antes",
    "después",
    "luego",
    "más tarde",
    "primero",
    "mañana",
    "espera",
    "espérate",
    "momento",
    "un momento",
    "cuál",
    "cuáles",
    "cómo",
    "por qué",
    "porque",
    "dónde",
    "cuánto",
    "cuánta",
    "quién",
    "en vez",
    "en lugar",
    "mejor",
    "otro",
    "otra",
    "también",
    "solo",
    "solamente",
    "excepto",
    "salvo",
    "a menos",
    "en realidad",
    "la verdad",
    "más",
    "todavía",
    "aún",
    "hasta",
    "mientras",
    "siempre que",
    "probablemente",
    "igual",
)

# --- the yes grammar (`confirmations.reading`): every word of a yes must be listed below ------
ASSENT = (
    "muy bien",
    "sí",
    "si",
    "sip",
    "sii",
    "síii",
    "claro",
    "claro que sí",
    "por supuesto",
    "vale",
    "de acuerdo",
    "dale",
    "adelante",
    "correcto",
    "exacto",
    "eso es",
    "confirmo",
    "confirmado",
    "lo confirmo",
    "hazlo",
    "sí por favor",
    "seguro",
    "afirmativo",
    "procede",
    "proceda",
    "así es",
    "efectivamente",
    "okey",
    "sale",
    "está bien",
    "esta bien",
    "ok dale",
    "sí señor",
    "sí señora",
    "venga",
    "sí claro",
    "claro que si",
)
# "sí" without its accent is "si", "if": a yes only standing among yeses ("Si." / "sí, cancélalo").
AMBIGUOUS = (
    "sí",
    "si",
)
IDIOMS = ("cómo no", "desde luego", "no hay problema", "sin problema", "ningún problema")
WEAK = (
    "perfecto",
    "bien",
    "genial",
    "listo",
    "estupendo",
    "excelente",
    "obvio",
    "guay",
)
POLITE = (
    "por favor",
    "porfa",
    "porfis",
    "porfavor",
    "gracias",
    "muchas gracias",
    "mil gracias",
    "muchísimas gracias",
    "gracias por tu ayuda",
    "gracias por su ayuda",
    "gracias por la ayuda",
    "te lo agradezco",
    "se lo agradezco",
)
ECHO = (
    "adelante y",
    "ya",
    "ahora",
    "ahora mismo",
    "estoy seguro",
    "estoy segura",
    "quiero",
    "puedes",
    "puede",
    "sigue",
    "continúa",
    "adelante con",
)
OBJECTS = (
    "lo",
    "la",
    "el pedido",
    "mi pedido",
    "pedido",
    "la orden",
    "mi orden",
    "orden",
    "la compra",
    "mi compra",
    "ese",
    "esa",
    "eso",
    "este",
    "esta",
    "esto",
    "ese pedido",
    "este pedido",
    "número",
    "el número",
)
CONFIRM_VERBS: dict[str, tuple[str, ...]] = {
    "cancel": (
        "cancelación",
        "la cancelación",
        "cancela",
        "cancélalo",
        "cancélala",
        "cancelar",
        "cancélelo",
        "cancélela",
        "cancelen",
        "cancélenlo",
        "cancelarlo",
        "cancelarla",
        "anula",
        "anúlalo",
        "anúlala",
        "anular",
        "anularlo",
        "anúlelo",
        "cancele",
    ),
    "refund": ("reembolsa", "reembolsar", "reembólsalo", "reembolsarlo", "devuélveme", "reembolse"),
    "delete": ("borra", "borrar", "bórralo", "elimina", "eliminar", "elimínalo"),
    "remove": ("quita", "quitar", "quítalo", "elimina", "eliminar"),
}
REVERSALS = (
    "deshacer",
    "deshaz",
    "revertir",
    "revierte",
    "restaura",
    "restablece",
    "reactiva",
    "anula la cancelación",
    "cancela la cancelación",
    "la solicitud de cancelación",
    "solicitud de cancelación",
    "echa atrás",
    "marcha atrás",
)
SARCASM = (
    "sí claro que sí hombre",
    "sí, hombre",
    "si hombre",
    "ya claro",
    "ya, claro",
    "sí, seguro",
    "genial, lo que faltaba",
    "lo que faltaba",
    "qué bien",
    "que bien",
    "perfecto, genial",
    "qué maravilla",
    "jaja",
    "jajaja",
    "ajá claro",
    "como si",
)

# --- drafts (the unavailable-tool rule) ---------------------------------------------------------
HOLDING = (
    "déjame",
    "dejame",
    "permíteme",
    "un momento",
    "un segundo",
    "voy a",
    "ahora mismo lo",
    "estoy revisando",
    "estoy comprobando",
    "reviso",
    "compruebo",
    "espera",
)
ACTIONS: dict[str, tuple[str, ...]] = {
    "cancel": ("cancel", "anul"),
    "delete": ("elimin", "borr", "suprim"),
    "remove": ("elimin", "quit", "borr"),
    "update": ("actualiz", "modific", "cambi"),
    "change": ("cambi", "modific", "actualiz"),
    "refund": ("reembols", "devol", "devuelt"),
    "reset": ("restablec", "reinici"),
    "book": ("reserv", "agend"),
    "reschedule": ("reprogram", "cambi"),
    "close": ("cerr", "cierr"),
}
