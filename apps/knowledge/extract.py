"""Turning a fetched page or an uploaded file into an article's title and Markdown body.

- HTML: the main text as Markdown by trafilatura (navigation, footers and other boilerplate
  left out; no links), the title from the page's metadata; a plain lxml text of the body when
  trafilatura finds nothing.
- PDF: the text of each page (pypdf), one `## Page n` section per page; the title from the
  document's metadata or the file name.
- Markdown: kept as it is; the title from YAML front matter, the first `# ` heading or the file
  name.
- Plain text: as it is; the title from the file name.
- Sitemaps: `urlset` (pages) and `sitemapindex` (more sitemaps), parsed without entities or
  network access; a text sitemap (`text/plain`) lists one URL per line."""

from __future__ import annotations

import io
import logging
import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

import lxml.etree
import lxml.html
import trafilatura
import yaml
from django.utils.translation import gettext as _
from markdown_it import MarkdownIt
from pypdf import PdfReader
from pypdf.errors import PyPdfError

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
# Pages of one PDF read at most: text extraction is CPU work no network deadline interrupts.
MAX_PDF_PAGES = 500
_FRONT_MATTER = re.compile(r"\A---\s*\n(.*?)\n---\s*\n", re.DOTALL)
_BLOCK_TAGS = ("p", "div", "li", "br", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section")
_BOILERPLATE_TAGS = ("script", "style", "noscript", "nav", "header", "footer", "aside", "form")


class ExtractError(Exception):
    """Nothing usable in this page or file."""


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


def _decode(body: bytes, charset: str = "") -> str:
    for encoding in (charset, "utf-8"):
        if encoding:
            try:
                return body.decode(encoding)
            except (LookupError, UnicodeDecodeError):
                continue
    return body.decode("utf-8", errors="replace")


def _without_title_heading(body: str, title: str) -> str:
    """The body without a leading `# <title>` line (the article's title says it already)."""
    lines = body.lstrip().split("\n", 1)
    if lines and lines[0].startswith("# ") and lines[0][2:].strip() == title.strip():
        return lines[1].strip() if len(lines) > 1 else ""
    return body.strip()


def extract(*, body: bytes, content_type: str, name: str, charset: str = "") -> Page:
    """The title and Markdown body of a page or file of `content_type`; `name` is its URL or
    file name (for a title of last resort). Raises ExtractError when there is no text."""
    if content_type in HTML_TYPES:
        page = html_page(_decode(body, charset), name=name)
    elif content_type in PDF_TYPES:
        page = pdf_page(body, name=name)
    elif content_type in MARKDOWN_TYPES:
        page = markdown_page(_decode(body, charset), name=name)
    elif content_type in TEXT_TYPES:
        page = Page(title=name_of(name), body=_decode(body, charset).strip())
    else:
        raise ExtractError(_("Content type %(type)s is not imported.") % {"type": content_type})
    if not page.body.strip():
        raise ExtractError(_("No text was found."))
    return Page(title=page.title.strip()[:TITLE_MAX] or name_of(name), body=page.body.strip())


def html_page(html: str, *, name: str) -> Page:
    if not html.strip():
        raise ExtractError(_("No text was found."))
    try:
        tree = lxml.html.fromstring(html)
    except (lxml.etree.ParserError, ValueError) as exc:
        raise ExtractError(_("The page is not readable HTML.")) from exc
    title = ""
    metadata = trafilatura.extract_metadata(tree)
    if metadata is not None and metadata.title:
        title = metadata.title
    if not title:
        found = tree.findtext(".//title") or tree.findtext(".//h1") or ""
        title = " ".join(found.split())
    title = title or name_of(name)
    _drop_boilerplate(tree)
    text = trafilatura.extract(
        tree,
        output_format="markdown",
        include_links=False,
        include_comments=False,
        include_images=False,
        include_tables=True,
    )
    body = _without_title_heading(text, title) if text else _plain_text(tree)
    return Page(title=title, body=body)


def _drop_boilerplate(tree: lxml.html.HtmlElement) -> None:
    """Remove what is navigation or page furniture by its own markup (<nav>, <footer>, a
    page-level <header> …): on a short page trafilatura would otherwise keep the whole body.
    A <header> inside <main> or <article> holds the article's own title and stays."""
    for element in list(tree.iter(*_BOILERPLATE_TAGS)):
        if element.tag == "header" and any(
            ancestor.tag in ("main", "article") for ancestor in element.iterancestors()
        ):
            continue
        if element.getparent() is not None:
            element.drop_tree()


def _plain_text(tree: lxml.html.HtmlElement) -> str:
    """The body's text without scripts, navigation, headers and footers: the fallback."""
    for element in tree.iter(*_BLOCK_TAGS):
        element.tail = "\n" + (element.tail or "")
    body = tree.find(".//body")
    text = (body if body is not None else tree).text_content()
    lines = (" ".join(line.split()) for line in text.splitlines())
    return "\n\n".join(line for line in lines if line)


def pdf_page(data: bytes, *, name: str) -> Page:
    try:
        reader = PdfReader(io.BytesIO(data))
        pages = list(reader.pages)[:MAX_PDF_PAGES]
        texts = [(page.extract_text() or "").strip() for page in pages]
        title = (reader.metadata.title if reader.metadata else None) or ""
    except (PyPdfError, ValueError, KeyError, TypeError, OSError) as exc:
        raise ExtractError(_("The PDF could not be read (%(error)s).") % {"error": exc}) from exc
    if len(texts) == 1:
        body = texts[0]
    else:
        body = "\n\n".join(
            f"## {_('Page %(number)s') % {'number': n}}\n\n{text}"
            for n, text in enumerate(texts, start=1)
            if text
        )
    return Page(title=str(title).strip() or name_of(name), body=body)


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


def sitemap_entries(body: bytes) -> tuple[str, list[str]]:
    """("urlset", page URLs) or ("sitemapindex", sitemap URLs). Raises ExtractError."""
    parser = lxml.etree.XMLParser(
        resolve_entities=False, no_network=True, huge_tree=False, remove_comments=True
    )
    try:
        root = lxml.etree.fromstring(body, parser=parser)
    except lxml.etree.XMLSyntaxError as exc:
        raise ExtractError(_("The sitemap is not valid XML.")) from exc
    kind = lxml.etree.QName(root).localname
    if kind == "urlset":
        locs = root.iterfind("{*}url/{*}loc")
    elif kind == "sitemapindex":
        locs = root.iterfind("{*}sitemap/{*}loc")
    else:
        raise ExtractError(_("This is not a sitemap (<urlset> or <sitemapindex>)."))
    urls = [(loc.text or "").strip() for loc in locs]
    return kind, list(dict.fromkeys(u for u in urls if u))


def text_sitemap_entries(text: str) -> list[str]:
    """The page URLs of a text sitemap (one http(s) URL per line, as the protocol allows)."""
    lines = (line.strip() for line in text.splitlines())
    return list(dict.fromkeys(u for u in lines if u.startswith(("http://", "https://"))))
