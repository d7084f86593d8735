"""The content services: saving validates, hashes and indexes; publishing records the approver;
sources are checked by kind (a URL needs http(s), a file an allowed type and size)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from apps.core.exceptions import ApplicationError
from apps.knowledge.models import (
    Article,
    ArticleChunk,
    ArticleKind,
    ArticleStatus,
    KnowledgeSource,
)
from apps.knowledge.services import articles as svc
from apps.knowledge.sources import file as file_kind
from tests.factories import ClientFactory, UserFactory

pytestmark = pytest.mark.django_db


def refused_fields(create: Callable[..., Any], **kwargs: Any) -> dict[str, list[str]]:
    """The fields named by the ApplicationError that `create(**kwargs)` raises."""
    with pytest.raises(ApplicationError) as exc:
        create(**kwargs)
    return exc.value.extra["fields"]


def test_create_strips_normalises_hashes_and_indexes():
    client = ClientFactory()
    article = svc.article_create(
        client=client,
        data={
            "title": "  Returns  ",
            "body": "Intro.\n\n## Window\n30 days.",
            "language": "EN-gb",
            "tags": ["returns", " Policy ", "RETURNS", ""],
        },
    )
    article.refresh_from_db()
    assert article.title == "Returns"
    assert article.language == "en"
    assert article.tags == ["returns", "Policy"]
    assert article.content_hash and article.indexed_hash == article.content_hash
    assert ArticleChunk.objects.for_client(client).filter(article=article).count() == 2


def test_an_edit_reindexes_and_an_unchanged_save_leaves_chunks_alone():
    client = ClientFactory()
    article = svc.article_create(client=client, data={"title": "Care", "body": "Brush it."})
    chunk = ArticleChunk.objects.for_client(client).get(article=article)
    svc.article_update(article=article, data={"tags": ["care"]})
    assert ArticleChunk.objects.for_client(client).get(article=article).pk == chunk.pk
    svc.article_update(article=article, data={"body": "Brush it gently."})
    again = ArticleChunk.objects.for_client(client).get(article=article)
    assert again.pk != chunk.pk and again.text == "Brush it gently."


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"title": "", "body": "x"}, "title"),
        ({"title": "x" * 301, "body": "x"}, "title"),
        ({"title": "t", "body": "   "}, "body"),
        ({"title": "t", "body": "b", "kind": "poem"}, "kind"),
        ({"title": "t", "body": "b", "status": "live"}, "status"),
        ({"title": "t", "body": "b", "tags": ",".join(f"t{i}" for i in range(30))}, "tags"),
        ({"title": "t", "body": "b", "tags": [1]}, "tags"),
        ({"title": "t", "body": "b", "content_hash": "x"}, "content_hash"),
        ({"title": "Q?", "body": "a" * 5001, "kind": "faq"}, "body"),
    ],
)
def test_invalid_articles_are_refused_naming_the_field(data, field):
    client = ClientFactory()
    assert field in refused_fields(svc.article_create, client=client, data=data)
    assert not Article.objects.for_client(client).exists()


def test_faq_errors_speak_of_question_and_answer():
    fields = refused_fields(
        svc.article_create, client=ClientFactory(), data={"kind": "faq", "title": "", "body": ""}
    )
    assert "question" in fields["title"][0]
    assert "answer" in fields["body"][0]


def test_a_source_of_another_client_is_refused():
    a, b = ClientFactory(), ClientFactory()
    theirs = svc.source_create(client=b, data={"name": "B notes", "kind": "manual"})
    data = {"title": "t", "body": "b", "source": theirs}
    assert "source" in refused_fields(svc.article_create, client=a, data=data)


def test_publish_records_the_approver_and_makes_the_draft_usable():
    client = ClientFactory()
    user = UserFactory()
    draft = svc.article_create(
        client=client, data={"title": "Gift cards", "body": "No.", "status": "draft"}
    )
    assert not Article.objects.for_client(client).usable().exists()
    svc.article_publish(article=draft, user=user)
    draft.refresh_from_db()
    assert draft.status == ArticleStatus.PUBLISHED
    assert draft.approved_by == user and draft.approved_at is not None
    assert list(Article.objects.for_client(client).usable()) == [draft]


def test_disable_and_delete():
    client = ClientFactory()
    article = svc.article_create(
        client=client, data={"kind": ArticleKind.FAQ, "title": "Q?", "body": "A."}
    )
    svc.article_set_enabled(article=article, enabled=False)
    assert not Article.objects.for_client(client).usable().exists()
    svc.article_delete(article=article)
    assert not Article.objects.for_client(client).exists()
    assert not ArticleChunk.objects.for_client(client).exists()


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"name": "Help", "kind": "url", "url": ""}, "url"),
        ({"name": "Help", "kind": "url", "url": "ftp://shop.example/help"}, "url"),
        ({"name": "Help", "kind": "sitemap", "url": "javascript:alert(1)"}, "url"),
        ({"name": "", "kind": "manual"}, "name"),
        ({"name": "Help", "kind": "rss"}, "kind"),
        ({"name": "Help", "kind": "file"}, "file"),
        (
            {"name": "Help", "kind": "url", "url": "https://a.example", "resync_hours": -1},
            "resync_hours",
        ),
    ],
)
def test_invalid_sources_are_refused_naming_the_field(data, field):
    client = ClientFactory()
    assert field in refused_fields(svc.source_create, client=client, data=data)
    assert not KnowledgeSource.objects.for_client(client).exists()


def test_file_sources_need_an_allowed_type_and_size(settings, tmp_path, monkeypatch):
    settings.MEDIA_ROOT = str(tmp_path)
    client = ClientFactory()
    exe = {"name": "x", "kind": "file", "file": SimpleUploadedFile("x.exe", b"MZ")}
    assert ".pdf" in refused_fields(svc.source_create, client=client, data=exe)["file"][0]
    monkeypatch.setattr(file_kind, "MAX_SOURCE_FILE_BYTES", 10)
    big = {"name": "x", "kind": "file", "file": SimpleUploadedFile("x.md", b"# " * 20)}
    assert "larger" in refused_fields(svc.source_create, client=client, data=big)["file"][0]
    monkeypatch.setattr(file_kind, "MAX_SOURCE_FILE_BYTES", 1000)
    source = svc.source_create(
        client=client,
        data={"name": "Guide", "kind": "file", "file": SimpleUploadedFile("guide.MD", b"# Hi")},
    )
    assert source.kind == "file" and source.file.name.endswith(".MD")


def test_url_source_and_delete_takes_its_articles():
    client = ClientFactory()
    source = svc.source_create(
        client=client,
        data={"name": " Help ", "kind": "sitemap", "url": "https://shop.example/sitemap.xml"},
    )
    assert source.name == "Help" and source.status == "new"
    svc.article_create(client=client, data={"title": "p", "body": "b", "source": source})
    svc.source_delete(source=source)
    assert not Article.objects.for_client(client).exists()


def test_a_simulations_baseline_shows_the_faqs_the_turns_see():
    from apps.simulations.config import live_config

    client = ClientFactory(business_info={"about": {"description": "Boots."}})
    svc.article_create(
        client=client, data={"kind": "faq", "title": "Do you ship abroad?", "body": "Yes."}
    )
    info = live_config(client=client)["business_info"]
    assert info == {
        "about": {"description": "Boots."},
        "faqs": [{"question": "Do you ship abroad?", "answer": "Yes."}],
    }
