"""Turning a fetched page or an uploaded file into an article's title and Markdown body.

- HTML: the main text as Markdown by trafilatura (navigation, footers and other boilerplate
  left out; no links), the title from the page's metadata; a plain lxml text of the body when
  trafilatura finds nothing. A page over KNOWLEDGE_EXTRACT_HTML_INLINE_BYTES is read in a
  child process with hard limits (apps/knowledge/sandbox.py), a smaller one in this process.
- PDF: the text of each page (pypdf), one `## Page n` section per page; the title from the
  document's metadata or the file name. Always read in a child process with hard limits.
- Markdown: kept as it is; the title from YAML front matter, the first `# ` heading or the file
  name.
- Plain text: as it is; the title from the file name.
- Sitemaps: `urlset` (pages) and `sitemapindex` (more sitemaps), parsed without entities or
  network access; a text sitemap (`text/plain`) lists one URL per line."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import unquote, urlsplit

import lxml.etree
import yaml
from django.conf import settings
from django.utils.translation import gettext as _
from markdown_it import MarkdownIt

from apps.knowledge import extract_child, sandbox

logger = logging.getLogger(__name__)

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
PDF_TYPES = frozenset({"application/pdf"})
MARKDOWN_TYPES = frozenset({"text/markdown", "text/x-markdown"})
TEXT_TYPES = frozenset({"text/plain"})
SITEMAP_TYPES = frozenset({"application/xml", "text/xml"})
PAGE_TYPES = HTML_TYPES | PDF_TYPES | MARKDOWN_TYPES | TEXT_TYPES

_BY_SUFFIX = {
    ".html": "text/html",
    ".htm": "text/html",
    ".pdf": "application/pdf",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".txt": "text/plain",
    ".text": "text/plain",
}
TITLE_MAX = 300
MAX_PDF_PAGES = extract_child.MAX_PDF_PAGES
_FRONT_MATTER = re.compile(r"\A---\s*\n(.*?)\n---\s*\n", re.DOTALL)


class ExtractError(Exception):
    """Nothing usable in this page or file (the message, translated, says why)."""


@dataclass(frozen=True)
class Page:
    title: str
    body: str  # Markdown


def content_type_for_name(name: str) -> str:
    """The content type an uploaded file is read as (by its suffix), or ""."""
    return _BY_SUFFIX.get(PurePosixPath(name.lower()).suffix, "")


def name_of(url_or_name: str) -> str:
    """A readable title from a URL's last path segment or a file name: "returns-policy"."""
    path = unquote(urlsplit(url_or_name).path or url_or_name).rstrip("/")
    stem = PurePosixPath(path).stem if path else ""
    return (stem.replace("-", " ").replace("_", " ").strip() or url_or_name)[:TITLE_MAX]


_decode = extract_child.decode
_without_title_heading = extract_child.without_title_heading


def extract(
    *,
    body: bytes,
    content_type: str,
    name: str,
    charset: str = "",
    still_wanted: Callable[[], bool] | None = None,
) -> Page:
    """The title and Markdown body of a page or file of `content_type`; `name` is its URL or
    file name (for a title of last resort). Raises ExtractError when there is no text (or a
    child's limit was hit), ExtractionStopped when `still_wanted()` turned false while a child
    process read it."""
    if content_type in HTML_TYPES:
        page = html_page(body, charset=charset, name=name, still_wanted=still_wanted)
    elif content_type in PDF_TYPES:
        page = pdf_page(body, name=name, still_wanted=still_wanted)
    elif content_type in MARKDOWN_TYPES:
        page = markdown_page(_decode(body, charset), name=name)
    elif content_type in TEXT_TYPES:
        page = Page(title=name_of(name), body=_decode(body, charset).strip())
    else:
        raise ExtractError(_("Content type %(type)s is not imported.") % {"type": content_type})
    if not page.body.strip():
        raise ExtractError(_("No text was found."))
    return Page(title=page.title.strip()[:TITLE_MAX] or name_of(name), body=page.body.strip())


def _read(
    kind: str, data: bytes, *, charset: str, child: bool, still_wanted: Callable[[], bool] | None
) -> dict[str, Any]:
    """The reader's result, read in a child process or (`child` false) in this one."""
    try:
        if not child:
            return extract_child.read(kind, data, charset)
        result = sandbox.read_in_child(kind, data, charset=charset, still_wanted=still_wanted)
    except extract_child.ReadError as exc:
        raise _read_error(exc.code, exc.detail) from exc
    except sandbox.ReaderError as exc:
        raise ExtractError(str(exc)) from exc
    if not result.get("ok"):
        raise _read_error(str(result.get("code", "")), str(result.get("detail", "")))
    return result


def _read_error(code: str, detail: str) -> ExtractError:
    if code == "bad_html":
        return ExtractError(_("The page is not readable HTML."))
    if code == "bad_pdf":
        return ExtractError(_("The PDF could not be read (%(error)s).") % {"error": detail})
    return ExtractError(_("No text was found."))


def html_page(
    body: bytes, *, name: str, charset: str = "", still_wanted: Callable[[], bool] | None = None
) -> Page:
    """A large page is read in a child process; a small one here, where starting a child
    would cost more than reading it."""
    child = len(body) > int(settings.KNOWLEDGE_EXTRACT_HTML_INLINE_BYTES)
    result = _read("html", body, charset=charset, child=child, still_wanted=still_wanted)
    return Page(title=str(result.get("title") or "") or name_of(name), body=str(result["body"]))


def pdf_page(data: bytes, *, name: str, still_wanted: Callable[[], bool] | None = None) -> Page:
    result = _read("pdf", data, charset="", child=True, still_wanted=still_wanted)
    texts = [str(text) for text in result["pages"]]
    if len(texts) == 1:
        body = texts[0]
    else:
        body = "\n\n".join(
            f"## {_('Page %(number)s') % {'number': n}}\n\n{text}"
            for n, text in enumerate(texts, start=1)
            if text
        )
    return Page(title=str(result.get("title") or "") or name_of(name), body=body)


def markdown_page(text: str, *, name: str) -> Page:
    title = ""
    front = _FRONT_MATTER.match(text)
    if front:
        try:
            meta = yaml.safe_load(front.group(1))
        except yaml.YAMLError:
            meta = None
        if isinstance(meta, dict) and isinstance(meta.get("title"), str):
            title = meta["title"]
        text = text[front.end() :]
    if not title:
        tokens = MarkdownIt().parse(text)
        for i, token in enumerate(tokens):
            if token.type == "heading_open" and token.tag == "h1" and i + 1 < len(tokens):
                title = tokens[i + 1].content
                break
    title = title or name_of(name)
    return Page(title=title, body=_without_title_heading(text, title))


# A sitemap's root element → where its entries' addresses are.
_SITEMAP_ENTRIES = {"urlset": "{*}url/{*}loc", "sitemapindex": "{*}sitemap/{*}loc"}


def sitemap_entries(body: bytes) -> tuple[str, list[str]]:
    """("urlset", page URLs) or ("sitemapindex", sitemap URLs). Raises ExtractError."""
    parser = lxml.etree.XMLParser(
        resolve_entities=False, no_network=True, huge_tree=False, remove_comments=True
    )
    try:
        root = lxml.etree.fromstring(body, parser=parser)
    except lxml.etree.XMLSyntaxError as exc:
        raise ExtractError(_("The sitemap is not valid XML.")) from exc
    name = lxml.etree.QName(root).localname
    entries = _SITEMAP_ENTRIES.get(name)
    if entries is None:
        raise ExtractError(_("This is not a sitemap (<urlset> or <sitemapindex>)."))
    urls = [(loc.text or "").strip() for loc in root.iterfind(entries)]
    return name, list(dict.fromkeys(u for u in urls if u))


def text_sitemap_entries(text: str) -> list[str]:
    """The page URLs of a text sitemap (one http(s) URL per line, as the protocol allows)."""
    lines = (line.strip() for line in text.splitlines())
    return list(dict.fromkeys(u for u in lines if u.startswith(("http://", "https://"))))
