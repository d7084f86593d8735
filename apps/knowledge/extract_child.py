"""Reading a PDF or an HTML page: the CPU-heavy part of extraction, written to run in a child
process (`python -m apps.knowledge.extract_child KIND CHARSET CPU_SECONDS MEMORY_BYTES`, the
document on stdin, one JSON object on stdout) under hard limits; `apps/knowledge/sandbox.py`
starts it, and `apps/knowledge/extract.py` calls the readers in-process for small HTML.

No Django here, and each reader imports its library only when it runs, so the child starts
fast (pypdf for a PDF, trafilatura for HTML). Its limits are set first thing, before any
library is imported: RLIMIT_CPU (SIGXCPU at the limit, SIGKILL a second later), RLIMIT_AS
(allocations fail: a MemoryError ends the child with MEMORY_EXIT) and no core files. The
parent adds a wall-clock kill and a cap on the bytes it reads back.

Messages are not translated here: a failure is a code (`ReadError.code`) with a detail, and the
parent turns it into a translated message."""

from __future__ import annotations

import json
import sys
from typing import Any

# Pages of one PDF read at most: text extraction is CPU work no network deadline interrupts.
MAX_PDF_PAGES = 500
MEMORY_EXIT = 3  # the child ran out of the memory it may use
USAGE_EXIT = 2
_BLOCK_TAGS = ("p", "div", "li", "br", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section")
_BOILERPLATE_TAGS = ("script", "style", "noscript", "nav", "header", "footer", "aside", "form")
KINDS = ("pdf", "html")
_NO_ADDRESS_SPACE = ("failed to map segment", "Cannot allocate memory")


class ReadError(Exception):
    """The document cannot be read: `code` is "empty", "bad_html" or "bad_pdf"."""

    def __init__(self, code: str, detail: str = "") -> None:
        super().__init__(code, detail)
        self.code = code
        self.detail = detail


def decode(body: bytes, charset: str = "") -> str:
    for encoding in (charset, "utf-8"):
        if encoding:
            try:
                return body.decode(encoding)
            except (LookupError, UnicodeDecodeError):
                continue
    return body.decode("utf-8", errors="replace")


def without_title_heading(body: str, title: str) -> str:
    """The body without a leading `# <title>` line (the article's title says it already)."""
    lines = body.lstrip().split("\n", 1)
    if lines and lines[0].startswith("# ") and lines[0][2:].strip() == title.strip():
        return lines[1].strip() if len(lines) > 1 else ""
    return body.strip()


def read_pdf(data: bytes) -> dict[str, Any]:
    """{"title": the metadata's title or "", "pages": the text of each page (the first
    MAX_PDF_PAGES)}. Raises ReadError("bad_pdf", why)."""
    import io

    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        pages = list(reader.pages)[:MAX_PDF_PAGES]
        texts = [(page.extract_text() or "").strip() for page in pages]
        title = (reader.metadata.title if reader.metadata else None) or ""
    except (PyPdfError, ValueError, KeyError, TypeError, OSError) as exc:
        raise ReadError("bad_pdf", str(exc)) from exc
    return {"title": str(title).strip(), "pages": texts}


def read_html(html: str) -> dict[str, Any]:
    """{"title": the page's title or "", "body": its main text as Markdown}: trafilatura's
    main text after the boilerplate is dropped, or the body's plain text when it finds none.
    Raises ReadError("empty" | "bad_html")."""
    import lxml.etree
    import lxml.html
    import trafilatura

    if not html.strip():
        raise ReadError("empty")
    try:
        tree = lxml.html.fromstring(html)
    except (lxml.etree.ParserError, ValueError) as exc:
        raise ReadError("bad_html", str(exc)) from exc
    title = ""
    metadata = trafilatura.extract_metadata(tree)
    if metadata is not None and metadata.title:
        title = metadata.title
    if not title:
        found = tree.findtext(".//title") or tree.findtext(".//h1") or ""
        title = " ".join(found.split())
    _drop_boilerplate(tree)
    text = trafilatura.extract(
        tree,
        output_format="markdown",
        include_links=False,
        include_comments=False,
        include_images=False,
        include_tables=True,
    )
    body = without_title_heading(text, title) if text else _plain_text(tree)
    return {"title": title, "body": body}


def _drop_boilerplate(tree: Any) -> None:
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


def _plain_text(tree: Any) -> str:
    """The body's text without scripts, navigation, headers and footers: the fallback."""
    for element in tree.iter(*_BLOCK_TAGS):
        element.tail = "\n" + (element.tail or "")
    body = tree.find(".//body")
    text = (body if body is not None else tree).text_content()
    lines = (" ".join(line.split()) for line in text.splitlines())
    return "\n\n".join(line for line in lines if line)


def read(kind: str, data: bytes, charset: str = "") -> dict[str, Any]:
    """The reader of `kind` ("pdf" or "html") applied to `data`."""
    if kind == "pdf":
        return read_pdf(data)
    return read_html(decode(data, charset))


def set_limits(cpu_seconds: int, memory_bytes: int) -> None:
    """Hard limits on this process (where the platform has them; without `resource` the
    parent's wall-clock kill still holds)."""
    try:
        import resource
    except ImportError:  # not a POSIX platform
        return
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if cpu_seconds > 0:
        # SIGXCPU at the soft limit ends the process (nothing here handles it); the hard
        # limit's SIGKILL a second later ends it even if something did.
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    if memory_bytes > 0:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))


def main(argv: list[str]) -> int:
    if len(argv) != 4 or argv[0] not in KINDS:
        sys.stderr.write("usage: extract_child pdf|html CHARSET CPU_SECONDS MEMORY_BYTES\n")
        return USAGE_EXIT
    kind, charset = argv[0], argv[1]
    set_limits(int(argv[2]), int(argv[3]))
    try:
        data = sys.stdin.buffer.read()
        try:
            result: dict[str, Any] = {"ok": True, **read(kind, data, charset)}
        except ReadError as exc:
            result = {"ok": False, "code": exc.code, "detail": exc.detail[:500]}
        out = json.dumps(result, ensure_ascii=False).encode("utf-8")
    except MemoryError:
        return MEMORY_EXIT
    except ImportError as exc:  # a parser's shared library found no address space to map into
        if any(sign in str(exc) for sign in _NO_ADDRESS_SPACE):
            return MEMORY_EXIT
        raise
    sys.stdout.buffer.write(out)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
