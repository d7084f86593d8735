"""Mail that must never be answered: auto-replies, bounces, mailing lists and our own mail
coming back (docs/email.md "Loops, bounces and floods").

Pure reading of the headers (and, for a bounce, the delivery report's parts): no query here.
Answering any of these could start a mail loop between two robots, or spam a list."""

from __future__ import annotations

import re
from email.message import Message as EmailPart
from email.utils import getaddresses

from apps.mail.models import Disposition

# RFC 3834: anything but "no" is an automatic message.
_AUTO_SUBMITTED_HUMAN = "no"
_PRECEDENCE_AUTO = {"bulk", "junk", "list", "auto_reply", "auto-reply"}
_SUPPRESS_AUTO = {"all", "oof"}
_BOUNCE_LOCALPARTS = {"mailer-daemon", "postmaster"}
_MSGID = re.compile(r"<([^<>\s]+)>")


def header(mail: EmailPart, name: str) -> str:
    value = mail.get(name)
    return str(value).strip() if value is not None else ""


def message_ids(value: str) -> list[str]:
    """The Message-IDs in a header (`In-Reply-To`, `References`), without brackets, in order.
    A bare id with no brackets (some clients) counts as one."""
    found = _MSGID.findall(value or "")
    if not found and value.strip() and " " not in value.strip():
        found = [value.strip().strip("<>")]
    return found


def is_auto_reply(mail: EmailPart) -> bool:
    auto = header(mail, "Auto-Submitted").lower()
    if auto and auto.split(";")[0].strip() != _AUTO_SUBMITTED_HUMAN:
        return True
    if header(mail, "X-Autoreply") or header(mail, "X-Autorespond"):
        return True
    if header(mail, "Precedence").lower() in _PRECEDENCE_AUTO:
        return True
    suppress = {p.strip().lower() for p in header(mail, "X-Auto-Response-Suppress").split(",")}
    return bool(suppress & _SUPPRESS_AUTO)


def is_bounce(mail: EmailPart, from_address: str) -> bool:
    if not from_address:
        return True  # no sender (the null reverse-path of a delivery report): nobody to answer
    if header(mail, "Return-Path").replace(" ", "") == "<>":
        return True
    if from_address.split("@", 1)[0].lower() in _BOUNCE_LOCALPARTS:
        return True
    return (
        mail.get_content_type() == "multipart/report"
        and str(mail.get_param("report-type") or "").lower() == "delivery-status"
    )


def is_mailing_list(mail: EmailPart) -> bool:
    if header(mail, "List-Id"):
        return True
    return bool(header(mail, "List-Unsubscribe")) and header(mail, "Precedence").lower() == "list"


def never_answer(
    mail: EmailPart, *, from_address: str, channel_address: str, ours: bool
) -> Disposition | None:
    """Why this e-mail must not be answered, or None. `ours`: its Message-ID is one we
    generated (our own reply came back)."""
    if ours or from_address.lower() == channel_address.lower():
        return Disposition.OWN_MAIL
    if is_bounce(mail, from_address):
        return Disposition.BOUNCE
    if is_mailing_list(mail):  # before the auto-reply test: a list mail says Precedence: list
        return Disposition.MAILING_LIST
    if is_auto_reply(mail):
        return Disposition.AUTO_REPLY
    return None


def bounced_message_ids(mail: EmailPart) -> list[str]:
    """The Message-IDs a bounce is about: its own In-Reply-To/References, then those of the
    returned message or its headers inside a delivery report (RFC 3464)."""
    ids = message_ids(header(mail, "In-Reply-To")) + message_ids(header(mail, "References"))
    parts = list(mail.walk()) if mail.is_multipart() else []
    for part in parts[:50]:  # a report has a handful of parts; a crafted one gets no more
        kind = part.get_content_type()
        if kind == "message/rfc822":
            payload = part.get_payload()
            inner = payload[0] if isinstance(payload, list) and payload else None
            if isinstance(inner, EmailPart):
                ids += message_ids(header(inner, "Message-ID"))
        elif kind == "text/rfc822-headers":
            raw = part.get_payload(decode=True)
            text = raw if isinstance(raw, bytes) else b""
            match = re.search(rb"^Message-ID:\s*(<[^>]+>)", text, re.IGNORECASE | re.MULTILINE)
            if match:
                ids += message_ids(match.group(1).decode("ascii", "replace"))
    return ids


def first_address(value: str) -> tuple[str, str]:
    """(name, address) of the first address in a header value."""
    pairs = getaddresses([value or ""])
    return pairs[0] if pairs else ("", "")
