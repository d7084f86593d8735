"""An export as the file a person takes away: everything held about the customer as JSON, or
the same as a readable HTML page. The API, the admin and `manage.py privacy_export` hand out
the same text, and the API and the admin the same file name, so a file says where it came from
whichever way it was asked for."""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpResponse

from apps.clients.models import Client
from apps.privacy.services import ExportResult, subject_export_html

# The formats of an export: its file extension → its media type.
EXPORT_MEDIA_TYPES = {"json": "application/json", "html": "text/html"}


def export_text(document: dict[str, Any], fmt: str) -> str:
    """The export `document` as the text of a `fmt` file (`json` or `html`)."""
    if fmt == "html":
        return subject_export_html(document)
    return json.dumps(document, ensure_ascii=False, indent=2)


def export_download(*, client: Client, result: ExportResult, fmt: str) -> HttpResponse:
    """A recorded export as an attachment named after the client and the record."""
    assert result.request is not None, "a dry run has no file"
    name = f"customer-data-{client.slug}-{result.request.public_id.hex[:8]}"
    response = HttpResponse(
        export_text(result.document, fmt),
        content_type=f"{EXPORT_MEDIA_TYPES[fmt]}; charset=utf-8",
    )
    response["Content-Disposition"] = f'attachment; filename="{name}.{fmt}"'
    return response
