"""The knowledge admin: an article's page renders its Markdown (HTML escaped), saves through
the services (validated, indexed), FAQs have a page of their own with question and answer, a
source is checked by its kind, and client staff see only their own client's content."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from apps.accounts.models import Role
from apps.knowledge.models import Article, ArticleChunk, ArticleKind, KnowledgeSource
from apps.knowledge.services.articles import article_create
from tests.factories import ClientFactory, MembershipFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def shop():
    return ClientFactory(name="Acme Shop")


def staff(client: Any, shop: Any, role: str) -> Any:
    user = MembershipFactory(client=shop, role=role).user
    user.is_staff = True
    user.save()
    # every Django permission an operator could hand out: only the role decides
    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label__in=["knowledge", "clients"])
    )
    client.force_login(user)
    return user


def test_the_preview_renders_markdown_and_escapes_html(admin_client, shop):
    article = article_create(
        client=shop,
        data={"title": "Care", "body": "## Washing\n**Cold** water.\n\n<script>alert(1)</script>"},
    )
    page = admin_client.get(reverse("admin:knowledge_article_change", args=[article.pk]))
    body = page.content.decode()
    assert page.status_code == 200
    assert "<h2>Washing</h2>" in body and "<strong>Cold</strong>" in body
    assert "<script>alert(1)</script>" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body


def test_an_agent_writes_an_article_that_is_indexed(client, shop):
    staff(client, shop, Role.AGENT)
    url = reverse("admin:knowledge_article_add")
    form = {
        "client": shop.pk,
        "kind": "article",
        "title": "Sizing",
        "body": "Boots run small.\n\n## Kids\nHalf a size up.",
        "language": "en",
        "tags": "sizing, boots, Sizing",
        "enabled": "on",
        "status": "published",
    }
    response = client.post(url, {**form, "title": " "})
    assert response.status_code == 200
    assert "title is required" in response.content.decode().lower()
    response = client.post(url, form)
    assert response.status_code == 302, response.context["adminform"].form.errors
    article = Article.objects.for_client(shop).get()
    assert article.tags == ["sizing", "boots"]
    assert ArticleChunk.objects.for_client(shop).filter(article=article).count() == 2


def test_publishing_in_the_admin_records_the_approver(client, shop):
    user = staff(client, shop, Role.AGENT)
    draft = article_create(
        client=shop, data={"title": "Gift cards", "body": "Soon.", "status": "draft"}
    )
    client.post(
        reverse("admin:knowledge_article_changelist"),
        {"action": "publish", "_selected_action": [draft.pk]},
    )
    draft.refresh_from_db()
    assert draft.status == "published" and draft.approved_by == user


def test_faqs_have_their_own_page_with_question_and_answer(client, shop):
    staff(client, shop, Role.AGENT)
    article_create(client=shop, data={"title": "Not an FAQ", "body": "x"})
    page = client.get(reverse("admin:knowledge_faq_add")).content.decode()
    assert "Question" in page and "Answer" in page
    response = client.post(
        reverse("admin:knowledge_faq_add"),
        {
            "client": shop.pk,
            "title": "Do you ship abroad?",
            "body": "Yes.",
            "tags": "",
            "language": "",
            "enabled": "on",
            "status": "published",
        },
    )
    assert response.status_code == 302, response.context["adminform"].form.errors
    faq = Article.objects.for_client(shop).get(title="Do you ship abroad?")
    assert faq.kind == ArticleKind.FAQ
    listing = client.get(reverse("admin:knowledge_faq_changelist")).content.decode()
    assert "Do you ship abroad?" in listing and "Not an FAQ" not in listing


def test_a_source_is_checked_by_its_kind_and_needs_the_admin_role(client, shop):
    staff(client, shop, Role.AGENT)
    assert client.get(reverse("admin:knowledge_knowledgesource_add")).status_code == 403
    staff(client, shop, Role.ADMIN)
    url = reverse("admin:knowledge_knowledgesource_add")
    form = {"client": shop.pk, "name": "Help", "kind": "sitemap", "url": "", "resync_hours": 24}
    response = client.post(url, form)
    assert response.status_code == 200
    assert "web address is required" in response.content.decode()
    response = client.post(url, {**form, "url": "https://shop.example/sitemap.xml"})
    assert response.status_code == 302
    listing = client.get(reverse("admin:knowledge_knowledgesource_changelist")).content.decode()
    assert "Not synced yet" in listing
    assert KnowledgeSource.objects.for_client(shop).get().url.endswith("sitemap.xml")


def test_staff_see_only_their_clients_content(client, shop):
    other = ClientFactory(name="Globex Shop")
    theirs = article_create(client=other, data={"title": "Globex secret", "body": "x"})
    staff(client, shop, Role.VIEWER)
    listing = client.get(reverse("admin:knowledge_article_changelist")).content.decode()
    assert "Globex secret" not in listing
    response = client.get(reverse("admin:knowledge_article_change", args=[theirs.pk]))
    assert response.status_code in {302, 403, 404}


def test_a_viewer_sees_the_business_basics_read_only(client, shop):
    shop.business_info = {"policies": {"returns": "Thirty days, unworn."}}
    shop.save()
    staff(client, shop, Role.VIEWER)
    body = client.get(reverse("admin:clients_client_change", args=[shop.pk])).content.decode()
    assert "Thirty days, unworn." in body
    assert not re.search(r'name="policy_returns"', body)
