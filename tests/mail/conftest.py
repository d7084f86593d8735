"""The e-mail channel's fixtures: a real SMTP sink (aiosmtpd) the replies go to, a
`mail_channel` factory, e-mails as a provider delivers them, and the reasoning tests' shop (a real
OpenAI-compatible server and a real webhook tool server)."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Iterator
from email import message_from_bytes, policy
from email.message import EmailMessage
from email.utils import make_msgid
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from anymail.inbound import AnymailInboundMessage

from apps.clients.models import Client
from apps.mail.models import InboundVia, MailChannel, MailMessage
from apps.mail.services.inbound import mail_receive
from apps.platform.local_server import free_port
from tests.support.shop import make_shop

SUPPORT = "support@shop.example"
CUSTOMER = "ana@customer.example"


class _Sink:
    """aiosmtpd's handler: keeps every message it is given and wakes whoever waits for one."""

    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        self.envelopes: list[tuple[str, list[str]]] = []
        self.changed = threading.Condition()

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        parsed = message_from_bytes(envelope.content, policy=policy.default)
        with self.changed:
            self.messages.append(parsed)
            self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
            self.changed.notify_all()
        return "250 OK"


class SMTPSink:
    """A running SMTP server on a free local port; `wait(n)` blocks until n messages came."""

    def __init__(self, handler: _Sink, port: int) -> None:
        self.handler = handler
        self.port = port

    @property
    def messages(self) -> list[EmailMessage]:
        return list(self.handler.messages)

    def to(self, address: str) -> list[EmailMessage]:
        return [m for m in self.messages if address in str(m.get("To", ""))]

    def wait(self, count: int, *, to: str = CUSTOMER, timeout: float = 10.0) -> list[EmailMessage]:
        with self.handler.changed:
            self.handler.changed.wait_for(lambda: len(self.to(to)) >= count, timeout=timeout)
        return self.to(to)

    def reset(self) -> None:
        with self.handler.changed:
            self.handler.messages.clear()
            self.handler.envelopes.clear()


@pytest.fixture(scope="session")
def _smtp_server() -> Iterator[SMTPSink]:
    handler = _Sink()
    port = free_port()
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield SMTPSink(handler, port)
    finally:
        controller.stop()


@pytest.fixture
def smtp_sink(_smtp_server: SMTPSink, settings: Any) -> Iterator[SMTPSink]:
    """Django's SMTP backend pointed at the sink; the sink emptied before and after."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST = "127.0.0.1"
    settings.EMAIL_PORT = _smtp_server.port
    settings.EMAIL_HOST_USER = ""
    settings.EMAIL_HOST_PASSWORD = ""
    settings.EMAIL_USE_TLS = False
    settings.EMAIL_USE_SSL = False
    _smtp_server.reset()
    yield _smtp_server
    _smtp_server.reset()


@pytest.fixture(autouse=True)
def _media(settings: Any, tmp_path: Any) -> None:
    """Attachments are written under the test's own folder."""
    settings.MEDIA_ROOT = str(tmp_path / "media")


@pytest.fixture
def mail_channel(db) -> Callable[..., MailChannel]:
    """`mail_channel(client, address=…, **fields)` → a MailChannel."""

    def make(client: Client, address: str = SUPPORT, **fields: Any) -> MailChannel:
        values: dict[str, Any] = {
            "display_name": "Trail Shop Support",
            "inbound_via": InboundVia.MAILGUN,
            "inbound_token": secrets.token_urlsafe(24),
        }
        return MailChannel.objects.create(client=client, address=address, **(values | fields))

    return make


def email(
    text: str = "",
    *,
    sender: str = CUSTOMER,
    to: str = SUPPORT,
    subject: str = "Order question",
    message_id: str | None = None,
    in_reply_to: str = "",
    references: str = "",
    html: str = "",
    headers: dict[str, str] | None = None,
    attachments: list[tuple[str, str, bytes]] = (),  # type: ignore[assignment]
) -> AnymailInboundMessage:
    """An e-mail as a provider hands it over (parsed from its raw MIME, as the transports do)."""
    msg = EmailMessage()
    msg["From"] = f"Ana García <{sender}>"
    msg["To"] = to
    msg["Subject"] = subject
    msg["Message-ID"] = message_id or make_msgid(domain="customer.example")
    if in_reply_to:
        msg["In-Reply-To"] = in_reply_to
    if references:
        msg["References"] = references
    for name, value in (headers or {}).items():
        msg[name] = value
    msg.set_content(text or "\n")
    if html:
        msg.add_alternative(html, subtype="html")
    for filename, content_type, content in attachments:
        maintype, subtype = content_type.split("/", 1)
        msg.add_attachment(content, maintype=maintype, subtype=subtype, filename=filename)
    return AnymailInboundMessage.parse_raw_mime_bytes(msg.as_bytes())


def reply_to(sent: EmailMessage, text: str, *, quote: bool = True, **kwargs: Any) -> Any:
    """The customer's reply to one of our e-mails, as a mail client writes it: threaded on its
    Message-ID, our text quoted below theirs."""
    body = text
    if quote:
        ours = sent.get_body(preferencelist=("plain",))
        quoted = "\n".join(f"> {line}" for line in ours.get_content().splitlines())
        body = f"{text}\n\nOn Sun, 29 Nov 2026 at 10:00, Trail Shop <{SUPPORT}> wrote:\n{quoted}\n"
    refs = f"{sent['References']} {sent['Message-ID']}".strip()
    return email(
        body,
        subject=f"Re: {sent['Subject']}",
        in_reply_to=sent["Message-ID"],
        references=refs,
        **kwargs,
    )


class Mailbox:
    """Mail to the channel, the way a transport hands it over; the turn's on-commit work (the
    turn, the reply's e-mail) runs before `send` returns."""

    def __init__(self, channel: MailChannel, capture: Any) -> None:
        self.channel = channel
        self._capture = capture

    def send(self, mail: AnymailInboundMessage, *, verified: bool = False) -> MailMessage:
        with self._capture(execute=True):
            row = mail_receive(
                channel=self.channel, mail=mail, sender_verified=verified, via=InboundVia.MAILGUN
            )
        row.refresh_from_db()
        return row


@pytest.fixture
def shop(db, webhook):
    return make_shop("adaptive", webhook.url())


@pytest.fixture
def channel(shop, mail_channel) -> MailChannel:
    return mail_channel(shop)


@pytest.fixture
def mailbox(channel, django_capture_on_commit_callbacks) -> Mailbox:
    return Mailbox(channel, django_capture_on_commit_callbacks)


@pytest.fixture
def help_mailbox(shop, mail_channel, django_capture_on_commit_callbacks) -> Callable[..., Mailbox]:
    """`help_mailbox(**fields)` → a Mailbox for the shop's help@shop.example channel, with the
    channel's limits set as given."""

    def make(**fields: Any) -> Mailbox:
        channel = mail_channel(shop, address="help@shop.example", **fields)
        return Mailbox(channel, django_capture_on_commit_callbacks)

    return make
