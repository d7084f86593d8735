"""Importing sources against a local web site: a sitemap of HTML pages with boilerplate, a PDF,
a Markdown file and a page that changes; the bounds (bytes, pages, SSRF rule, redirects)."""

from __future__ import annotations

import ipaddress

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings

from apps.core.exceptions import ApplicationError
from apps.knowledge.models import (
    Article,
    ArticleChunk,
    KnowledgeSource,
    SourceStatus,
)
from apps.knowledge.services.articles import article_save
from apps.knowledge.services.sync import source_sync, source_sync_start
from apps.platform import netguard
from tests.factories import ClientFactory
from tests.support.fake_site import FakeSite, pdf_bytes

pytestmark = pytest.mark.django_db

RETURNS = "<p>You can return any unused item within 30 days of delivery for a full refund.</p>"
SHIPPING = (
    "<p>We ship to every country in the European Union within five working days.</p>"
    "<h2>Costs</h2><p>Shipping is free for orders over 50 euros, otherwise 4.90 euros.</p>"
)
SIZING = "<p>Our hiking boots run half a size small: order half a size up from your usual.</p>"
CARE_MD = b"# Caring for your tent\n\nDry the tent fully before you pack it away.\n"


@pytest.fixture
def site():
    with FakeSite() as s:
        s.html("/returns", "Returning an item", RETURNS)
        s.html("/shipping", "Shipping", SHIPPING)
        s.html("/sizing", "Boot sizing", SIZING)
        s.pages["/warranty.pdf"] = (
            "application/pdf",
            pdf_bytes("Warranty", "Every tent has a two year warranty.", "Keep your receipt."),
        )
        s.pages["/care.md"] = ("text/markdown", CARE_MD)
        s.sitemap("/sitemap.xml", ["/returns", "/shipping", "/sizing", "/warranty.pdf", "/care.md"])
        yield s


def _source(client, site, kind="sitemap", path="/sitemap.xml", **kw):
    return KnowledgeSource.objects.create(
        client=client, name="Help centre", kind=kind, url=site.url(path), language="en", **kw
    )


def _by_url(client):
    return {a.source_url: a for a in Article.objects.for_client(client)}


def _chunk_ids(client, article):
    return list(
        ArticleChunk.objects.for_client(client)
        .filter(article=article)
        .order_by("ordinal")
        .values_list("pk", flat=True)
    )


def test_a_sitemap_sync_creates_one_article_per_page_without_boilerplate(site):
    client = ClientFactory()
    source = _source(client, site)
    progress = source_sync(source=source)
    source.refresh_from_db()
    assert source.status == SourceStatus.SYNCED
    assert source.last_synced_at is not None
    assert source.error == ""
    assert {k: progress[k] for k in ("done", "total", "created", "failed")} == {
        "done": 5,
        "total": 5,
        "created": 5,
        "failed": 0,
    }
    assert progress["bytes"] > 0
    assert source.progress["created"] == 5
    articles = _by_url(client)
    assert set(articles) == {
        site.url(p) for p in ("/returns", "/shipping", "/sizing", "/warranty.pdf", "/care.md")
    }
    shipping = articles[site.url("/shipping")]
    assert shipping.title == "Shipping"
    assert "five working days" in shipping.body
    assert "## Costs" in shipping.body
    for article in articles.values():
        assert article.source_id == source.pk
        assert article.language == "en"
        assert article.indexed_hash == article.content_hash
        for boilerplate in ("Shop all tents", "Help centre menu", "Newsletter", "Copyright"):
            assert boilerplate not in article.body
    pdf = articles[site.url("/warranty.pdf")]
    assert pdf.title == "Warranty"
    assert "two year warranty" in pdf.body and "Keep your receipt." in pdf.body
    care = articles[site.url("/care.md")]
    assert care.title == "Caring for your tent"
    assert care.body == "Dry the tent fully before you pack it away."
    assert ArticleChunk.objects.for_client(client).filter(article=shipping).count() == 2


def test_a_second_sync_skips_unchanged_pages_updates_changed_and_switches_off_removed(site):
    client = ClientFactory()
    source = _source(client, site)
    source_sync(source=source)
    before = _by_url(client)
    returns_chunks = _chunk_ids(client, before[site.url("/returns")])
    shipping_chunks = _chunk_ids(client, before[site.url("/shipping")])

    site.html("/returns", "Returning an item", RETURNS.replace("30 days", "60 days"))
    site.sitemap("/sitemap.xml", ["/returns", "/shipping", "/warranty.pdf", "/care.md"])
    progress = source_sync(source=source)

    assert {k: progress[k] for k in ("total", "created", "updated", "unchanged", "failed")} == {
        "total": 4,
        "created": 0,
        "updated": 1,
        "unchanged": 3,
        "failed": 0,
    }
    assert progress["switched_off"] == 1
    after = _by_url(client)
    returns = after[site.url("/returns")]
    assert "60 days" in returns.body
    assert returns.indexed_hash == returns.content_hash != before[site.url("/returns")].content_hash
    assert _chunk_ids(client, returns) != returns_chunks  # re-indexed
    assert _chunk_ids(client, after[site.url("/shipping")]) == shipping_chunks  # untouched
    assert after[site.url("/shipping")].updated_at == before[site.url("/shipping")].updated_at
    sizing = after[site.url("/sizing")]
    assert sizing.enabled is False  # switched off, not deleted
    assert not Article.objects.for_client(client).usable().filter(pk=sizing.pk).exists()

    # It comes back: switched on again, and nothing else changes.
    site.sitemap("/sitemap.xml", ["/returns", "/shipping", "/sizing", "/warranty.pdf", "/care.md"])
    progress = source_sync(source=source)
    assert (progress["updated"], progress["unchanged"], progress["switched_off"]) == (1, 4, 0)
    assert Article.objects.for_client(client).get(pk=sizing.pk).enabled is True


def test_a_page_over_the_byte_limit_fails_alone(site):
    client = ClientFactory()
    site.html("/sizing", "Boot sizing", SIZING + "<p>" + "x" * 5000 + "</p>")
    with override_settings(KNOWLEDGE_MAX_PAGE_BYTES=4000):
        progress = source_sync(source=_source(client, site))
    assert (progress["created"], progress["failed"], progress["done"]) == (4, 1, 5)
    assert progress["errors"][0]["page"] == site.url("/sizing")
    assert "4000 bytes" in progress["errors"][0]["error"]
    assert KnowledgeSource.objects.for_client(client).get().status == SourceStatus.SYNCED


def test_the_sync_byte_limit_stops_the_sync(site):
    client = ClientFactory()
    with override_settings(KNOWLEDGE_MAX_SYNC_BYTES=2500):
        progress = source_sync(source=_source(client, site))
    source = KnowledgeSource.objects.for_client(client).get()
    assert progress["done"] < progress["total"]
    assert "2500 bytes" in source.error
    assert source.progress["message"].startswith("Stopped early")


def test_max_pages_is_respected(site):
    client = ClientFactory()
    with override_settings(KNOWLEDGE_MAX_PAGES=2):
        progress = source_sync(source=_source(client, site))
    assert (progress["total"], progress["created"]) == (2, 2)
    assert Article.objects.for_client(client).count() == 2
    assert [p for p in site.requests if p != "/sitemap.xml"] == ["/returns", "/shipping"]
    # pages beyond the bound are not "removed from the sitemap": nothing is switched off
    assert progress["switched_off"] == 0


def test_wrong_content_types_and_missing_pages_fail_per_page(site):
    client = ClientFactory()
    site.pages["/logo.png"] = ("image/png", b"\x89PNG....")
    site.sitemap("/sitemap.xml", ["/returns", "/logo.png", "/missing"])
    progress = source_sync(source=_source(client, site))
    assert (progress["created"], progress["failed"]) == (1, 2)
    errors = {e["page"]: e["error"] for e in progress["errors"]}
    assert "image/png" in errors[site.url("/logo.png")]
    assert "404" in errors[site.url("/missing")]


def test_a_sitemap_index_is_followed_and_other_hosts_are_ignored(site):
    client = ClientFactory()
    site.sitemap("/pages-1.xml", ["/returns"])
    site.pages["/pages-2.xml"] = (
        "text/xml",
        (
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"<url><loc>{site.url('/shipping')}</loc></url>"
            "<url><loc>https://elsewhere.example/page</loc></url></urlset>"
        ).encode(),
    )
    site.pages["/index.xml"] = (
        "application/xml",
        (
            '<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"<sitemap><loc>{site.url('/pages-1.xml')}</loc></sitemap>"
            f"<sitemap><loc>{site.url('/pages-2.xml')}</loc></sitemap>"
            "</sitemapindex>"
        ).encode(),
    )
    source_sync(source=_source(client, site, path="/index.xml"))
    assert set(_by_url(client)) == {site.url("/returns"), site.url("/shipping")}


def test_an_unreadable_sitemap_fails_the_source_and_keeps_its_articles(site):
    client = ClientFactory()
    source = _source(client, site)
    source_sync(source=source)
    site.pages["/sitemap.xml"] = ("application/xml", b"<not-xml")
    source_sync(source=source)
    source.refresh_from_db()
    assert source.status == SourceStatus.FAILED
    assert "not valid XML" in source.error
    assert Article.objects.for_client(client).filter(enabled=True).count() == 5


def test_a_single_url_source(site):
    client = ClientFactory()
    source = _source(client, site, kind="url", path="/returns")
    source_sync(source=source)
    [article] = Article.objects.for_client(client)
    assert (article.title, article.source_url) == ("Returning an item", site.url("/returns"))


@override_settings(KNOWLEDGE_FETCH_ALLOW_PRIVATE_NETWORKS=False)
def test_a_private_address_is_refused_in_production(site):
    client = ClientFactory()
    source = _source(client, site, kind="url", path="/returns")
    with pytest.raises(ApplicationError, match="non-public address"):
        source_sync_start(source=source)
    progress = source_sync(source=source)
    source.refresh_from_db()
    assert source.status == SourceStatus.FAILED
    assert "non-public address" in progress["errors"][0]["error"]
    assert site.requests == []
    assert not Article.objects.for_client(client).exists()


@override_settings(KNOWLEDGE_FETCH_ALLOW_PRIVATE_NETWORKS=False)
def test_a_redirect_to_a_private_address_is_refused(site, monkeypatch):
    # The test site's 127.0.0.1 stands in for a public host; 127.0.0.2 for the private one
    # the redirect leads to (the address rule itself is tested in tests/tools).
    real = netguard.address_is_public
    monkeypatch.setattr(
        netguard,
        "address_is_public",
        lambda a: a == ipaddress.ip_address("127.0.0.1") or real(a),
    )
    port = site.url("/").split(":")[2].rstrip("/")
    site.redirects["/moved"] = f"http://127.0.0.2:{port}/returns"
    site.redirects["/local-move"] = "/returns"
    client = ClientFactory()
    site.sitemap("/sitemap.xml", ["/moved", "/local-move"])
    progress = source_sync(source=_source(client, site))
    assert (progress["created"], progress["failed"]) == (1, 1)
    assert "non-public address (127.0.0.2)" in progress["errors"][0]["error"]
    assert [a.source_url for a in Article.objects.for_client(client)] == [site.url("/local-move")]


def test_file_sources_markdown_and_pdf(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path)
    client = ClientFactory()
    md = KnowledgeSource.objects.create(
        client=client,
        name="Care",
        kind="file",
        file=SimpleUploadedFile("care-guide.md", CARE_MD, content_type="text/markdown"),
    )
    pdf = KnowledgeSource.objects.create(
        client=client,
        name="Warranty",
        kind="file",
        file=SimpleUploadedFile("warranty.pdf", pdf_bytes("", "Two years on tents.")),
    )
    source_sync(source=md)
    source_sync(source=pdf)
    titles = {a.source_id: (a.title, a.body) for a in Article.objects.for_client(client)}
    assert titles[md.pk] == ("Caring for your tent", "Dry the tent fully before you pack it away.")
    assert titles[pdf.pk] == ("warranty", "Two years on tents.")
    assert source_sync(source=md)["unchanged"] == 1


def test_sync_start_queues_the_task_after_commit(site, django_capture_on_commit_callbacks):
    client = ClientFactory()
    source = _source(client, site, kind="url", path="/returns")
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        queued = source_sync_start(source=source)
        assert queued.status == SourceStatus.QUEUED
        assert source_sync_start(source=source).status == SourceStatus.QUEUED  # no second
    # (saving the source also invalidates the knowledge topics cache on commit)
    assert sum("source_sync_start" in c.__qualname__ for c in callbacks) == 1
    source.refresh_from_db()
    assert source.status == SourceStatus.SYNCED
    assert source.progress["created"] == 1


def test_a_source_being_synced_is_not_synced_twice(site):
    client = ClientFactory()
    source = _source(client, site, kind="url", path="/returns")
    KnowledgeSource.objects.for_client(client).filter(pk=source.pk).update(
        status=SourceStatus.SYNCING
    )
    assert source_sync(source=source)["skipped"] is True
    assert site.requests == []
    assert source_sync_start(source=source).status == SourceStatus.SYNCING


def test_a_manual_source_has_nothing_to_sync():
    client = ClientFactory()
    source = KnowledgeSource.objects.create(client=client, name="Typed", kind="manual")
    with pytest.raises(ApplicationError):
        source_sync_start(source=source)


def test_a_staff_edit_survives_a_resync_until_the_page_itself_changes(site):
    client = ClientFactory()
    source = _source(client, site, kind="url", path="/returns")
    source_sync(source=source)
    article = Article.objects.for_client(client).get()
    article.body += "\n\nStaff note: labels are printed at the counter."
    article_save(article=article)

    assert source_sync(source=source)["unchanged"] == 1
    article.refresh_from_db()
    assert "Staff note" in article.body

    site.html("/returns", "Returning an item", RETURNS.replace("30 days", "14 days"))
    assert source_sync(source=source)["updated"] == 1
    article.refresh_from_db()
    assert "14 days" in article.body and "Staff note" not in article.body  # the page wins


def test_a_text_sitemap_lists_one_url_per_line(site):
    client = ClientFactory()
    site.pages["/sitemap.txt"] = (
        "text/plain",
        f"{site.url('/returns')}\n\n{site.url('/sizing')}\nnot a url\n".encode(),
    )
    progress = source_sync(source=_source(client, site, path="/sitemap.txt"))
    assert (progress["total"], progress["created"]) == (2, 2)


@override_settings(KNOWLEDGE_FETCH_TIMEOUT=0.5)
def test_a_page_that_does_not_answer_in_time_fails_alone(site):
    client = ClientFactory()
    site.delays["/sizing"] = 3
    progress = source_sync(source=_source(client, site))
    assert (progress["created"], progress["failed"]) == (4, 1)
    assert progress["errors"] == [
        {"page": site.url("/sizing"), "error": "The page did not answer in time."}
    ]


@override_settings(KNOWLEDGE_SYNC_SECONDS=1)
def test_the_sync_stops_at_its_time_limit(site):
    client = ClientFactory()
    site.delays["/shipping"] = 3
    progress = source_sync(source=_source(client, site))
    source = KnowledgeSource.objects.for_client(client).get()
    assert source.status == SourceStatus.SYNCED
    assert progress["created"] == 1  # /returns, before the slow page used up the time
    assert progress["done"] < progress["total"]
    assert "time limit" in source.error
    assert "/sizing" not in site.requests
