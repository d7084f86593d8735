"""The providers' inbound webhooks (docs/email-inbound.md): each provider's signature check and
payload parsing are django-anymail's own inbound webhook views, instantiated per request with
the channel's secret (never from settings, never shared between requests or tenants); what we
add is what anymail leaves to the site: Mailgun's replay window, a refusal when the channel has
no secret, and `sender_verified` from what the provider reports.

`inbound_events(channel=…, request=…)` returns the parsed mails, or raises `WebhookRefused`
(→ 403, nothing stored)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from anymail.exceptions import AnymailError
from anymail.inbound import AnymailInboundMessage
from anymail.signals import AnymailInboundEvent
from anymail.webhooks.base import AnymailBaseWebhookView, AnymailCoreWebhookView
from anymail.webhooks.mailersend import MailerSendInboundWebhookView
from anymail.webhooks.mailgun import MailgunInboundWebhookView
from anymail.webhooks.mandrill import MandrillCombinedWebhookView
from anymail.webhooks.postmark import PostmarkInboundWebhookView
from anymail.webhooks.sendgrid import SendGridInboundWebhookView
from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest

from apps.mail.authresults import (
    address_domain,
    authentication_results_verified,
    dkim_pass_aligned,
    domains_aligned,
    from_domain,
    results_verified,
)
from apps.mail.models import InboundVia, MailChannel


class WebhookRefused(Exception):
    """The post is not the provider's (bad or missing signature or credentials, a replay, a
    channel without a secret): answered 403 and nothing is stored."""


class WebhookMalformed(Exception):
    """A signed post that is not an inbound mail of the channel's provider (another kind of
    webhook pointed at this URL, a payload that cannot be read): answered 400."""


@dataclass(frozen=True)
class InboundMail:
    message: AnymailInboundMessage
    sender_verified: bool


@dataclass(frozen=True)
class Provider:
    view_class: type[AnymailCoreWebhookView]
    # The anymail view's keyword arguments for this channel's secret; every setting the view
    # would otherwise read from settings.ANYMAIL is given here.
    view_kwargs: Callable[[str], dict[str, Any]]
    verified: Callable[[AnymailInboundEvent, MailChannel], bool]
    check_replay: Callable[[HttpRequest, MailChannel], None] | None = None


# --- sender verification, per provider --------------------------------------------------------


def _all_say_pass(message: AnymailInboundMessage, header: str) -> bool:
    """The provider's own header is present and every copy says pass (a sender who writes a
    forged "Pass" copy cannot outvote the provider's "Fail")."""
    values = [str(v).strip().lower() for v in message.get_all(header) or []]
    return bool(values) and all(v == "pass" for v in values)


def _spf_aligned(envelope_sender: str | None, message: AnymailInboundMessage) -> bool:
    return domains_aligned(address_domain(envelope_sender), from_domain(message))


def _trusted_header(message: AnymailInboundMessage, channel: MailChannel) -> bool:
    return authentication_results_verified(message, authserv_id=channel.trusted_authserv_id)


def _mailgun_verified(event: AnymailInboundEvent, channel: MailChannel) -> bool:
    """Mailgun adds `X-Mailgun-Spf` (for the envelope sender it posts as `sender`) and
    `X-Mailgun-Dkim-Check-Result` (for the message's DKIM signatures)."""
    message = event.message
    if message is None:
        return False
    if _all_say_pass(message, "X-Mailgun-Spf") and _spf_aligned(message.envelope_sender, message):
        return True
    if _all_say_pass(message, "X-Mailgun-Dkim-Check-Result") and dkim_pass_aligned(message):
        return True
    return _trusted_header(message, channel)


def _postmark_verified(event: AnymailInboundEvent, channel: MailChannel) -> bool:
    """Postmark prepends `Received-SPF: Pass (…) … envelope-from=<address>; …` for the
    envelope sender (its `Return-Path`); only the topmost copy is Postmark's."""
    message = event.message
    if message is None:
        return False
    values = message.get_all("Received-SPF") or []
    if values:
        top = " ".join(str(values[0]).split())
        if top.lower().startswith("pass"):
            envelope = message.envelope_sender or ""
            for part in top.split(";"):
                _key, sep, value = part.strip().rpartition("envelope-from=")
                if sep:
                    envelope = value.strip().strip('"<>')
            if _spf_aligned(envelope, message):
                return True
    return _trusted_header(message, channel)


def _mailersend_verified(event: AnymailInboundEvent, channel: MailChannel) -> bool:
    """MailerSend posts `spf_check: {"code": "+"}` for the envelope sender (`sender.email`)
    and `dkim_check: true` when the message's DKIM verified."""
    message = event.message
    data = (event.esp_event or {}).get("data") or {}
    if message is None:
        return False
    spf = data.get("spf_check") or {}
    spf_passed = isinstance(spf, dict) and spf.get("code") == "+"
    if spf_passed and _spf_aligned(message.envelope_sender, message):
        return True
    if data.get("dkim_check") is True and dkim_pass_aligned(message):
        return True
    return _trusted_header(message, channel)


def _mandrill_verified(event: AnymailInboundEvent, channel: MailChannel) -> bool:
    """Mandrill posts `dkim: {"signed": true, "valid": true}`; its `spf` result names no
    envelope sender to align, so only DKIM counts."""
    message = event.message
    msg = (event.esp_event or {}).get("msg") or {}
    if message is None:
        return False
    dkim = msg.get("dkim") or {}
    if isinstance(dkim, dict) and dkim.get("valid") is True and dkim_pass_aligned(message):
        return True
    return _trusted_header(message, channel)


def _sendgrid_verified(event: AnymailInboundEvent, channel: MailChannel) -> bool:
    """SendGrid's Inbound Parse posts `SPF` ("pass") for the envelope sender and `dkim`
    ("{@shop.example : pass, @other.example : fail}") per signing domain."""
    message = event.message
    request = event.esp_event
    if message is None or request is None:
        return False
    post = request.POST
    author = from_domain(message)
    spf_passed = str(post.get("SPF", "")).strip().lower() == "pass"
    if spf_passed and _spf_aligned(message.envelope_sender, message):
        return True
    results = []
    for item in str(post.get("dkim", "")).strip("{} ").split(","):
        domain, _sep, result = item.partition(":")
        if _sep:
            results.append(
                {"method": "dkim", "result": result.strip().lower(), "header.d": domain.strip()}
            )
    if results_verified(results, author=author):
        return True
    return _trusted_header(message, channel)


# --- replays ------------------------------------------------------------------------------------


def _mailgun_replay_check(request: HttpRequest, channel: MailChannel) -> None:
    """Mailgun signs only `timestamp + token`, not the body: a signature is good for one post.
    Refuse a timestamp outside MAIL_WEBHOOK_MAX_AGE_SECONDS and a token seen before (kept in
    the shared cache for that window). Runs after the signature check passed."""
    try:
        timestamp = int(request.POST["timestamp"])
        token = str(request.POST["token"])
    except (KeyError, ValueError) as exc:
        raise WebhookRefused("mailgun: no timestamp or token") from exc
    window = int(settings.MAIL_WEBHOOK_MAX_AGE_SECONDS)
    if abs(time.time() - timestamp) > window:
        raise WebhookRefused("mailgun: timestamp outside the replay window")
    if not cache.add(f"mail:mailgun-token:{channel.pk}:{token}", 1, timeout=2 * window):
        raise WebhookRefused("mailgun: token already used")


class _SendGridInbound(SendGridInboundWebhookView):
    """Anymail's SendGrid inbound view without its per-request deprecation warning (anymail
    15 dropped official SendGrid support; the parsing still holds, and warning on every post
    would only flood the logs)."""

    def __init__(self, **kwargs: Any) -> None:
        AnymailBaseWebhookView.__init__(self, **kwargs)


def _basic_auth(secret: str) -> dict[str, Any]:
    return {"webhook_secret": [secret]}


PROVIDERS: dict[str, Provider] = {
    InboundVia.MAILGUN: Provider(
        MailgunInboundWebhookView,
        lambda secret: {"webhook_signing_key": secret, "api_key": None, "webhook_secret": []},
        _mailgun_verified,
        _mailgun_replay_check,
    ),
    InboundVia.MAILERSEND: Provider(
        MailerSendInboundWebhookView,
        lambda secret: {"inbound_secret": secret, "webhook_secret": []},
        _mailersend_verified,
    ),
    InboundVia.MANDRILL: Provider(
        MandrillCombinedWebhookView,
        lambda secret: {"webhook_key": secret, "webhook_url": None, "webhook_secret": []},
        _mandrill_verified,
    ),
    InboundVia.POSTMARK: Provider(PostmarkInboundWebhookView, _basic_auth, _postmark_verified),
    InboundVia.SENDGRID: Provider(_SendGridInbound, _basic_auth, _sendgrid_verified),
}


def inbound_events(*, channel: MailChannel, request: HttpRequest) -> list[InboundMail]:
    """Check the post's signature (or basic auth) with the channel's secret and parse it into
    mails, with anymail's view for the channel's provider. Raises WebhookRefused."""
    provider = PROVIDERS.get(channel.inbound_via)
    secret = channel.webhook_secret
    if provider is None or not secret:
        raise WebhookRefused("channel has no webhook secret")  # never open to anyone
    try:
        view = provider.view_class(**provider.view_kwargs(secret))
        view.run_validators(request)
    except AnymailError as exc:  # AnymailWebhookValidationFailure, a bad key
        raise WebhookRefused(str(exc)) from exc
    except (ValueError, UnicodeError) as exc:  # a key that is not ASCII
        raise WebhookRefused("bad webhook secret") from exc
    if provider.check_replay is not None:
        provider.check_replay(request, channel)
    try:
        events = [
            event
            for event in view.parse_events(request)
            if isinstance(event, AnymailInboundEvent) and event.message is not None
        ]
    except (AnymailError, KeyError, ValueError, TypeError, AttributeError, AssertionError) as exc:
        raise WebhookMalformed(f"{type(exc).__name__}: {exc}"[:300]) from exc
    return [
        InboundMail(message=event.message, sender_verified=provider.verified(event, channel))
        for event in events
        if event.event_type == "inbound"
    ]
