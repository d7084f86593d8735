"""One register per language: Spanish speaks to customers and staff as *usted* everywhere GuideDesk
writes Spanish — the catalogue, the widget's strings and the offline demo model's phrases. A
*tú* form (a pronoun, a second-person verb, a familiar imperative) fails the test with the
sentence it was found in."""

from __future__ import annotations

import json
import re

import pytest
from django.conf import settings

from apps.core.catalogues import catalogue_files, catalogue_read
from apps.reasoning.steps._demo import phrases

# Pronouns and possessives of tú, and second-person singular verbs (never usted's).
TU_WORDS = (
    "tú|tu|tus|te|ti|contigo|tuyo|tuya|tuyos|tuyas|puedes|podrás|podrías|puedas|tienes|tengas|"
    "quieres|quieras|necesitas|deseas|has|hayas|eres|estás|estabas|sabes|debes|trabajas|"
    "dejaste|pediste|fuiste|recibes|recibirás|vuelves|prefieres|haz|dime"
)
# Familiar imperatives with a pronoun attached ("escríbelo", "pídeme", "regístrate").
ENCLITIC = (
    r"escríbe\w+|inténta\w+|revísa\w+|pídeme|pídesela|pídelo|regístrate|cuéntame|avísame|"
    r"asegúrate|escríbenos|llámanos|contáctanos|dinos|indícame|márcalo|hazlo|bórralos|"
    r"confírmala|déjanos"
)
# Familiar imperatives that open a sentence ("Escribe una dirección…", "… o pulsa Intro").
IMPERATIVES = (
    "escribe|elige|pulsa|usa|abre|vuelve|busca|revisa|inicia|pide|ignora|indica|mira|añade|"
    "confirma|comprueba|selecciona|contacta|intenta|guarda|pega|borra|espera|cierra"
)
TU = re.compile(rf"(?<![\w-])(?:{TU_WORDS}|{ENCLITIC})(?![\w-])", re.IGNORECASE)
OPENING = re.compile(rf"(?:^|[.!?:;¿¡«“(]\s*|,\s*o\s+)(?:{IMPERATIVES})(?=\s)", re.IGNORECASE)


def tu_forms(text: str) -> list[str]:
    return [m.group(0).strip(" .!?:;¿¡«“(,") for m in (*TU.finditer(text), *OPENING.finditer(text))]


def spanish_catalogue() -> list[tuple[str, str]]:
    [entry] = [e for e in catalogue_files() if e.language == "es"]
    texts = []
    for message in catalogue_read(entry.po):
        if not message.id:
            continue
        msgid = message.id if isinstance(message.id, str) else message.id[0]
        strings = message.string if isinstance(message.string, list | tuple) else [message.string]
        texts += [(msgid, str(s)) for s in strings if s]
    return texts


def widget_strings() -> list[tuple[str, str]]:
    path = settings.BASE_DIR / "static" / "widget" / "i18n" / "es.json"
    return list(json.loads(path.read_text(encoding="utf-8")).items())


@pytest.mark.parametrize(
    "source",
    [spanish_catalogue, widget_strings, lambda: list(phrases()["es"].items())],
    ids=["catalogue", "widget", "offline-demo-model"],
)
def test_spanish_uses_usted_everywhere(source):
    found = [(key, text, tu_forms(text)) for key, text in source() if tu_forms(text)]
    assert not found, "\n".join(f"{forms}: {text!r}  (for {key!r})" for key, text, forms in found)


@pytest.mark.parametrize(
    "text",
    [
        "¿Me los puedes decir?",
        "Responde «sí» para continuar.",  # an opening imperative… (`responde` is also 3rd person)
        "He pasado tu conversación a nuestro equipo.",
        "Escribe una dirección de correo válida.",
        "Escríbelo aquí para confirmar que eres tú.",
        "Si quieres, nuestro equipo puede ayudarte.",
        "Escriba / al principio, o pulsa Ctrl+K.",
    ],
)
def test_the_check_finds_tu_forms(text):
    if text.startswith("Responde"):
        # …which the check leaves alone: "El asistente responde" is right in any register.
        assert tu_forms(text) == []
        return
    assert tu_forms(text), text


@pytest.mark.parametrize(
    "text",
    [
        "¿Me los podría indicar?",
        "He pasado su conversación a nuestro equipo: una persona le responderá aquí.",
        "Escriba una dirección de correo válida.",
        "Pregunta frecuente",
        "Consulta de contexto",
        "El asistente lee las notas y escribe otras nuevas.",
        "Todo el equipo, en espera.",
    ],
)
def test_the_check_leaves_usted_and_third_person_alone(text):
    assert tu_forms(text) == []


# The other languages' registers: German and French formal (Sie, vous), Dutch informal (je) as
# its catalogue has always been; a form of the other register fails with its sentence.
OTHER_REGISTER = {
    "de": re.compile(r"(?<![\w-])(?:du|dich|dir|dein|deine|deinen|deinem|deiner|deines)(?![\w-])"),
    "fr": re.compile(r"(?<![\w-])(?:tu|toi|ton|tes|te|t')(?![\w-])", re.IGNORECASE),
    "nl": re.compile(r"(?<![\w-])(?:u|uw)(?![\w-])", re.IGNORECASE),
}


def catalogue_texts(language: str) -> list[str]:
    [entry] = [e for e in catalogue_files() if e.language == language]
    texts = []
    for message in catalogue_read(entry.po):
        if message.id:
            strings = (
                message.string if isinstance(message.string, list | tuple) else [message.string]
            )
            texts += [str(s) for s in strings if s]
    path = settings.BASE_DIR / "static" / "widget" / "i18n" / f"{language}.json"
    return texts + list(json.loads(path.read_text(encoding="utf-8")).values())


@pytest.mark.parametrize("language", sorted(OTHER_REGISTER))
def test_each_language_keeps_one_register(language):
    pattern = OTHER_REGISTER[language]
    # "24 u" is Dutch for "24 h": an hour, not a pronoun.
    hours = re.compile(r"(?:\d+|%\(\w+\)s) u\b")
    found = [t for t in catalogue_texts(language) if pattern.search(hours.sub("", t))]
    assert not found, "\n".join(found)
