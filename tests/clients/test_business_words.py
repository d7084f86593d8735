"""Words for the business: what a support lead reads in the admin — the plan
page, the rubrics, field labels and help texts — speaks of their support, not of our seeds,
presets and specs. Field names and stored values (the import format, the API) stay as they are."""

from __future__ import annotations

import html
import re

import pytest
from django.apps import apps
from django.urls import reverse

from apps.clients.admin import HOOK_LABELS
from apps.clients.models import Rubric
from apps.reasoning.hooks import hook_names
from tests.factories import PlanFactory

pytestmark = pytest.mark.django_db

# Developer and seed vocabulary a support lead should never meet.
DEVELOPER_WORDS = re.compile(
    r"\bseeds?\b|\bseed's\b|dharma|\bpresets?\b|final[ _]spec|\bspec\b|handoff_when_unsure"
    r"|-notes=false|\.py\b",
    re.IGNORECASE,
)
# The notes admin and model are the "notes" helper's; they are checked there.
OUT_OF_SCOPE_APPS = {"notes"}


def visible_text(page: str) -> str:
    """What a person reads: no tags, attributes, scripts or styles."""
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.DOTALL | re.IGNORECASE)
    page = re.sub(r"<!--.*?-->", " ", page, flags=re.DOTALL)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def test_the_plan_page_speaks_to_a_support_lead(admin_client):
    plan = PlanFactory(ai_mode="deliberative", post_draft_hooks=["handoff_when_unsure"])
    page = admin_client.get(reverse("admin:clients_plan_change", args=[plan.pk]))
    assert page.status_code == 200
    text = visible_text(page.content.decode())
    assert DEVELOPER_WORDS.findall(text) == []
    assert "about $0.009 per message" in text
    assert "Extra checks before a reply is sent" in text
    assert "Hand the conversation to a person when the assistant is unsure" in text
    assert "Reflective" in text  # the shipped rubric, in the rubric picker
    # the stored value is still the hook's name (the import format and the API use it)
    assert 'value="handoff_when_unsure"' in page.content.decode()


def test_the_rubric_page_speaks_to_a_support_lead(admin_client):
    rubric = Rubric.objects.get(slug="contemplative")
    page = admin_client.get(reverse("admin:clients_rubric_change", args=[rubric.pk]))
    assert page.status_code == 200
    assert DEVELOPER_WORDS.findall(visible_text(page.content.decode())) == []


def test_labels_and_help_texts_have_no_developer_words():
    found = []
    for model in apps.get_models():
        if not model.__module__.startswith("apps.") or model._meta.app_label in OUT_OF_SCOPE_APPS:
            continue
        for field in model._meta.get_fields():
            words = " ".join(
                str(getattr(field, attribute, "") or "")
                for attribute in ("verbose_name", "help_text")
            )
            if DEVELOPER_WORDS.search(words):
                found.append(f"{model._meta.label}.{field.name}: {words}")
    assert found == []


def test_every_shipped_hook_has_words_for_the_plan_page():
    shipped = [name for name in hook_names() if not name.startswith("test_")]
    assert shipped, "no post-draft hook is registered"
    assert sorted(HOOK_LABELS) == shipped
    for label in HOOK_LABELS.values():
        assert "_" not in str(label) and DEVELOPER_WORDS.search(str(label)) is None
