"""The translation catalogues: every .po parses with its language's plural rule, every
customer-facing msgid is translated in every shipped language, placeholders survive
translation, the committed .mo files match their .po files, and the staff side is complete in
Spanish. A failure lists the msgids to translate (docs/languages.md, "Catalogues")."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from babel.messages.catalog import Catalog, Message
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import translation

from apps.core.catalogues import (
    CUSTOMER_FACING,
    catalogue_compile,
    catalogue_files,
    catalogue_read,
    compiled_bytes,
    is_customer_facing,
    plural_forms,
)
from apps.core.languages import SHIPPED
from apps.reasoning.guards import confirmation_text
from apps.tools.models import ClientTool

TRANSLATED = sorted(code for code in SHIPPED if code != "en")
CATALOGUES = {entry.language: entry for entry in catalogue_files()}
_PLACEHOLDER = re.compile(r"%\(\w+\)[sdifr]|%[sdifr]|\{\w*\}")


def catalogue(language: str) -> Catalog:
    return catalogue_read(CATALOGUES[language].po)


def placeholders(text: str) -> Counter[str]:
    return Counter(_PLACEHOLDER.findall(text.replace("%%", "")))


def strings(message: Message) -> list[str]:
    value = message.string
    if isinstance(value, (tuple, list)):
        return [str(v) for v in value]
    return [str(value or "")]


def ids(message: Message) -> list[str]:
    value = message.id
    if isinstance(value, (tuple, list)):
        return [str(v) for v in value]
    return [str(value)]


def customer_messages(cat: Catalog) -> list[Message]:
    return [
        m
        for m in cat
        if m.id and any(is_customer_facing(f"{path}:{line}") for path, line in m.locations)
    ]


def untranslated(message: Message) -> bool:
    return message.fuzzy or not all(s.strip() for s in strings(message))


def report(missing: dict[str, list[str]]) -> str:
    lines = [f"{len(v)} untranslated in {lang}:" for lang, v in missing.items() if v]
    for lang, msgids in missing.items():
        lines += [f"  [{lang}] {msgid!r}" for msgid in msgids]
    return "\n".join(
        [
            *lines,
            "Translate them in locale/<lang>/LC_MESSAGES/django.po, then run "
            "`.venv/bin/python manage.py compile_catalogues`.",
        ]
    )


def test_every_shipped_language_but_english_has_a_catalogue():
    assert sorted(CATALOGUES) == TRANSLATED
    assert settings.LOCALE_PATHS == [settings.BASE_DIR / "locale"]
    assert [code for code, _name in settings.LANGUAGES] == list(SHIPPED)


@pytest.mark.parametrize("language", TRANSLATED)
def test_every_catalogue_parses_with_its_language_plural_rule(language):
    cat = catalogue(language)  # abort_invalid: a broken entry raises
    headers = dict(cat.mime_headers)
    assert headers["Language"] == language
    assert headers["Plural-Forms"] == plural_forms()[language]
    assert cat.num_plurals == int(plural_forms()[language].split(";")[0].split("=")[1])
    for message in cat:
        if message.id and isinstance(message.id, tuple) and any(strings(message)):
            assert len(strings(message)) == cat.num_plurals, (language, message.id)


def test_the_customer_facing_set_holds_the_fixed_customer_texts():
    msgids = {m.id for m in customer_messages(catalogue("es"))}
    # the confirmation question, a clarifying question, the fallback and hand-off replies and
    # the customers' e-mails: if the definition or the marking breaks, this notices
    for expected in (
        "Just to confirm: shall I go ahead with “%(action)s” (%(details)s)? This can't be "
        'undone. Reply "yes" to go ahead or "no" to stop.',
        "Could you tell me a little more about what you need?",
        "Sorry — I ran into a problem answering that. I've passed your conversation to our team "
        "so a person can help.",
        "I've passed your conversation to our support team — a person will reply here as soon "
        "as possible.",
        "%(business)s: a new reply to your chat",
    ):
        assert expected in msgids
    assert len(msgids) >= 40
    assert all(entry.rstrip("/") for entry in CUSTOMER_FACING)


def test_every_customer_facing_msgid_is_translated_in_every_shipped_language():
    missing = {
        language: [ids(m)[0] for m in customer_messages(catalogue(language)) if untranslated(m)]
        for language in TRANSLATED
    }
    assert not any(missing.values()), report(missing)


def test_the_staff_side_is_complete_in_spanish():
    missing = {"es": [ids(m)[0] for m in catalogue("es") if m.id and untranslated(m)]}
    assert not missing["es"], report(missing)


@pytest.mark.parametrize("language", TRANSLATED)
def test_translations_keep_every_placeholder(language):
    wrong = []
    for message in catalogue(language):
        if not message.id:
            continue
        wanted = placeholders(ids(message)[-1])
        for text in strings(message):
            if (
                text
                and placeholders(text) != wanted
                and placeholders(text) != placeholders(ids(message)[0])
            ):
                wrong.append((ids(message)[0], text))
    assert not wrong, wrong


@pytest.mark.parametrize("language", TRANSLATED)
def test_every_mo_file_is_up_to_date_with_its_po(language):
    entry = CATALOGUES[language]
    assert entry.mo.exists(), f"{entry.mo} missing: run manage.py compile_catalogues"
    assert entry.mo.read_bytes() == compiled_bytes(catalogue(language)), (
        f"{entry.mo} is older than its .po: run manage.py compile_catalogues"
    )
    assert catalogue_compile(entry, check=True) is False


def test_compile_catalogues_writes_a_stale_mo_and_check_reports_it(tmp_path, settings):
    po_dir = tmp_path / "es" / "LC_MESSAGES"
    po_dir.mkdir(parents=True)
    (po_dir / "django.po").write_bytes(CATALOGUES["es"].po.read_bytes())
    settings.LOCALE_PATHS = [tmp_path]
    with pytest.raises(CommandError, match="out of date"):
        call_command("compile_catalogues", "--check")
    assert not (po_dir / "django.mo").exists()
    call_command("compile_catalogues")
    assert (po_dir / "django.mo").read_bytes() == CATALOGUES["es"].mo.read_bytes()
    call_command("compile_catalogues", "--check")


def _confirmation() -> str:
    tool = ClientTool(name="cancel_order")
    return confirmation_text(tool, {"order_id": "TH-12345"})


def test_the_confirmation_question_is_rendered_in_the_active_language():
    with translation.override("he"):
        hebrew = _confirmation()
    with translation.override("es"):
        spanish = _confirmation()
    with translation.override("en"):
        english = _confirmation()
    # No display name or labels: the name humanised, inside each language's sentence.
    assert english.startswith(
        "Just to confirm: shall I go ahead with “Cancel order” (order id: TH-12345)?"
    )
    assert re.search(r"[\u0590-\u05FF]{3}", hebrew) and "Just to confirm" not in hebrew
    assert "כן" in hebrew and "TH-12345" in hebrew
    assert spanish.startswith("Solo para confirmar") and "«sí»" in spanish
    assert "TH-12345" in spanish


def test_every_catalogue_is_read_from_the_repository():
    assert all(Path(entry.po).is_relative_to(settings.BASE_DIR) for entry in CATALOGUES.values())
