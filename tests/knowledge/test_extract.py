"""Extraction details the site tests do not reach."""

from __future__ import annotations

import pytest

from apps.knowledge.extract import (
    ExtractError,
    content_type_for_name,
    extract,
    name_of,
    sitemap_entries,
)


def test_html_without_main_text_falls_back_to_the_body_text_without_navigation(monkeypatch):
    import trafilatura

    monkeypatch.setattr(trafilatura, "extract", lambda *a, **k: None)
    html = (
        b"<html><head><title>Opening hours</title><script>var x = 1;</script></head><body>"
        b"<nav>Menu</nav><div><p>Mon to Fri 9 to 5.</p><p>Closed on Sundays.</p></div>"
        b"<footer>Footer</footer></body></html>"
    )
    page = extract(body=html, content_type="text/html", name="https://shop.example/hours")
    assert page.title == "Opening hours"
    assert page.body == "Mon to Fri 9 to 5.\n\nClosed on Sundays."


def test_markdown_title_from_front_matter_heading_or_name():
    fm = b"---\ntitle: Returns\ntags: [policy]\n---\n# Something else\n\nBody."
    assert extract(body=fm, content_type="text/markdown", name="x.md").title == "Returns"
    plain = extract(body=b"Just text.\n", content_type="text/markdown", name="/kb/gift-cards.md")
    assert (plain.title, plain.body) == ("gift cards", "Just text.")
    text = extract(body=b"Opening hours: 9-5", content_type="text/plain", name="hours.txt")
    assert (text.title, text.body) == ("hours", "Opening hours: 9-5")


def test_empty_and_unknown_content_is_refused():
    with pytest.raises(ExtractError):
        extract(body=b"   ", content_type="text/plain", name="a.txt")
    with pytest.raises(ExtractError):
        extract(body=b"data", content_type="image/png", name="a.png")
    with pytest.raises(ExtractError):
        extract(body=b"not a pdf", content_type="application/pdf", name="a.pdf")


def test_sitemaps_without_entities():
    evil = (
        b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>'
        b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        b"<url><loc>https://a.example/&e;</loc></url><url><loc>https://a.example/b</loc></url>"
        b"</urlset>"
    )
    kind, urls = sitemap_entries(evil)
    assert kind == "urlset"
    assert "root:" not in "".join(urls)
    assert "https://a.example/b" in urls
    with pytest.raises(ExtractError):
        sitemap_entries(b"<html><body>no</body></html>")


def test_names():
    assert content_type_for_name("Guide.PDF") == "application/pdf"
    assert content_type_for_name("notes.docx") == ""
    assert name_of("https://shop.example/help/returns-policy/") == "returns policy"
