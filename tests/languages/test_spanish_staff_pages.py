"""Every admin and console page, read in Spanish, shows no English: each registered admin's
list, add and change page (for a row of every kind, tests/test_admin_roles.py's `world`), the
custom admin views and the console pages, visited by a superuser and by a tenant admin whose
language is Spanish.

A page's visible text (its text nodes, without scripts, styles and the data the rows hold) is
split into words; an English word is one that appears in an English msgid of the catalogues or
in the name of a model, field or app, and in no Spanish translation. A failure lists the English
phrases found on each page, so a missing `_()` or catalogue entry is easy to find."""

from __future__ import annotations

import contextlib
import json
import re
import zoneinfo
from collections.abc import Iterable, Iterator
from functools import cache
from html.parser import HTMLParser
from typing import Any

import pytest
from django.apps import apps
from django.contrib import admin
from django.urls import reverse
from django.utils import translation

from apps.accounts.models import Role
from apps.core.catalogues import catalogue_files, catalogue_read
from apps.tools import wording
from apps.tools.models import ClientTool
from tests.factories import MembershipFactory
from tests.test_admin_roles import RULES, SUPERUSER, allowed, label, row_of, url
from tests.test_admin_roles import world as world  # the fixture, used by name

pytestmark = pytest.mark.django_db

# Proper names, product and technical terms a Spanish page may show as they are.
ALLOWED = {
    "guidedesk",
    "english",  # the language picker names each language in itself ("English", "Español")
    "stripe",
    "json",
    "url",
    "urls",
    "api",
    "apis",
    "html",
    "http",
    "https",
    "webhook",
    "webhooks",
    "llm",
    "totp",
    "mfa",
    "csv",
    "openai",
    "gpt",
    "mini",
    "celery",
    "crontab",
    "utc",
    "id",
    "ids",
    "slug",
    "token",
    "tokens",
    "email",
    "e-mail",
    "chat",
    "widget",
    "online",
    "offline",
    "playground",
    "hooks",
    "markdown",
    "schema",
    "rubric",  # a principle's key names
    "standard",
    "adaptive",
    "deliberative",
    "pass",
    "staff",  # Django's own Spanish says "es staff"
}
# Third-party admins translate themselves (or not): their own pages are not ours to fix.
THIRD_PARTY = {"django_celery_beat", "mfa", "auth"}
SKIPPED_TAGS = {"script", "style", "textarea", "pre", "code", "template", "noscript"}
DATA_FIELDS = {"CharField", "TextField", "SlugField", "JSONField", "EmailField", "URLField"}
# Code names shown as they are (handler names such as demo.cancel_order, JSON keys, paths), and
# the random public ids of rows (a UUID's hex can spell an English word, e.g. "fee").
IDENTIFIER = re.compile(
    r"[\w-]*[._/][\w./-]*\w|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"
)
WORD = re.compile(r"[A-Za-zÀ-ÿ]+(?:['’-][A-Za-zÀ-ÿ]+)*")


class _Text(HTMLParser):
    """The visible text nodes of a page (and the `title`/`placeholder` a person reads)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.skip = 0
        self.nodes: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in SKIPPED_TAGS:
            self.skip += 1
        if self.skip:
            return
        values = dict(attrs)
        if values.get("hidden") is not None or values.get("type") == "hidden":
            return
        for name in ("placeholder", "title", "aria-label"):
            if values.get(name):
                self.nodes.append(str(values[name]))
        if tag == "input" and values.get("type") in {"submit", "button"} and values.get("value"):
            self.nodes.append(str(values["value"]))

    def handle_endtag(self, tag: str) -> None:
        if tag in SKIPPED_TAGS and self.skip:
            self.skip -= 1

    def handle_data(self, data: str) -> None:
        if not self.skip and data.strip():
            self.nodes.append(" ".join(data.split()))


def text_nodes(html: str) -> list[str]:
    parser = _Text()
    parser.feed(html)
    return parser.nodes


def words(text: str) -> list[str]:
    return [w.lower() for w in WORD.findall(text)]


def _split_identifier(name: str) -> list[str]:
    spaced = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", name).replace("_", " ")
    return words(spaced)


@cache
def english_words() -> frozenset[str]:
    """Words of our English texts (msgids with a Spanish translation of their own, model,
    field and app names) that no Spanish translation uses."""
    english: set[str] = set()
    spanish: set[str] = set()
    for entry in catalogue_files():
        if entry.language != "es":
            continue
        for message in catalogue_read(entry.po):
            if not message.id:
                continue
            ids = message.id if isinstance(message.id, tuple) else (message.id,)
            strings = message.string if isinstance(message.string, tuple) else (message.string,)
            for text in strings:
                spanish.update(words(re.sub(r"%\(\w+\)[sd]|\{\w+\}", " ", str(text or ""))))
            if any(strings) and tuple(strings) != tuple(ids):
                for text in ids:
                    english.update(words(re.sub(r"%\(\w+\)[sd]|\{\w+\}", " ", str(text))))
    for model in apps.get_models():
        if not model.__module__.startswith("apps."):
            continue
        english.update(_split_identifier(model.__name__))
        for field in model._meta.get_fields():
            english.update(_split_identifier(field.name))
    for config in apps.get_app_configs():
        if config.name.startswith("apps."):
            english.update(_split_identifier(config.label))
    return frozenset(w for w in english if len(w) > 2 and w not in spanish and w not in ALLOWED)


def _leaves(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _leaves(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _leaves(item)
    elif value is not None and not isinstance(value, bool):
        yield str(value)


def data_strings() -> list[str]:
    """What the rows hold (names, texts, JSON keys and values, emails) and the time zones'
    names: data, not our words. Longest first, so a whole value is taken out before a part."""
    found: set[str] = set(zoneinfo.available_timezones())
    for model in apps.get_models():
        for obj in model._base_manager.all():
            for language in ("en", "es"):
                with translation.override(language):
                    found.add(str(obj))
            for field in model._meta.concrete_fields:
                if field.get_internal_type() in DATA_FIELDS:
                    value = getattr(obj, field.attname)
                    if isinstance(value, str) and value.strip().startswith(("{", "[")):
                        with contextlib.suppress(ValueError):
                            value = json.loads(value)
                    found.update(s for s in _leaves(value) if s.strip())
    # A tool without a display name is named by its own name, humanised (apps/tools/wording.py):
    # the business's word, not ours.
    for tool in ClientTool.objects.unscoped("the walk reads every tool's name").all():
        found.add(wording.humanised(tool.name))
    return sorted(found, key=len, reverse=True)


def english_in(html: str, data: Iterable[str]) -> list[str]:
    """The text nodes of `html` that hold an English word outside the rows' data."""
    vocabulary = english_words()
    found: list[str] = []
    for node in text_nodes(html):
        if not any(w in vocabulary for w in words(IDENTIFIER.sub(" ", node))):
            continue
        # Only now take out the data (whole values: one never cuts a word in two), then the
        # code names.
        remainder = node
        for value in data:
            if len(value) > 1 and value in remainder:
                remainder = re.sub(rf"(?<!\w){re.escape(value)}(?!\w)", " ", remainder)
        remainder = IDENTIFIER.sub(" ", remainder)
        hits = [w for w in words(remainder) if w in vocabulary]
        if hits and node not in found:
            found.append(node)
    return found


def staff_admin_pages(world: dict[str, Any]) -> list[str]:
    pages: list[str] = [reverse("admin:index")]
    for model in admin.site._registry:
        if model._meta.app_label in THIRD_PARTY:
            continue
        obj = row_of(model, world)
        rules = RULES[label(model)]
        change = url(model, "change", obj.pk)
        if label(model) == "billing.clientusage":  # its "change" page is the usage chart
            change = reverse("admin:billing_client_usage", args=[obj.pk])
        if label(model) == "outcomes.clientoutcomes":  # likewise the outcomes page
            change = reverse("admin:outcomes_client_outcomes", args=[obj.pk])
        pages += [url(model, "changelist"), change]
        if allowed(SUPERUSER, rules["add"]):
            pages.append(url(model, "add"))
        if allowed(SUPERUSER, rules["delete"]):
            pages.append(url(model, "delete", obj.pk))
    pages.append(reverse("admin:app_list", args=["billing"]))
    return pages


def console_pages(world: dict[str, Any]) -> list[str]:
    conversation = world["data"].conversation
    return [
        reverse("console-queue"),
        reverse("console-escalations"),
        reverse("console-profile"),
        reverse("console-outcomes"),
        reverse("console-approvals"),
        reverse("playground"),
        reverse("console-conversation", args=[conversation.public_id]),
    ]


def walk(browser: Any, pages: list[str]) -> dict[str, list[str]]:
    data = data_strings()
    report: dict[str, list[str]] = {}
    for page in pages:
        response = browser.get(page)
        assert response.status_code == 200, (page, response.status_code)
        assert response["Content-Language"] == "es", page
        english = english_in(response.content.decode(), data)
        if english:
            report[page] = english
    return report


def failure(report: dict[str, list[str]]) -> str:
    """Each English phrase once, under the first page that shows it (the admin's side bar
    repeats on every page)."""
    lines = ["English on Spanish staff pages (wrap it in _() and translate it in every catalogue,"]
    lines.append("or, for a proper name, add it to ALLOWED in this file):")
    seen: set[str] = set()
    for page, phrases in report.items():
        new = [phrase for phrase in phrases if phrase not in seen]
        seen.update(new)
        if new:
            lines.append(f"  {page}")
            lines += [f"      {phrase!r}" for phrase in new]
    return "\n".join(lines)


def test_every_admin_page_is_in_spanish_for_a_superuser(client, world):
    user = world["users"][SUPERUSER]
    user.language = "es"
    user.save(update_fields=["language"])
    client.force_login(user)
    report = walk(client, staff_admin_pages(world))
    assert not report, failure(report)


def test_every_console_page_is_in_spanish_for_a_tenant_admin(client, world):
    user = MembershipFactory(client=world["acme"], role=Role.ADMIN).user
    user.language = "es"
    user.save(update_fields=["language"])
    client.force_login(user)
    report = walk(client, console_pages(world))
    assert not report, failure(report)


def test_the_word_list_catches_what_the_team_lead_saw():
    data: list[str] = []
    for english in ("Billing", "Daily usage", "Add knowledge source", "Añadir knowledge source"):
        assert english_in(f"<p>{english}</p>", data), english
    for spanish in ("Facturación", "Uso diario", "Añadir fuente de conocimiento", "GuideDesk"):
        assert not english_in(f"<p>{spanish}</p>", data), spanish
