"""A small local web site for the knowledge import tests: `http.server` in a thread, serving
whatever the test puts into `site.pages` (path -> (content type, body), changeable between
requests) plus redirects (`site.redirects`: path -> Location)."""

from __future__ import annotations

import io
import threading
import time
from http.server import ThreadingHTTPServer
from typing import Self

from pypdf import PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

from tests.support.http_handler import QuietHandler


class FakeSite:
    def __init__(self) -> None:
        self.pages: dict[str, tuple[str, bytes]] = {}
        self.redirects: dict[str, str] = {}
        self.delays: dict[str, float] = {}  # path -> seconds to wait before answering
        self.requests: list[str] = []
        site = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                site.requests.append(self.path)
                if self.path in site.delays:
                    time.sleep(site.delays[self.path])
                if self.path in site.redirects:
                    self.answer(302, Location=site.redirects[self.path])
                    return
                found = site.pages.get(self.path)
                if found is None:
                    self.answer(404)
                    return
                content_type, body = found
                self.answer(200, body, content_type)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False  # a delayed answer does not hold up the teardown
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{path}"

    def html(self, path: str, title: str, main: str) -> None:
        """A page with navigation and footer boilerplate around its main text."""
        body = (
            f"<!doctype html><html><head><title>{title} | Trailhead</title></head><body>"
            "<header><nav><a href='/'>Home</a> <a href='/shop'>Shop all tents</a> "
            "<a href='/help'>Help centre menu</a></nav></header>"
            f"<main><article><h1>{title}</h1>{main}</article></main>"
            "<footer><p>Copyright Trailhead Outfitters. Newsletter sign-up boilerplate.</p>"
            "</footer></body></html>"
        )
        self.pages[path] = ("text/html; charset=utf-8", body.encode())

    def sitemap(self, path: str, paths: list[str]) -> None:
        urls = "".join(f"<url><loc>{self.url(p)}</loc></url>" for p in paths)
        xml = (
            '<?xml version="1.0" encoding="UTF-8"?>'
            f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
        )
        self.pages[path] = ("application/xml", xml.encode())

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def pdf_bytes(title: str, *pages: str) -> bytes:
    """A real PDF with one line of Helvetica text per page (pypdf extracts it back)."""
    writer = PdfWriter()
    for text in pages:
        page = writer.add_blank_page(612, 792)
        font = DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject("/Helvetica"),
            }
        )
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): writer._add_object(font)})}
        )
        stream = DecodedStreamObject()
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream.set_data(f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET".encode("latin-1"))
        page[NameObject("/Contents")] = writer._add_object(stream)
    writer.add_metadata({"/Title": title})
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()
