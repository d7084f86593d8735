"""The inbound webhook of each e-mail channel, `POST /mail/inbound/<inbound_token>/`
(docs/email-inbound.md): the channel's provider posts every mail it receives for the support
address here. The token names the channel (unknown, disabled, IMAP or a disabled client: 404,
like any missing object); the provider's signature is checked with that channel's secret
(apps/mail/webhooks.py: 403, nothing stored); each mail is recorded by `mail_receive` and its
turn runs in a worker, so the provider gets its 200 at once. A provider's retry of the same
mail is answered 200 again: the service records it as a duplicate.

Bodies: a mail with a 10 MB attachment arrives as a ~14 MB post, more than Django's global
DATA_UPLOAD_MAX_MEMORY_SIZE; this endpoint alone reads up to MAIL_INBOUND_MAX_BYTES itself
(the ASGI edge bounds the path to the same figure, config/asgi.py) and answers 413 beyond."""

from __future__ import annotations

import logging
from email.parser import BytesHeaderParser
from email.policy import HTTP

from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.utils.datastructures import MultiValueDict
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from apps.core.tenancy import tenant_scope
from apps.mail.models import InboundVia, MailChannel
from apps.mail.services.inbound import mail_receive
from apps.mail.webhooks import WebhookMalformed, WebhookRefused, inbound_events

logger = logging.getLogger(__name__)

_TOKEN_MAX = 64


def _channel_for_token(token: str) -> MailChannel | None:
    """The enabled webhook channel of an active client that the token names."""
    if not token or len(token) > _TOKEN_MAX or "\x00" in token:
        return None
    return (
        MailChannel.objects.unscoped("the inbound URL's token is the credential that names it")
        .select_related("client")
        .filter(inbound_token=token, enabled=True, client__is_active=True)
        .exclude(inbound_via=InboundVia.IMAP)
        .first()
    )


class BodyTooLarge(Exception):
    pass


def _read_body(request: HttpRequest, limit: int) -> None:
    """Read the whole body (at most `limit` bytes) and parse a form body without Django's
    global in-memory limits, which are right for every other route and too small here."""
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        raise BodyTooLarge
    chunks, size = [], 0
    while True:
        chunk = request.read(min(1024 * 1024, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
    body = b"".join(chunks)
    request._body = body  # what request.body returns from now on
    if request.content_type == "multipart/form-data":
        post, files = _parse_multipart(request.META.get("CONTENT_TYPE", ""), body)
        request._post, request._files = post, files  # type: ignore[attr-defined]
    elif request.content_type == "application/x-www-form-urlencoded":
        request._post = QueryDict(body, encoding="utf-8")  # type: ignore[attr-defined]
        request._files = MultiValueDict()  # type: ignore[attr-defined]


def _parse_multipart(
    content_type: str, body: bytes
) -> tuple[QueryDict, MultiValueDict[str, SimpleUploadedFile]]:
    """multipart/form-data (RFC 7578) into Django's POST and FILES: fields by name, files as
    uploaded files. The whole body is already in memory and bounded by the caller."""
    header = BytesHeaderParser(policy=HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1", "replace") + b"\r\n\r\n"
    )
    boundary = header.get_param("boundary")
    if not isinstance(boundary, str) or not boundary:
        raise WebhookMalformed("multipart body without a boundary")
    delimiter = b"--" + boundary.encode("latin-1")
    post = QueryDict(mutable=True)
    files: MultiValueDict[str, SimpleUploadedFile] = MultiValueDict()
    sections = (b"\r\n" + body).split(b"\r\n" + delimiter)
    for section in sections[1:]:
        if section.startswith(b"--"):
            break  # the close delimiter
        head, sep, content = section.partition(b"\r\n\r\n")
        if not sep:
            raise WebhookMalformed("multipart part without a header block")
        headers = BytesHeaderParser(policy=HTTP).parsebytes(head.lstrip(b" \t\r\n") + b"\r\n\r\n")
        name = headers.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            continue
        filename = headers.get_param("filename", header="content-disposition")
        if isinstance(filename, str):
            charset = headers.get_content_charset()
            upload = SimpleUploadedFile(filename, content, headers.get_content_type())
            upload.charset = charset
            files.appendlist(name, upload)
        else:
            charset = headers.get_content_charset() or "utf-8"
            post.appendlist(name, content.decode(charset, "replace"))
    post._mutable = False
    return post, files


@csrf_exempt
@never_cache
@require_POST
def inbound_webhook(request: HttpRequest, token: str) -> HttpResponse:
    channel = _channel_for_token(token)
    if channel is None:
        raise Http404
    limit = int(settings.MAIL_INBOUND_MAX_BYTES)
    try:
        _read_body(request, limit)
    except BodyTooLarge:
        return JsonResponse({"error": "too_large", "limit_bytes": limit}, status=413)
    except WebhookMalformed as exc:
        return JsonResponse({"error": "malformed", "detail": str(exc)}, status=400)
    try:
        mails = inbound_events(channel=channel, request=request)
    except WebhookRefused as exc:
        logger.warning("mail: inbound webhook refused for channel %s: %s", channel.pk, exc)
        return JsonResponse({"error": "forbidden"}, status=403)
    except WebhookMalformed as exc:
        logger.warning("mail: unreadable inbound webhook for channel %s: %s", channel.pk, exc)
        return JsonResponse({"error": "malformed", "detail": str(exc)}, status=400)
    received = []
    for mail in mails:
        # Each mail on its own: one that fails is not retried with those already recorded
        # (the provider retries the whole post; the service skips what it has).
        with tenant_scope(channel.client_id), transaction.atomic():
            record = mail_receive(
                channel=channel,
                mail=mail.message,
                sender_verified=mail.sender_verified,
                via=channel.inbound_via,
            )
        received.append({"id": str(record.public_id), "disposition": record.disposition})
    return JsonResponse({"ok": True, "received": received})
