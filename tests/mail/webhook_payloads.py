"""Provider inbound payloads as each provider documents them, signed as each provider signs them
(Mailgun: HMAC-SHA256 of timestamp + token with the webhook signing key; MailerSend: HMAC-SHA256
of the body in the `Signature` header; Mandrill: base64 HMAC-SHA1 of the URL and the sorted
fields in `X-Mandrill-Signature`; Postmark: HTTP basic auth in the URL it posts to)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from email.message import EmailMessage
from email.utils import make_msgid
from typing import Any

from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils.crypto import get_random_string

from apps.clients.models import Client
from apps.mail.models import InboundVia, MailChannel


def make_channel(
    client: Client, *, via: str = InboundVia.MAILGUN, secret: str = "", **fields: Any
) -> MailChannel:
    return MailChannel.objects.create(
        client=client,
        address=fields.pop("address", f"support-{get_random_string(6).lower()}@shop.example"),
        inbound_via=via,
        inbound_token=get_random_string(40),
        webhook_secret=secret or f"key-{get_random_string(32)}",
        **fields,
    )


def raw_mail(
    *,
    sender: str = "Ana Customer <ana@customer.example>",
    to: str = "support@shop.example",
    subject: str = "Where is my order?",
    text: str = "Hello, where is my order 1001?",
    message_id: str | None = None,
    headers: list[tuple[str, str]] | None = None,
    attachment: tuple[str, str, bytes] | None = None,
) -> EmailMessage:
    mail = EmailMessage()
    for name, value in headers or []:
        mail[name] = value
    mail["From"] = sender
    mail["To"] = to
    mail["Subject"] = subject
    mail["Message-ID"] = message_id or make_msgid(domain="customer.example")
    mail.set_content(text)
    if attachment is not None:
        filename, content_type, content = attachment
        maintype, subtype = content_type.split("/")
        mail.add_attachment(content, maintype=maintype, subtype=subtype, filename=filename)
    return mail


# --- Mailgun ---


def mailgun_signature(key: str, *, timestamp: int | None = None, token: str | None = None) -> dict:
    timestamp = int(time.time()) if timestamp is None else timestamp
    token = token or secrets.token_hex(25)
    signature = hmac.new(key.encode(), f"{timestamp}{token}".encode(), hashlib.sha256).hexdigest()
    return {"timestamp": str(timestamp), "token": token, "signature": signature}


def mailgun_parsed(
    mail: EmailMessage,
    *,
    key: str,
    envelope_sender: str = "ana@customer.example",
    spf: str = "Pass",
    dkim: str = "Pass",
    signature: dict | None = None,
) -> dict[str, Any]:
    """Mailgun's "forward()" route post, fully parsed (multipart/form-data): `message-headers`
    as [[name, value], …] with the X-Mailgun-* results Mailgun adds, attachments as files."""
    headers = [["X-Mailgun-Spf", spf], ["X-Mailgun-Dkim-Check-Result", dkim]]
    headers += [[name, str(value)] for name, value in mail.items()]
    body = mail.get_body(("plain",))
    data: dict[str, Any] = {
        "recipient": str(mail["To"]),
        "sender": envelope_sender,
        "from": str(mail["From"]),
        "subject": str(mail["Subject"]),
        "body-plain": body.get_content() if body is not None else "",
        "stripped-text": body.get_content() if body is not None else "",
        "message-headers": json.dumps(headers),
    }
    files = list(mail.iter_attachments())
    if files:
        data["attachment-count"] = str(len(files))
        for n, part in enumerate(files, start=1):
            data[f"attachment-{n}"] = SimpleUploadedFile(
                part.get_filename() or f"file{n}",
                part.get_content(),
                content_type=part.get_content_type(),
            )
    data.update(signature or mailgun_signature(key))
    return data


def mailgun_raw(
    mail: EmailMessage, *, key: str, envelope_sender: str = "ana@customer.example"
) -> dict[str, str]:
    """Mailgun's raw-MIME forward (`body-mime`), as a form; Mailgun's X-Mailgun-* headers are
    in the MIME it forwards."""
    mail["X-Mailgun-Spf"] = "Pass"
    return {
        "recipient": str(mail["To"]),
        "sender": envelope_sender,
        "body-mime": mail.as_string(),
        **mailgun_signature(key),
    }


# --- MailerSend ---


def mailersend_body(
    mail: EmailMessage, *, envelope_sender: str = "ana@customer.example", spf: str = "+"
) -> bytes:
    """MailerSend's `inbound.message` webhook JSON."""
    payload = {
        "type": "inbound.message",
        "inbound_id": "inb_1",
        "url": "https://example.com/inbound",
        "created_at": "2026-11-29T20:00:00.000000Z",
        "data": {
            "object": "message",
            "id": secrets.token_hex(12),
            "raw": mail.as_string(),
            "created_at": "2026-11-29T20:00:00.000000Z",
            "sender": {"email": envelope_sender},
            "recipients": {"rcptTo": [{"email": str(mail["To"])}]},
            "spf_check": {"code": spf, "value": None},
            "dkim_check": False,
        },
    }
    return json.dumps(payload).encode()


def mailersend_signature(secret: str, body: bytes) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


# --- Postmark ---


def postmark_body(mail: EmailMessage, *, received_spf: str | None = None) -> bytes:
    """Postmark's inbound JSON: the parsed fields, `Headers` with the Return-Path Postmark
    prepends and the `Received-SPF` it adds, and `RawEmail`."""
    headers = [{"Name": "Return-Path", "Value": "<ana@customer.example>"}]
    if received_spf is not None:
        headers.append({"Name": "Received-SPF", "Value": received_spf})
    headers += [{"Name": name, "Value": str(value)} for name, value in mail.items()]
    raw = EmailMessage()
    if received_spf is not None:
        raw["Received-SPF"] = received_spf
    for name, value in mail.items():
        raw[name] = value
    raw.set_content(mail.get_body(("plain",)).get_content())
    payload = {
        "FromFull": {"Email": "ana@customer.example", "Name": "Ana Customer"},
        "ToFull": [{"Email": str(mail["To"]), "Name": ""}],
        "Subject": str(mail["Subject"]),
        "MessageID": secrets.token_hex(8),
        "TextBody": mail.get_body(("plain",)).get_content(),
        "Headers": headers,
        "RawEmail": raw.as_string(),
        "OriginalRecipient": str(mail["To"]),
    }
    return json.dumps(payload).encode()


def basic_auth(credentials: str) -> str:
    return "Basic " + base64.b64encode(credentials.encode()).decode()


# --- Mandrill ---


def mandrill_post(mail: EmailMessage, *, key: str, url: str) -> tuple[dict[str, str], str]:
    """Mandrill's inbound webhook form (`mandrill_events`) and its X-Mandrill-Signature."""
    events = [
        {
            "event": "inbound",
            "ts": int(time.time()),
            "msg": {
                "raw_msg": mail.as_string(),
                "email": str(mail["To"]),
                "from_email": "ana@customer.example",
                "dkim": {"signed": False, "valid": False},
                "spf": {"result": "pass", "detail": ""},
            },
        }
    ]
    data = {"mandrill_events": json.dumps(events)}
    signed = url + "".join(k + data[k] for k in sorted(data))
    signature = base64.b64encode(
        hmac.new(key.encode(), signed.encode(), hashlib.sha1).digest()
    ).decode()
    return data, signature
