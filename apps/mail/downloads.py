"""An attachment as a download for staff: always `Content-Disposition: attachment`, a type the
browser will not run (HTML, SVG and scripts go out as application/octet-stream), no sniffing,
and a sandbox policy — a customer's file never becomes a page on GuideDesk's origin."""

from __future__ import annotations

from django.http import FileResponse, Http404

from apps.mail.models import MailAttachment

SAFE_TYPES = frozenset(
    {
        "application/pdf",
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
        "text/plain",
        "text/csv",
    }
)


def attachment_response(attachment: MailAttachment) -> FileResponse:
    if not attachment.file:
        raise Http404("This attachment was not kept.")
    kind = attachment.content_type.split(";")[0].strip().lower()
    response = FileResponse(
        attachment.file.open("rb"),
        as_attachment=True,
        filename=attachment.filename or "attachment",
        content_type=kind if kind in SAFE_TYPES else "application/octet-stream",
    )
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "sandbox; default-src 'none'"
    response["Cache-Control"] = "private, no-store"
    return response
