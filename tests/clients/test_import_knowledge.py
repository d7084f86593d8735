"""The tenant file's knowledge: `business_info.faqs` become FAQ articles, `knowledge.articles`
and `knowledge.article_dir` (Markdown files with YAML front matter, relative to the file)
become articles, `knowledge.sources` sources — upserted, idempotent, removals only for what
the file speaks for; errors name the file and field; export writes it all back."""

from __future__ import annotations

import copy
import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import CommandError, call_command

from apps.clients.models import Client
from apps.core.exceptions import ApplicationError
from apps.knowledge.models import Article, ArticleChunk, KnowledgeSource
from apps.knowledge.selectors import business_info_for
from apps.knowledge.services.articles import article_create, article_set_enabled
from apps.provisioning.files import load_tenant_file
from apps.provisioning.services import client_export, tenant_import

pytestmark = pytest.mark.django_db

FAQS = [
    {"question": "Do you ship abroad?", "answer": "Yes, to 30 countries."},
    {"question": "Can I pay by invoice?", "answer": "Business customers can."},
]


def tenant(**client: Any) -> dict[str, Any]:
    entry = {
        "slug": "kb-shop",
        "name": "KB Shop",
        "plan": "kb",
        "language": "en",
        "business_info": {"about": {"description": "Boots."}, "faqs": copy.deepcopy(FAQS)},
        "knowledge": {
            "articles": [
                {"title": "Returning an item", "body": "Within 30 days.", "tags": ["returns"]},
                {"title": "Gift cards", "body": "Not yet.", "status": "draft", "enabled": False},
            ],
            "sources": [
                {
                    "name": "Help centre",
                    "kind": "sitemap",
                    "url": "https://shop.example/sitemap.xml",
                    "resync_hours": 12,
                }
            ],
        },
    }
    entry.update(client)
    return {"plans": [{"slug": "kb", "name": "KB"}], "clients": [entry]}


def rows(client: Client) -> dict[tuple[str, str], Article]:
    return {(a.kind, a.title): a for a in Article.objects.for_client(client)}


def snapshot() -> dict[str, list[dict[str, Any]]]:
    models: list[Any] = [Client, Article, ArticleChunk, KnowledgeSource]
    return {m.__name__: list(m._base_manager.order_by("pk").values()) for m in models}


def test_faqs_articles_and_sources_are_imported():
    tenant_import(data=tenant())
    client = Client.objects.get(slug="kb-shop")
    assert client.business_info == {"about": {"description": "Boots."}}
    found = rows(client)
    assert set(found) == {
        ("faq", "Do you ship abroad?"),
        ("faq", "Can I pay by invoice?"),
        ("article", "Returning an item"),
        ("article", "Gift cards"),
    }
    faq = found[("faq", "Do you ship abroad?")]
    assert (faq.body, faq.language, faq.status, faq.enabled) == (
        "Yes, to 30 countries.",
        "en",
        "published",
        True,
    )
    assert found[("article", "Returning an item")].tags == ["returns"]
    gift = found[("article", "Gift cards")]
    assert (gift.status, gift.enabled) == ("draft", False)
    assert ArticleChunk.objects.for_client(client).filter(article=faq).exists()
    assert sorted(f["question"] for f in business_info_for(client)["faqs"]) == sorted(
        f["question"] for f in FAQS
    )
    (source,) = KnowledgeSource.objects.for_client(client)
    assert (source.kind, source.url, source.resync_hours) == (
        "sitemap",
        "https://shop.example/sitemap.xml",
        12,
    )


def test_importing_the_same_file_again_changes_nothing():
    tenant_import(data=tenant())
    before = snapshot()
    tenant_import(data=tenant())
    assert snapshot() == before


def test_an_edit_updates_by_title_and_what_left_the_file_is_removed():
    tenant_import(data=tenant())
    client = Client.objects.get(slug="kb-shop")
    ids = {key: a.pk for key, a in rows(client).items()}
    data = tenant()
    data["clients"][0]["business_info"]["faqs"] = [
        {"question": "Do you ship abroad?", "answer": "Yes, to 40 countries."}
    ]
    data["clients"][0]["knowledge"]["articles"] = [
        {"title": "Returning an item", "body": "Within 60 days.", "tags": ["returns"]}
    ]
    tenant_import(data=data)
    found = rows(client)
    assert set(found) == {("faq", "Do you ship abroad?"), ("article", "Returning an item")}
    faq = found[("faq", "Do you ship abroad?")]
    assert faq.pk == ids[("faq", "Do you ship abroad?")] and faq.body == "Yes, to 40 countries."
    chunk = ArticleChunk.objects.for_client(client).get(article=faq)
    assert chunk.text == "Yes, to 40 countries."


def test_kinds_the_file_does_not_speak_for_are_left_alone():
    tenant_import(data=tenant())
    client = Client.objects.get(slug="kb-shop")
    staff = article_create(client=client, data={"title": "Written in the admin", "body": "x"})
    synced_source = KnowledgeSource.objects.for_client(client).get()
    imported = article_create(
        client=client, data={"title": "A synced page", "body": "y", "source": synced_source}
    )
    data = tenant(business_info={"about": {"description": "Boots."}})
    del data["clients"][0]["knowledge"]
    tenant_import(data=data)
    found = rows(client)
    # no faqs key, no knowledge entry: every FAQ and article stays
    assert len(found) == 6
    # a knowledge entry removes the source-less articles it does not list, never a source's
    tenant_import(data=tenant(knowledge={"articles": []}))
    left = rows(client)
    assert ("article", staff.title) not in left
    assert ("article", imported.title) in left
    assert {k for k, _ in left} == {"faq", "article"}
    assert KnowledgeSource.objects.for_client(client).count() == 1  # sources are never removed


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"knowledge": {"articles": [{"title": "", "body": "x"}]}}, "knowledge.articles[0].title"),
        ({"knowledge": {"articles": [{"title": "t"}]}}, "knowledge.articles[0].body"),
        (
            {"knowledge": {"articles": [{"title": "t", "body": "b", "kind": "poem"}]}},
            "knowledge.articles[0].kind",
        ),
        (
            {"knowledge": {"sources": [{"name": "s", "kind": "url", "url": "ftp://x.example"}]}},
            "knowledge.sources[0]",
        ),
        ({"knowledge": {"article_dir": "knowledge"}}, "knowledge.article_dir"),
        ({"knowledge": {"pages": []}}, "knowledge.pages"),
        (
            {"business_info": {"faqs": [{"question": "Q?"}]}},
            "business_info",
        ),
    ],
)
def test_invalid_knowledge_is_refused_naming_the_field(change, path):
    with pytest.raises(ApplicationError) as exc:
        tenant_import(data=tenant(**change))
    assert any(name.startswith(f"clients[0].{path}") for name in exc.value.extra["fields"]), (
        exc.value.extra
    )
    assert not Client.objects.filter(slug="kb-shop").exists()


# ---------------------------------------------------------------------- article_dir and YAML


def write_article(directory: Path, name: str, text: str) -> None:
    directory.mkdir(exist_ok=True)
    (directory / name).write_text(text, encoding="utf-8")


def yaml_tenant(tmp_path: Path) -> Path:
    data = tenant()
    data["clients"][0]["knowledge"] = {"article_dir": "knowledge"}
    path = tmp_path / "tenant.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def run_import(path: Path) -> dict[str, Any]:
    out = StringIO()
    call_command("import_client", str(path), stdout=out)
    return json.loads(out.getvalue())


def test_a_yaml_file_with_an_article_directory(tmp_path):
    write_article(
        tmp_path / "knowledge",
        "returns.md",
        "---\ntitle: Returning an item\ntags: [returns, policy]\nlanguage: en\n---\n"
        "You can return unworn items.\n\n## How\nStart at /returns.\n",
    )
    write_article(tmp_path / "knowledge", "care.md", "---\ntitle: Boot care\n---\nBrush them.")
    write_article(tmp_path / "knowledge", "notes.txt", "not an article")
    run_import(yaml_tenant(tmp_path))
    client = Client.objects.get(slug="kb-shop")
    found = rows(client)
    returns = found[("article", "Returning an item")]
    assert returns.tags == ["returns", "policy"] and returns.language == "en"
    assert returns.body == "You can return unworn items.\n\n## How\nStart at /returns."
    assert ("article", "Boot care") in found
    assert {k for k, _ in found} == {"faq", "article"} and len(found) == 4
    assert ArticleChunk.objects.for_client(client).filter(article=returns).count() == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("no front matter", "knowledge/bad.md: must start with YAML front matter"),
        ("---\ntitle: x\n", "knowledge/bad.md: the front matter has no closing --- line"),
        ("---\ntitle: [x\n---\nbody", "knowledge/bad.md: front matter is not valid YAML"),
        ("---\ntags: [a]\n---\nbody", "knowledge/bad.md: title: Field required"),
        ("---\ntitle: T\nkind: poem\n---\nbody", "knowledge/bad.md: kind:"),
        ("---\ntitle: T\n---\n", "knowledge/bad.md: body: String should have at least 1"),
    ],
)
def test_a_bad_article_file_is_named_with_its_field(tmp_path, text, message):
    write_article(tmp_path / "knowledge", "bad.md", text)
    with pytest.raises(CommandError) as exc:
        run_import(yaml_tenant(tmp_path))
    assert "clients[0].knowledge.article_dir" in str(exc.value)
    assert message in str(exc.value)
    assert not Client.objects.filter(slug="kb-shop").exists()


def test_a_missing_article_directory_is_an_error(tmp_path):
    with pytest.raises(ApplicationError) as exc:
        load_tenant_file(yaml_tenant(tmp_path))
    assert "knowledge: no such directory" in exc.value.message


# ---------------------------------------------------------------------------------- export


def test_export_writes_faqs_and_articles_back_and_reimports_unchanged(tmp_path):
    tenant_import(data=tenant())
    client = Client.objects.get(slug="kb-shop")
    hidden = rows(client)[("faq", "Can I pay by invoice?")]
    article_set_enabled(article=hidden, enabled=False)
    out = StringIO()
    call_command("export_client", "kb-shop", stdout=out)
    exported = json.loads(out.getvalue())
    (entry,) = exported["clients"]
    assert entry["business_info"]["faqs"] == [FAQS[0]]
    assert entry["business_info"]["about"] == {"description": "Boots."}
    titles = {(a.get("kind", "article"), a["title"]) for a in entry["knowledge"]["articles"]}
    assert titles == {
        ("faq", "Can I pay by invoice?"),
        ("article", "Returning an item"),
        ("article", "Gift cards"),
    }
    assert entry["knowledge"]["sources"][0]["url"] == "https://shop.example/sitemap.xml"
    assert client_export(client=client) == entry

    before = snapshot()
    path = tmp_path / "export.json"
    path.write_text(out.getvalue(), encoding="utf-8")
    run_import(path)
    assert snapshot() == before  # the export is the client as it is

    # and YAML, into a fresh database copy of the client: the same content
    yaml_out = StringIO()
    call_command("export_client", "kb-shop", "--format", "yaml", stdout=yaml_out)
    assert yaml.safe_load(yaml_out.getvalue()) == exported
