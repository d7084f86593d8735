"""The providers' inbound webhooks, `/mail/inbound/<token>/`: real provider payloads signed as
the providers sign them, through Django's test client and through a live server."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from email.utils import make_msgid
from http.client import HTTPConnection

import pytest
from django.test import Client as HttpClient
from django.test import override_settings

from apps.clients.models import Client
from apps.mail.models import Disposition, InboundVia, MailChannel, MailMessage
from config.asgi import application
from tests.mail.webhook_payloads import (
    basic_auth,
    mailersend_body,
    mailersend_signature,
    mailgun_parsed,
    mailgun_raw,
    mailgun_signature,
    make_channel,
    mandrill_post,
    postmark_body,
    raw_mail,
)

pytestmark = pytest.mark.django_db(transaction=False)

TEN_MB = 10 * 1024 * 1024


def url(channel: MailChannel) -> str:
    return f"/mail/inbound/{channel.inbound_token}/"


def mails(client: Client) -> list[MailMessage]:
    return list(MailMessage.objects.for_client(client).filter(direction="in").order_by("id"))


@pytest.fixture
def http() -> HttpClient:
    return HttpClient(enforce_csrf_checks=True)


# --- Mailgun: HMAC of timestamp + token ---


def test_mailgun_signed_mail_is_received_with_its_attachment_and_a_verified_sender(client_a, http):
    channel = make_channel(client_a)
    mail = raw_mail(attachment=("invoice.pdf", "application/pdf", b"%PDF-1.4 " * 10))

    response = http.post(url(channel), mailgun_parsed(mail, key=channel.webhook_secret))

    assert response.status_code == 200, response.content
    [received] = mails(client_a)
    assert received.header_message_id == mail["Message-ID"].strip("<>")
    assert received.from_address == "ana@customer.example"
    assert received.received_via == InboundVia.MAILGUN
    assert received.sender_verified is True
    assert received.conversation is not None
    assert [a.filename for a in received.attachments.all()] == ["invoice.pdf"]


def test_mailgun_a_ten_megabyte_attachment_over_a_live_server(client_a, live_server):
    """A plain HTTP client, a real socket: Mailgun's raw-MIME post of a mail with a 10 MB
    attachment (about 14 MB once base64-encoded) is taken whole."""
    channel = make_channel(client_a)
    head = b"%PDF-1.4\n"
    payload = head + bytes(range(256)) * ((TEN_MB - len(head)) // 256)
    payload += b"\n" * (TEN_MB - len(payload))  # exactly 10 MiB, the channel's default limit
    mail = raw_mail(attachment=("scan.pdf", "application/pdf", payload))
    form = mailgun_raw(mail, key=channel.webhook_secret)
    boundary = "guidedesk-test-boundary"
    body = (
        b"".join(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode()
            + value.encode()
            + b"\r\n"
            for name, value in form.items()
        )
        + f"--{boundary}--\r\n".encode()
    )
    assert len(body) > 13 * 1024 * 1024
    request = urllib.request.Request(
        live_server.url + url(channel),
        data=body,
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        method="POST",
    )

    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.status == 200
        answer = json.loads(response.read())

    assert answer["received"][0]["disposition"] == Disposition.ACCEPTED
    [received] = mails(client_a)
    [attachment] = received.attachments.all()
    assert attachment.filename == "scan.pdf"
    assert attachment.size == len(payload)
    assert attachment.refused == ""
    with attachment.file.open("rb") as stored:
        assert stored.read() == payload


def test_mailgun_bad_or_missing_signature_is_refused_and_nothing_is_stored(client_a, http):
    channel = make_channel(client_a)
    mail = raw_mail()
    forged = mailgun_parsed(mail, key="key-not-the-channels")
    missing = mailgun_parsed(mail, key=channel.webhook_secret)
    del missing["signature"]

    assert http.post(url(channel), forged).status_code == 403
    assert http.post(url(channel), missing).status_code == 403
    assert mails(client_a) == []


def test_mailgun_replays_are_refused(client_a, http):
    """Mailgun signs only timestamp + token: an old timestamp, or a token used before (even
    with another body), is a replay."""
    channel = make_channel(client_a)
    key = channel.webhook_secret
    old = mailgun_signature(key, timestamp=int(time.time()) - 3600)
    assert (
        http.post(url(channel), mailgun_parsed(raw_mail(), key=key, signature=old)).status_code
        == 403
    )

    signature = mailgun_signature(key)
    first = http.post(url(channel), mailgun_parsed(raw_mail(), key=key, signature=signature))
    assert first.status_code == 200
    other_body = raw_mail(text="Please refund everything to account 1234.")
    replayed = http.post(url(channel), mailgun_parsed(other_body, key=key, signature=signature))
    assert replayed.status_code == 403
    assert [m.text.strip() for m in mails(client_a)] == ["Hello, where is my order 1001?"]


def test_a_provider_retry_of_the_same_mail_answers_200_and_is_recorded_once(client_a, http):
    channel = make_channel(client_a)
    mail = raw_mail()

    first = http.post(url(channel), mailgun_parsed(mail, key=channel.webhook_secret))
    retry = http.post(url(channel), mailgun_parsed(mail, key=channel.webhook_secret))

    assert first.status_code == retry.status_code == 200
    assert [m.disposition for m in mails(client_a)] == [Disposition.ACCEPTED, Disposition.DUPLICATE]
    accepted = [m for m in mails(client_a) if m.disposition == Disposition.ACCEPTED]
    assert accepted[0].conversation.messages.filter(role="user").count() == 1


def test_mailgun_spf_pass_for_another_domain_or_a_forged_pass_does_not_verify(client_a, http):
    channel = make_channel(client_a)
    key = channel.webhook_secret
    # SPF passed, but for the envelope sender's domain, not the From address's
    unaligned = mailgun_parsed(
        raw_mail(), key=key, envelope_sender="bounce@bulk.example", dkim="Fail"
    )
    # the sender wrote their own "X-Mailgun-Spf: Pass" below Mailgun's "Fail"
    forged_mail = raw_mail(headers=[("X-Mailgun-Spf", "Pass")])
    forged = mailgun_parsed(forged_mail, key=key, spf="Fail", dkim="Fail")

    assert http.post(url(channel), unaligned).status_code == 200
    assert http.post(url(channel), forged).status_code == 200
    assert [m.sender_verified for m in mails(client_a)] == [False, False]


# --- tenancy and the channel ---


def test_tenant_b_cannot_post_into_tenant_a_channel_with_its_own_secret(client_a, client_b, http):
    channel_a = make_channel(client_a)
    channel_b = make_channel(client_b)
    mail = raw_mail()

    # B's secret on A's URL, and A's secret on B's URL: both refused
    assert (
        http.post(url(channel_a), mailgun_parsed(mail, key=channel_b.webhook_secret)).status_code
        == 403
    )
    assert (
        http.post(url(channel_b), mailgun_parsed(mail, key=channel_a.webhook_secret)).status_code
        == 403
    )
    assert mails(client_a) == [] and mails(client_b) == []

    # each channel's own post lands in its own client only
    assert (
        http.post(url(channel_a), mailgun_parsed(mail, key=channel_a.webhook_secret)).status_code
        == 200
    )
    assert [m.channel_id for m in mails(client_a)] == [channel_a.pk]
    assert mails(client_b) == []


def test_unknown_disabled_and_imap_channels_answer_404(client_a, http):
    disabled = make_channel(client_a, enabled=False)
    imap = make_channel(client_a, via=InboundVia.IMAP)
    key = disabled.webhook_secret

    assert (
        http.post("/mail/inbound/no-such-token/", mailgun_parsed(raw_mail(), key=key)).status_code
        == 404
    )
    assert http.post(url(disabled), mailgun_parsed(raw_mail(), key=key)).status_code == 404
    assert (
        http.post(url(imap), mailgun_parsed(raw_mail(), key=imap.webhook_secret)).status_code == 404
    )
    assert http.get(url(make_channel(client_a))).status_code == 405
    assert mails(client_a) == []


def test_a_channel_without_a_secret_refuses_everything(client_a, http):
    channel = make_channel(client_a)
    MailChannel.objects.for_client(client_a).filter(pk=channel.pk).update(webhook_secret="")

    assert http.post(url(channel), mailgun_parsed(raw_mail(), key="")).status_code == 403
    assert mails(client_a) == []


# --- sizes ---


@override_settings(MAIL_INBOUND_MAX_BYTES=1024 * 1024)
def test_a_post_over_the_limit_gets_413_and_nothing_is_stored(client_a, http):
    channel = make_channel(client_a)
    mail = raw_mail(attachment=("big.bin", "application/octet-stream", b"x" * 2 * 1024 * 1024))

    response = http.post(url(channel), mailgun_parsed(mail, key=channel.webhook_secret))

    assert response.status_code == 413
    assert response.json()["limit_bytes"] == 1024 * 1024
    assert mails(client_a) == []


def test_a_200_mb_post_gets_a_clear_413_before_it_is_read(client_a, live_server):
    """A real socket: the head announces 200 MB; the answer is 413 at once, not a 500, and the
    body is never waited for."""
    channel = make_channel(client_a)
    host, port = live_server.url.removeprefix("http://").split(":")
    connection = HTTPConnection(host, int(port), timeout=30)
    connection.putrequest("POST", url(channel))
    connection.putheader("Content-Type", "multipart/form-data; boundary=x")
    connection.putheader("Content-Length", str(200 * 1024 * 1024))
    connection.endheaders()
    connection.send(b"--x\r\n" + b"a" * 65536)

    response = connection.getresponse()

    assert response.status == 413
    assert json.loads(response.read())["error"] == "too_large"
    connection.close()
    assert mails(client_a) == []


def test_the_edge_bounds_the_inbound_path_to_its_own_limit(settings):
    """In production the ASGI edge answers 413 for a 200 MB post before Django reads it; the
    inbound path has its own limit there, above the one of every other route."""
    assert application.limit_for("/mail/inbound/abc/") == settings.MAIL_INBOUND_MAX_BYTES
    assert settings.MAIL_INBOUND_MAX_BYTES > 14 * 1024 * 1024
    assert application.limit_for("/api/v1/conversations/") == settings.REQUEST_BODY_MAX_BYTES
    assert settings.MAIL_INBOUND_MAX_BYTES < 200 * 1024 * 1024


# --- MailerSend: HMAC of the body ---


def test_mailersend_signed_mail_is_received_and_spf_verifies_the_sender(client_a, http):
    channel = make_channel(client_a, via=InboundVia.MAILERSEND)
    body = mailersend_body(raw_mail())

    response = http.post(
        url(channel),
        body,
        content_type="application/json",
        headers={"Signature": mailersend_signature(channel.webhook_secret, body)},
    )

    assert response.status_code == 200, response.content
    [received] = mails(client_a)
    assert received.received_via == InboundVia.MAILERSEND
    assert received.sender_verified is True


def test_mailersend_bad_signature_or_unaligned_spf(client_a, http):
    channel = make_channel(client_a, via=InboundVia.MAILERSEND)
    body = mailersend_body(raw_mail())
    tampered = body.replace(b"order 1001", b"order 6666")

    refused = http.post(
        url(channel),
        tampered,
        content_type="application/json",
        headers={"Signature": mailersend_signature(channel.webhook_secret, body)},
    )
    unsigned = http.post(url(channel), body, content_type="application/json")
    assert refused.status_code == unsigned.status_code == 403
    assert mails(client_a) == []

    unaligned = mailersend_body(raw_mail(), envelope_sender="x@elsewhere.example")
    ok = http.post(
        url(channel),
        unaligned,
        content_type="application/json",
        headers={"Signature": mailersend_signature(channel.webhook_secret, unaligned)},
    )
    assert ok.status_code == 200
    assert [m.sender_verified for m in mails(client_a)] == [False]


# --- Postmark: basic auth ---


def test_postmark_basic_auth_and_received_spf(client_a, http):
    channel = make_channel(client_a, via=InboundVia.POSTMARK, secret="postmark:s3cret-pass")
    spf_pass = (
        "Pass (sender SPF authorized) identity=mailfrom; client-ip=192.0.2.1; "
        "helo=mail.customer.example; envelope-from=ana@customer.example; "
        "receiver=inbound.postmarkapp.com"
    )
    verified = postmark_body(raw_mail(), received_spf=spf_pass)
    unverified = postmark_body(raw_mail(), received_spf="Fail (not authorized)")

    wrong = http.post(
        url(channel),
        verified,
        content_type="application/json",
        headers={"Authorization": basic_auth("postmark:guess")},
    )
    none = http.post(url(channel), verified, content_type="application/json")
    assert wrong.status_code == none.status_code == 403
    assert mails(client_a) == []

    for body in (verified, unverified):
        response = http.post(
            url(channel),
            body,
            content_type="application/json",
            headers={"Authorization": basic_auth("postmark:s3cret-pass")},
        )
        assert response.status_code == 200, response.content
    assert [(m.received_via, m.sender_verified) for m in mails(client_a)] == [
        (InboundVia.POSTMARK, True),
        (InboundVia.POSTMARK, False),
    ]


# --- Mandrill: HMAC-SHA1 of the URL and the fields ---


def test_mandrill_signed_mail_is_received(client_a, http):
    channel = make_channel(client_a, via=InboundVia.MANDRILL)
    target = "http://testserver" + url(channel)
    data, signature = mandrill_post(
        raw_mail(message_id=make_msgid()), key=channel.webhook_secret, url=target
    )

    forged = http.post(url(channel), data, headers={"X-Mandrill-Signature": "bm9wZQ=="})
    response = http.post(url(channel), data, headers={"X-Mandrill-Signature": signature})

    assert forged.status_code == 403
    assert response.status_code == 200, response.content
    [received] = mails(client_a)
    assert received.received_via == InboundVia.MANDRILL
    assert received.sender_verified is False  # not DKIM-signed; Mandrill's SPF names no domain


# --- SendGrid: basic auth ----------------------------------------------------------------


def test_sendgrid_raw_mime_with_basic_auth(client_a, http):
    channel = make_channel(client_a, via=InboundVia.SENDGRID, secret="sendgrid:parse-pass")
    form = {
        "email": raw_mail().as_string(),
        "envelope": json.dumps({"from": "ana@customer.example", "to": [channel.address]}),
        "SPF": "pass",
        "dkim": "{@bulk.example : pass}",
    }

    refused = http.post(url(channel), form)
    response = http.post(
        url(channel), form, headers={"Authorization": basic_auth("sendgrid:parse-pass")}
    )

    assert refused.status_code == 403
    assert response.status_code == 200, response.content
    [received] = mails(client_a)
    assert (received.received_via, received.sender_verified) == (InboundVia.SENDGRID, True)
