"""The knowledge staff API: articles, FAQs and sources — list, read, create, replace, change,
delete; public ids in URLs; viewers read only, agents write content, admins manage sources;
client B's credentials (API key or session) never reach client A's rows (404)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from apps.accounts.models import Role
from apps.knowledge.models import Article, ArticleChunk, ArticleKind, KnowledgeSource
from apps.knowledge.services.articles import article_create, source_create
from tests.api.conftest import assert_error
from tests.conftest import key_for, session_for

pytestmark = pytest.mark.django_db

ARTICLES = "/api/v1/knowledge/articles/"
FAQS = "/api/v1/knowledge/faqs/"
SOURCES = "/api/v1/knowledge/sources/"
AUTH_KINDS = ["api_key", "session"]


def make(client: Any, kind: str = "api_key", role: str = Role.OWNER) -> Any:
    return key_for(client, role) if kind == "api_key" else session_for(client, role)


def article(client: Any, title: str = "Returning an item", **data: Any) -> Article:
    data.setdefault("body", "Within 30 days.\n\n## How\nStart at /returns.")
    return article_create(client=client, data={"title": title, **data})


def faq(client: Any, question: str = "Do you ship abroad?", answer: str = "Yes.") -> Article:
    return article_create(client=client, data={"kind": "faq", "title": question, "body": answer})


def source(client: Any, name: str = "Help centre") -> KnowledgeSource:
    return source_create(
        client=client,
        data={"name": name, "kind": "sitemap", "url": "https://shop.example/sitemap.xml"},
    )


def test_the_urls_are_the_documented_ones():
    some = uuid.uuid4()
    assert reverse("api-kb-article-list") == ARTICLES
    assert reverse("api-kb-article-detail", args=[some]) == f"{ARTICLES}{some}/"
    assert reverse("api-kb-faq-list") == FAQS
    assert reverse("api-kb-source-list") == SOURCES


# ------------------------------------------------------------------------------------ articles


@pytest.mark.parametrize("kind", AUTH_KINDS)
def test_article_crud_round_trip(kind, client_a):
    api = make(client_a, kind, Role.AGENT)
    created = api.post(
        ARTICLES,
        {"title": "Sizing boots", "body": "Boots run small.", "tags": ["sizing"]},
        format="json",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["kind"] == "article" and body["status"] == "published" and body["enabled"]
    assert body["tags"] == ["sizing"] and body["source"] is None
    public_id = body["id"]
    stored = Article.objects.for_client(client_a).get(public_id=public_id)
    assert ArticleChunk.objects.for_client(client_a).filter(article=stored).count() == 1

    listed = api.get(ARTICLES).json()
    assert listed["count"] == 1 and listed["results"][0]["id"] == public_id
    assert api.get(f"{ARTICLES}{public_id}/").json()["title"] == "Sizing boots"

    patched = api.patch(f"{ARTICLES}{public_id}/", {"enabled": False}, format="json")
    assert patched.status_code == 200 and patched.json()["enabled"] is False
    assert not Article.objects.for_client(client_a).usable().exists()

    put = api.put(
        f"{ARTICLES}{public_id}/",
        {"title": "Sizing", "body": "Half a size up.", "enabled": True},
        format="json",
    )
    assert put.status_code == 200 and put.json()["body"] == "Half a size up."
    chunk = ArticleChunk.objects.for_client(client_a).get(article=stored)
    assert chunk.text == "Half a size up."

    assert api.delete(f"{ARTICLES}{public_id}/").status_code == 204
    assert not Article.objects.for_client(client_a).exists()
    assert_error(api.get(f"{ARTICLES}{public_id}/"), 404, "not_found")


def test_article_list_filters(client_a):
    api = make(client_a, role=Role.VIEWER)
    help_centre = source(client_a)
    article(client_a, "Boot care", tags=["care"], language="de")
    article(client_a, "Gift cards", status="draft", source=help_centre)
    faq(client_a)

    def titles(query: str) -> list[str]:
        response = api.get(ARTICLES + query)
        assert response.status_code == 200, response.content
        return [row["title"] for row in response.json()["results"]]

    assert titles("") == ["Boot care", "Do you ship abroad?", "Gift cards"]
    assert titles("?kind=faq") == ["Do you ship abroad?"]
    assert titles("?status=draft") == ["Gift cards"]
    assert titles("?tag=care") == ["Boot care"]
    assert titles("?language=de") == ["Boot care"]
    assert titles("?q=gift") == ["Gift cards"]
    assert titles(f"?source={help_centre.public_id}") == ["Gift cards"]
    assert_error(api.get(ARTICLES + "?kind=poem"), 400, "invalid")
    assert_error(api.get(ARTICLES + f"?source={uuid.uuid4()}"), 400, "invalid")


def test_publishing_a_draft_records_the_approver(client_a):
    api = session_for(client_a, Role.AGENT)
    draft = article(client_a, "Gift cards", status="draft")
    response = api.patch(f"{ARTICLES}{draft.public_id}/", {"status": "published"}, format="json")
    assert response.status_code == 200
    assert response.json()["approved_by"] == api.staff_user.email
    assert response.json()["approved_at"]


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"body": "no title"}, "title"),
        ({"title": "  ", "body": "x"}, "title"),
        ({"title": "t", "body": "b", "content_hash": "x"}, "content_hash"),
        ({"title": "t", "body": "b", "kind": "poem"}, "kind"),
        ({"title": "t", "body": "b", "source": str(uuid.uuid4())}, "source"),
    ],
)
def test_invalid_articles_answer_400_naming_the_field(client_a, payload, field):
    error = assert_error(
        make(client_a, role=Role.AGENT).post(ARTICLES, payload, format="json"), 400, "invalid"
    )
    assert field in error["fields"]
    assert not Article.objects.for_client(client_a).exists()


def test_an_article_cannot_point_at_another_clients_source(client_a, client_b):
    theirs = source(client_b)
    response = make(client_a, role=Role.AGENT).post(
        ARTICLES, {"title": "t", "body": "b", "source": str(theirs.public_id)}, format="json"
    )
    assert "source" in assert_error(response, 400)["fields"]


@pytest.mark.parametrize("kind", AUTH_KINDS)
def test_a_viewer_reads_but_cannot_write_articles(kind, client_a):
    api = make(client_a, kind, Role.VIEWER)
    mine = article(client_a)
    assert api.get(ARTICLES).status_code == 200
    assert api.get(f"{ARTICLES}{mine.public_id}/").status_code == 200
    assert_error(api.post(ARTICLES, {"title": "t", "body": "b"}, format="json"), 403)
    assert_error(api.patch(f"{ARTICLES}{mine.public_id}/", {"enabled": False}, format="json"), 403)
    assert_error(api.put(f"{ARTICLES}{mine.public_id}/", {"title": "t", "body": "b"}), 403)
    assert_error(api.delete(f"{ARTICLES}{mine.public_id}/"), 403)
    mine.refresh_from_db()
    assert mine.enabled and mine.title == "Returning an item"


@pytest.mark.parametrize("kind", AUTH_KINDS)
def test_client_b_cannot_see_or_change_client_a_articles(kind, client_a, client_b):
    mine = article(client_a)
    theirs = make(client_b, kind, Role.OWNER)
    assert theirs.get(ARTICLES).json()["count"] == 0
    url = f"{ARTICLES}{mine.public_id}/"
    assert_error(theirs.get(url), 404, "not_found")
    assert_error(theirs.patch(url, {"enabled": False}, format="json"), 404)
    assert_error(theirs.put(url, {"title": "x", "body": "y"}, format="json"), 404)
    assert_error(theirs.delete(url), 404)
    mine.refresh_from_db()
    assert mine.enabled and mine.title == "Returning an item"


def test_ids_are_public_ids_never_pks(client_a):
    mine = article(client_a)
    api = make(client_a, role=Role.VIEWER)
    assert_error(api.get(f"{ARTICLES}{mine.pk}/"), 404)
    assert_error(api.get(f"{ARTICLES}not-a-uuid/"), 404)


def test_unauthenticated_is_401(api):
    assert_error(api.get(ARTICLES), 401)
    assert_error(api.get(FAQS), 401)
    assert_error(api.get(SOURCES), 401)


# ---------------------------------------------------------------------------------------- FAQs


@pytest.mark.parametrize("kind", AUTH_KINDS)
def test_faq_crud_round_trip(kind, client_a):
    api = make(client_a, kind, Role.AGENT)
    article(client_a, "Not an FAQ")
    created = api.post(
        FAQS, {"question": "Do you ship abroad?", "answer": "Yes, to 30 countries."}, format="json"
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["question"] == "Do you ship abroad?" and body["answer"] == "Yes, to 30 countries."
    stored = Article.objects.for_client(client_a).get(public_id=body["id"])
    assert stored.kind == ArticleKind.FAQ and stored.title == "Do you ship abroad?"
    listed = api.get(FAQS).json()
    assert [row["question"] for row in listed["results"]] == ["Do you ship abroad?"]
    url = f"{FAQS}{body['id']}/"
    assert api.patch(url, {"answer": "Yes."}, format="json").json()["answer"] == "Yes."
    put = api.put(url, {"question": "Shipping abroad?", "answer": "To the EU."}, format="json")
    assert put.status_code == 200 and put.json()["question"] == "Shipping abroad?"
    assert api.delete(url).status_code == 204
    assert not Article.objects.for_client(client_a).filter(kind="faq").exists()


def test_an_article_is_not_an_faq(client_a):
    mine = article(client_a)
    assert_error(make(client_a).get(f"{FAQS}{mine.public_id}/"), 404)


def test_faq_validation_names_question_and_answer(client_a):
    error = assert_error(make(client_a).post(FAQS, {"question": "Q?"}, format="json"), 400)
    assert "answer" in error["fields"]
    error = assert_error(
        make(client_a).post(FAQS, {"question": "Q?", "answer": "A", "title": "x"}, format="json"),
        400,
    )
    assert "title" in error["fields"]


@pytest.mark.parametrize("kind", AUTH_KINDS)
def test_faq_roles_and_tenancy(kind, client_a, client_b):
    mine = faq(client_a)
    url = f"{FAQS}{mine.public_id}/"
    viewer = make(client_a, kind, Role.VIEWER)
    assert viewer.get(url).status_code == 200
    assert_error(viewer.post(FAQS, {"question": "q", "answer": "a"}, format="json"), 403)
    assert_error(viewer.patch(url, {"answer": "no"}, format="json"), 403)
    assert_error(viewer.delete(url), 403)
    theirs = make(client_b, kind, Role.OWNER)
    assert theirs.get(FAQS).json()["count"] == 0
    assert_error(theirs.get(url), 404)
    assert_error(theirs.patch(url, {"answer": "no"}, format="json"), 404)
    assert_error(theirs.put(url, {"question": "q", "answer": "no"}, format="json"), 404)
    assert_error(theirs.delete(url), 404)
    mine.refresh_from_db()
    assert mine.body == "Yes."


# ------------------------------------------------------------------------------------- sources


@pytest.mark.parametrize("kind", AUTH_KINDS)
def test_source_crud_round_trip(kind, client_a):
    api = make(client_a, kind, Role.ADMIN)
    created = api.post(
        SOURCES,
        {"name": "Help centre", "kind": "sitemap", "url": "https://shop.example/sitemap.xml"},
        format="json",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["status"] == "new" and body["articles"] == 0 and body["last_synced_at"] is None
    url = f"{SOURCES}{body['id']}/"
    stored = KnowledgeSource.objects.for_client(client_a).get(public_id=body["id"])
    article(client_a, "Imported page", source=stored)
    assert api.get(url).json()["articles"] == 1
    assert api.get(SOURCES).json()["results"][0]["id"] == body["id"]
    assert api.patch(url, {"enabled": False}, format="json").json()["enabled"] is False
    assert not Article.objects.for_client(client_a).usable().exists()
    put = api.put(url, {"name": "Returns page", "kind": "url", "url": "https://shop.example/r"})
    assert put.status_code == 200 and put.json()["kind"] == "url"
    assert api.delete(url).status_code == 204
    assert not Article.objects.for_client(client_a).exists()


def test_source_file_upload_multipart(client_a, settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path)
    api = make(client_a, role=Role.ADMIN)
    response = api.post(
        SOURCES,
        {"name": "Care guide", "kind": "file", "file": SimpleUploadedFile("care.md", b"# Care")},
        format="multipart",
    )
    assert response.status_code == 201, response.content
    assert response.json()["file"].endswith(".md")
    bad = api.post(
        SOURCES,
        {"name": "x", "kind": "file", "file": SimpleUploadedFile("x.exe", b"MZ")},
        format="multipart",
    )
    assert "file" in assert_error(bad, 400)["fields"]


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"name": "x", "kind": "url", "url": "ftp://shop.example/"}, "url"),
        ({"name": "x", "kind": "sitemap"}, "url"),
        ({"name": "x", "kind": "file"}, "file"),
        ({"name": "x", "kind": "manual", "status": "synced"}, "status"),
    ],
)
def test_invalid_sources_answer_400(client_a, payload, field):
    error = assert_error(make(client_a).post(SOURCES, payload, format="json"), 400)
    assert field in error["fields"]
    assert not KnowledgeSource.objects.for_client(client_a).exists()


@pytest.mark.parametrize("kind", AUTH_KINDS)
def test_source_roles_and_tenancy(kind, client_a, client_b):
    mine = source(client_a)
    url = f"{SOURCES}{mine.public_id}/"
    payload = {"name": "n", "kind": "manual"}
    for role in (Role.VIEWER, Role.AGENT):
        api = make(client_a, kind, role)
        assert api.get(url).status_code == 200
        assert_error(api.post(SOURCES, payload, format="json"), 403)
        assert_error(api.patch(url, {"enabled": False}, format="json"), 403)
        assert_error(api.delete(url), 403)
    theirs = make(client_b, kind, Role.OWNER)
    assert theirs.get(SOURCES).json()["count"] == 0
    assert_error(theirs.get(url), 404)
    assert_error(theirs.patch(url, {"enabled": False}, format="json"), 404)
    assert_error(theirs.put(url, payload, format="json"), 404)
    assert_error(theirs.delete(url), 404)
    mine.refresh_from_db()
    assert mine.enabled
