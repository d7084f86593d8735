"""A PDF that is small on disk and costly to read: every page points at one shared content
stream of tens of thousands of `Tj` (show text) operators, so pypdf parses the whole stream
again for each page. The shape of an upload that once kept a worker at full CPU for hours."""

from __future__ import annotations

import io

from pypdf import PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject


def bomb_pdf(*, pages: int = 20, operators: int = 32_000) -> bytes:
    writer = PdfWriter()
    font = writer._add_object(
        DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject("/Helvetica"),
            }
        )
    )
    stream = DecodedStreamObject()
    stream.set_data(b"BT /F1 1 Tf " + b"(a) Tj " * operators + b"ET")
    contents = writer._add_object(stream.flate_encode())
    for _ in range(pages):
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
        )
        page[NameObject("/Contents")] = contents
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()
