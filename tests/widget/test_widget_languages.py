"""The widget's words in the customer's language: the per-language catalogues
(static/widget/i18n/<lang>.json) are complete and consistent, and the frame and the address
confirmation page choose their language in the documented order (docs/widget.md "Languages")."""

from __future__ import annotations

import json
import re
from urllib.parse import urlsplit

import pytest
from django.test import Client as DjangoClient

from apps.conversations.models import Conversation
from apps.core.languages import SHIPPED, rtl_codes
from apps.widget import catalogues
from tests.conftest import ROOT
from tests.widget.contact import confirmation_links, contact, open_link

I18N = ROOT / "static" / "widget" / "i18n"
PLACEHOLDER = re.compile(r"%\((\w+)\)s")


def load(code: str) -> dict[str, str]:
    return json.loads((I18N / f"{code}.json").read_text(encoding="utf-8"))


def test_a_catalogue_ships_for_every_customer_language():
    assert sorted(p.stem for p in I18N.glob("*.json")) == sorted(SHIPPED)
    assert sorted(catalogues.shipped()) == sorted(SHIPPED)
    # The loader's own list (it asks only for catalogues that exist) matches the files.
    loader = (ROOT / "static" / "widget.js").read_text(encoding="utf-8")
    listed = re.search(r"var SHIPPED = \[([^\]]*)\]", loader)
    assert listed is not None
    assert sorted(re.findall(r'"(\w+)"', listed.group(1))) == sorted(SHIPPED)


@pytest.mark.parametrize("code", sorted(SHIPPED))
def test_every_catalogue_has_the_keys_and_placeholders_of_english(code):
    english, strings = load("en"), load(code)
    assert set(strings) == set(english), set(strings) ^ set(english)
    for key, text in strings.items():
        assert isinstance(text, str) and text.strip(), (code, key)
        assert set(PLACEHOLDER.findall(text)) == set(PLACEHOLDER.findall(english[key])), (
            code,
            key,
        )
        # Only %(name)s placeholders: a stray "%s" or "{name}" would show up to the customer.
        assert "%s" not in text and not re.search(r"\{\w+\}", text), (code, key)


@pytest.mark.parametrize("code", sorted(set(SHIPPED) - {"en"}))
def test_translations_are_translations(code):
    english, strings = load("en"), load(code)
    kept = [k for k in english if strings[k] == english[k]]
    # The e-mail placeholder may stay as it is; hardly anything else.
    assert len(kept) <= 3, (code, kept)
    assert strings["yes"] != english["yes"] and strings["send"] != english["send"]


def test_fill_and_accept_language():
    assert catalogues.fill("Chat with %(name)s", name="Trailhead") == "Chat with Trailhead"
    assert catalogues.fill("%(a)s and %(b)s", a=1) == "1 and %(b)s"
    assert catalogues.accept_language("en;q=0.5, he-IL, fr;q=0.8, *;q=0.1, de;q=0") == [
        "he-IL",
        "fr",
        "en",
    ]
    assert catalogues.accept_language("") == []
    assert catalogues.choose(["ru", "", "pt-BR", "en"]) == "pt"
    assert catalogues.choose(["ru", None]) == "en"
    assert {c for c in SHIPPED if catalogues.direction(c) == "rtl"} == set(SHIPPED) & rtl_codes()


def frame(shop, query: str = "", **headers: str) -> tuple[int, str]:
    response = DjangoClient().get(f"/widget/frame/?key={shop.widget_key}{query}", headers=headers)
    return response.status_code, response.content.decode()


def test_the_frame_follows_the_host_page_language_right_to_left(shop):
    status, html = frame(shop, "&page_lang=he", **{"Accept-Language": "en"})
    assert status == 200
    assert '<html lang="he" dir="rtl">' in html
    he = load("he")
    assert f">{he['send']}</button>" in html
    assert f'placeholder="{he["input_placeholder"]}"' in html
    assert load("en")["send"] + "</button>" not in html
    # The script gets the catalogue and what to choose from, as data (no inline script).
    data = re.search(r'<script id="gd-i18n" type="application/json">(.*?)</script>', html, re.S)
    assert data is not None
    i18n = json.loads(data.group(1))
    assert i18n["language"] == "he" and i18n["page"] == "he" and i18n["client"] == shop.language
    assert i18n["strings"]["yes"] == "כן"
    assert sorted(i18n["urls"]) == sorted(SHIPPED)
    assert all(url.endswith(f"widget/i18n/{code}.json") for code, url in i18n["urls"].items())


@pytest.mark.parametrize(
    ("query", "accept", "client_language", "expected"),
    [
        ("&lang=es&page_lang=he", "fr", "en", "es"),  # the shop's data-language first
        ("&lang=xx&page_lang=fr-CA", "de", "en", "fr"),  # an unshipped one is skipped
        ("&page_lang=ru", "ru, nl;q=0.9", "en", "nl"),  # then the browser's languages
        ("", "ru", "it", "it"),  # then the client's default
        ("", "", "ru", "en"),  # English when nothing ships
    ],
)
def test_the_frame_language_order(shop, query, accept, client_language, expected):
    shop.language = client_language
    shop.save(update_fields=["language"])
    _, html = frame(shop, query, **{"Accept-Language": accept})
    direction = "rtl" if expected in rtl_codes() else "ltr"
    assert f'<html lang="{expected}" dir="{direction}">' in html
    assert f">{load(expected)['send']}</button>" in html


def test_the_unavailable_page_speaks_the_browser_language(db):
    response = DjangoClient().get(
        "/widget/frame/?key=wk_unknown", headers={"Accept-Language": "ar"}
    )
    assert response.status_code == 404
    html = response.content.decode()
    assert '<html lang="ar" dir="rtl">' in html and load("ar")["unavailable"] in html


def test_the_confirmation_page_speaks_the_browser_language_for_a_bad_link(db):
    response = DjangoClient().get(
        "/widget/confirm-email/not-a-token/", headers={"Accept-Language": "he-IL,he;q=0.9"}
    )
    assert response.status_code == 404
    html = response.content.decode()
    assert '<html lang="he" dir="rtl">' in html
    assert load("he")["confirm_invalid_title"] in html


def test_the_confirmation_page_speaks_the_conversation_language(
    widget, django_capture_on_commit_callbacks
):
    cid, token = widget.conversation()
    with django_capture_on_commit_callbacks(execute=True):
        contact(widget, cid, token, {"email": "ana@example.com"})
    (link,) = confirmation_links("ana@example.com")
    Conversation.objects.unscoped("test sets the detected language").filter(public_id=cid).update(
        language="es"
    )
    # The page the link opens asks, in Spanish, before anything is confirmed …
    asked = DjangoClient().get(urlsplit(link).path, headers={"Accept-Language": "de"})
    assert asked.status_code == 200
    html = asked.content.decode()
    es = load("es")
    assert '<html lang="es" dir="ltr">' in html and es["confirm_ask_title"] in html
    question = catalogues.fill(
        es["confirm_ask_text"], business=widget.client.name, email="ana@example.com"
    )
    assert question in html and es["confirm_ask_button"] in html
    # … and its button's answer is Spanish too.
    with django_capture_on_commit_callbacks(execute=True):
        page = open_link(link, **{"Accept-Language": "de"})
    assert page.status_code == 200
    html = page.content.decode()
    assert '<html lang="es" dir="ltr">' in html and es["confirm_ok_title"] in html
    thanks = catalogues.fill(
        es["confirm_ok_text"], business=widget.client.name, email="ana@example.com"
    )
    assert thanks in html


def test_every_key_the_widget_uses_is_in_the_catalogue_and_every_key_is_used():
    """A typo in a key would show the customer an empty label; a key nothing uses is a
    translation nobody sees."""
    english = set(load("en"))
    sources = {
        "frame.js": (ROOT / "static" / "widget" / "frame.js").read_text(encoding="utf-8"),
        "widget.js": (ROOT / "static" / "widget.js").read_text(encoding="utf-8"),
        "frame.html": (ROOT / "templates" / "widget" / "frame.html").read_text(encoding="utf-8"),
        "contact_confirm.html": (ROOT / "templates" / "widget" / "contact_confirm.html").read_text(
            encoding="utf-8"
        ),
        "views.py": (ROOT / "apps" / "widget" / "views.py").read_text(encoding="utf-8"),
    }
    patterns = [
        r'\bt\("(\w+)"',  # frame.js: t("key", …)
        r'labelled\("\w+", "[^"]*", "(\w+)"\)',  # frame.js: a label that re-renders
        r'data-i18n(?:-placeholder|-aria-label)?="(\w+)"',  # frame.html, frame.js
        r"\{\{ t\.(\w+) \}\}",  # templates
        r'strings\["(\w+)"\]',  # views.py
        r"catalogue\.(\w+)",  # widget.js: the launcher's words
        r'key: "(\w+)"',  # quick replies
    ]
    used: set[str] = set()
    for text in sources.values():
        for pattern in patterns:
            used |= set(re.findall(pattern, text))
    # Keys chosen at run time: "yes"/"no" (confirmation answers), the typing subtitle pair.
    frame_js = sources["frame.js"]
    used |= {k for k in ("yes", "no") if f'"{k}"' in frame_js}
    used |= set(re.findall(r'"((?:subtitle|contact|typing)_\w+)"', frame_js))
    assert used - english == set(), used - english
    assert english - used == set(), english - used
