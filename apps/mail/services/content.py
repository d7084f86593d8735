"""What of an inbound e-mail the turn reads: the customer's new words (quoted history and
signature stripped, multilingual), never raw HTML; and the attachments, kept for staff within the
channel's limits and named to the model at most as "[attachment: name (type, size)]"."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import lxml.html
from django.core.files.base import ContentFile
from django.utils.translation import gettext
from mailparser_reply.constants import MAIL_LANGUAGES
from mailparser_reply.parser import EmailMessage as ReplyText

from apps.mail.models import MailAttachment

if TYPE_CHECKING:
    from anymail.inbound import AnymailInboundMessage

    from apps.mail.models import MailChannel, MailMessage

# The customer's text the parser and the model ever look at: a mail body past this is cut
# (the full text stays on the MailMessage for staff).
MAX_PARSE_CHARS = 100_000
# Attachments kept: images, PDF, plain text and the common office documents. Anything else (an
# executable, an archive, HTML) is recorded with the reason and not stored.
ALLOWED_TYPES = {
    "application/pdf",
    "text/plain",
    "text/csv",
    "application/msword",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "application/vnd.ms-excel",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "application/vnd.ms-powerpoint",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "application/vnd.oasis.opendocument.text",
    "application/vnd.oasis.opendocument.spreadsheet",
}
ALLOWED_IMAGE_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp", "image/heic"}
MAX_ATTACHMENTS = 20  # per e-mail; past that the rest are recorded as refused
_QUOTED = re.compile(r"^\s*>")
_ATTRIBUTION = re.compile(r":\s*$")


@functools.cache
def _languages() -> list[str]:
    return [code for code in MAIL_LANGUAGES if len(code) == 2]


def html_to_text(html: str) -> str:
    """The readable text of an HTML body (scripts, styles and quoted blocks left out)."""
    if not html.strip():
        return ""
    try:
        root = lxml.html.fromstring(html[:MAX_PARSE_CHARS])
    except (ValueError, lxml.etree.ParserError):
        return ""
    for bad in root.xpath("//script|//style|//head|//blockquote"):
        bad.drop_tree()
    for br in root.xpath("//br"):
        br.tail = "\n" + (br.tail or "")
    for block in root.xpath("//p|//div|//li|//tr|//h1|//h2|//h3"):
        block.tail = "\n" + (block.tail or "")
    text = root.text_content()
    return re.sub(r"\n{3,}", "\n\n", "\n".join(line.strip() for line in text.splitlines())).strip()


def _without_trailing_quote(text: str) -> str:
    """Cut a quoted block the parser did not recognise (an attribution line it has no pattern
    for, such as Gmail's Spanish "El …, … escribió:"): the first run of "> " lines to the end,
    with the line before it when that line ends with a colon."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if _QUOTED.match(line) and all(
            _QUOTED.match(rest) or not rest.strip() for rest in lines[index:]
        ):
            head = lines[:index]
            while head and not head[-1].strip():
                head.pop()
            if head and _ATTRIBUTION.search(head[-1]):
                head.pop()
            return "\n".join(head).strip()
    return text


def new_text(*, text: str, html: str) -> str:
    """The customer's new words: the plain-text part (or the HTML's text) without the quoted
    history and the signature. '' when nothing new is left."""
    body = (text or "").strip() or html_to_text(html or "")
    body = body[:MAX_PARSE_CHARS].replace("\x00", "")
    if not body:
        return ""
    parsed = ReplyText(text=body, languages=list(_languages()), keep_hyphen_lists=True).read()
    latest = parsed.replies[0].body if parsed.replies else body
    return _without_trailing_quote(latest).strip()


@dataclass(frozen=True)
class AttachmentSeen:
    filename: str
    content_type: str
    size: int
    kept: bool

    def label(self) -> str:
        """How the customer message names it (data for the model, never its content)."""
        return f"[attachment: {self.filename} ({self.content_type}, {_size(self.size)})]"


def _size(size: int) -> str:
    if size >= 1024 * 1024:
        return f"{size / (1024 * 1024):.1f} MB"
    if size >= 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size} B"


def _refusal(channel: MailChannel, content_type: str, size: int, index: int) -> str:
    if index >= MAX_ATTACHMENTS:
        return gettext("More than %(count)d attachments in one e-mail.") % {
            "count": MAX_ATTACHMENTS
        }
    if size > channel.max_attachment_bytes:
        return gettext("Larger than this channel's limit of %(size)s.") % {
            "size": _size(channel.max_attachment_bytes)
        }
    if content_type not in ALLOWED_TYPES and content_type not in ALLOWED_IMAGE_TYPES:
        return gettext("A file type that is not accepted (%(type)s).") % {"type": content_type}
    return ""


def attachments_store(
    *, channel: MailChannel, mail_row: MailMessage, mail: AnymailInboundMessage
) -> list[AttachmentSeen]:
    """Record every attachment of the e-mail on `mail_row`; store the accepted ones."""
    seen: list[AttachmentSeen] = []
    parts = [*mail.attachments, *[p for p in mail.inlines if p.get_filename()]]
    for index, part in enumerate(parts):
        filename = (part.get_filename() or "attachment").replace("/", "_").replace("\\", "_")
        filename = filename.strip()[:200] or "attachment"
        content_type = part.get_content_type().lower()[:255]
        content = part.get_content_bytes() or b""
        size = len(content)
        refused = _refusal(channel, content_type, size, index)
        row = MailAttachment(
            client_id=mail_row.client_id,
            mail=mail_row,
            filename=filename,
            content_type=content_type,
            size=size,
            refused=refused[:200],
        )
        if not refused:
            row.file.save(filename, ContentFile(content), save=False)
        row.save()
        seen.append(AttachmentSeen(filename, content_type, size, kept=not refused))
    return seen
