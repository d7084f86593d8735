"""One language pack per language (apps/core/language_packs/): everything that lists or reads
languages is built from the packs. A fake pack (Swedish) is registered and every consumer —
the detector's set, the sticky-language rules, the confirmation tables, the wants-a-human
phrases, the offline demo's cues and phrases, the plural rules — picks it up; a pack that lacks
a table fails, naming it; and `missing()` lists what a new language still lacks outside its
module (docs/languages.md, "Adding a language")."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from django.conf import settings

from apps.core import language_packs
from apps.core.catalogues import plural_forms
from apps.core.language_packs import DemoCues, LanguagePackError, RequestWords, pack_of
from apps.core.language_packs._pack import REPO, REQUIRED
from apps.core.languages import (
    SHIPPED,
    clear_language,
    detect,
    is_rtl,
    language_name,
    requested_language,
    shipped_codes,
)
from apps.knowledge.retrieval import stop_words
from apps.reasoning import confirmations
from apps.reasoning.guards import confirmation_answer, unavailable_tool_draft_problem
from apps.reasoning.services import wants_human
from apps.reasoning.steps import _demo

ORDER = {"order_id": "TH-12345"}
SWEDISH_TEXT = "Var är mitt paket? Jag har väntat på leveransen i två veckor nu och vill veta mer."


def fake_module(stop_words_file: Path) -> ModuleType:
    """A complete Swedish pack, as a new language's module would be."""
    module = ModuleType("apps.core.language_packs.sv")
    module.__dict__.update(
        NAME="Swedish",
        NATIVE_NAME="Svenska",
        RTL=False,
        ORDER=9,
        PLURAL_FORMS="nplurals=2; plural=(n != 1);",
        STOP_WORDS=str(stop_words_file),
        SMALL_TALK="ja nej tack hej hejdå",
        REQUEST=RequestWords(
            names={**{code: f"zz{code}zz" for code in SHIPPED}, "sv": "svenska"},
            before=r"\b(?:på|tala)\s+",
            verbs=r"\b(?:svara\w*|skriv\w*|tala\w*)\b",
            please=r"\btack\b",
            negation=r"\binte\b",
        ),
        WANTS_HUMAN=r"prata med en (människa|person)",
        DEMO=DemoCues(
            amount=("hur mycket",),
            phrases={**_demo.phrases()["en"], "cannot": "Tyvärr, det kan jag inte göra här."},
        ),
        ASSENT=("javisst",),
        IDIOMS=("inga problem",),
        WEAK=("toppen",),
        POLITE=("tack",),
        ECHO=("nu",),
        OBJECTS=("ordern",),
        CONFIRM_VERBS={"cancel": ("avbryt",)},
        REVERSALS=("ångra",),
        SARCASM=("jaja visst",),
        NO_START=("nej",),
        NEGATIONS=("inte",),
        HEDGES=("kanske",),
        HOLDING=("ett ögonblick",),
        ACTIONS={"cancel": ("avbok",)},
    )
    return module


@pytest.fixture
def swedish(tmp_path: Path) -> Iterator[Any]:
    words = tmp_path / "sv.txt"
    words.write_text("# Swedish stop words\noch\npå\n", encoding="utf-8")
    pack = language_packs.register(pack_of(fake_module(words)))
    try:
        yield pack
    finally:
        language_packs.unregister("sv")
    assert "sv" not in SHIPPED  # and everything built from the packs forgets it


def test_the_shipped_packs_lack_nothing() -> None:
    assert language_packs.codes() == ("en", "es", "fr", "de", "pt", "it", "nl", "he", "ar")
    assert language_packs.missing() == []
    for code in language_packs.codes():  # the confirmation corpus the rule is measured on
        assert (
            Path(__file__).parent.parent / "reasoning/confirm_phrases" / f"{code}.json"
        ).is_file()


def test_the_lists_of_languages_come_from_the_packs() -> None:
    packs = language_packs.packs()
    assert [(p.code, p.native_name) for p in packs] == settings.LANGUAGES
    assert dict(SHIPPED) == {p.code: p.name for p in packs}
    assert shipped_codes() == frozenset(SHIPPED)
    assert plural_forms() == {p.code: p.plural_forms for p in packs}
    assert {p.code for p in packs if p.rtl} == {"he", "ar"}
    # the Makefile's catalogue list (`make messages`)
    listed = subprocess.run(
        [sys.executable, "-m", "apps.core.language_packs", "--catalogues"],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout.split()
    assert listed == [p.code for p in packs if p.code != "en"]
    assert (
        "$(shell $(PY) -m apps.core.language_packs --catalogues)" in (REPO / "Makefile").read_text()
    )


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_a_pack_that_lacks_a_table_fails(tmp_path: Path, name: str) -> None:
    module = fake_module(tmp_path / "sv.txt")
    delattr(module, name)
    with pytest.raises(LanguagePackError, match=name):
        pack_of(module)


def test_an_empty_confirmation_table_fails(tmp_path: Path) -> None:
    module = fake_module(tmp_path / "sv.txt")
    module.HEDGES = ()
    with pytest.raises(LanguagePackError, match="HEDGES"):
        pack_of(module)


def test_a_new_pack_is_read_everywhere(swedish: Any) -> None:
    # its name, direction and place in every list
    assert SHIPPED["sv"] == language_name("sv-SE") == "Swedish"
    assert list(SHIPPED)[-1] == "sv" and not is_rtl("sv")
    assert "sv" in shipped_codes()
    assert ("sv", "Svenska") in language_packs.settings_languages()
    assert plural_forms()["sv"] == "nplurals=2; plural=(n != 1);"
    assert stop_words("sv") == {"och", "på"}
    # the detector's set and the sticky-language rules
    assert detect(SWEDISH_TEXT) == "sv"
    assert clear_language(SWEDISH_TEXT) == "sv"
    assert requested_language("Kan du svara på svenska?") == "sv"
    # its confirmation tables
    assert "sv" in confirmations.language_modules()
    assert confirmation_answer("Javisst, avbryt ordern", ORDER, "cancel_order") == "yes"
    assert confirmation_answer("nej", ORDER, "cancel_order") == "no"
    assert confirmation_answer("javisst, kanske", ORDER, "cancel_order") == "other"
    problem = unavailable_tool_draft_problem(
        "Din order är nu avbokad, tack för visat tålamod.", tool_name="cancel_order", tools=[]
    )
    assert problem.startswith("the draft names an action")
    # asking for a person, and the offline demo
    assert wants_human("Jag vill prata med en människa")
    assert _demo._asks_amount("hur mycket blir frakten?")
    assert _demo.say({"language": "sv"}, "cannot") == "Tyvärr, det kan jag inte göra här."


def test_missing_names_what_a_new_language_still_lacks(swedish: Any) -> None:
    problems = language_packs.missing()
    assert "en: REQUEST names no sv" in problems  # the other packs must name it
    assert "sv: no locale/sv/LC_MESSAGES/django.po" in problems
    assert "sv: no static/widget/i18n/sv.json" in problems
    assert not any(p.startswith("sv: REQUEST") for p in problems)


def test_forgetting_a_pack_forgets_it_everywhere(tmp_path: Path) -> None:
    words = tmp_path / "sv.txt"
    words.write_text("och\n", encoding="utf-8")
    language_packs.register(pack_of(fake_module(words)))
    language_packs.unregister("sv")
    assert "sv" not in shipped_codes() and "sv" not in confirmations.language_modules()
    assert not wants_human("Jag vill prata med en människa")
    assert not _demo._asks_amount("hur mycket blir frakten?")
    assert requested_language("Kan du svara på svenska?") == ""
    assert confirmation_answer("javisst", ORDER, "cancel_order") == "other"
