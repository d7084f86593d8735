"""The chat iframe page, `/widget/frame/?key=<widget key>`, which `static/widget.js` opens on
the client's site. It is served by GuideDesk, so the chat's API calls are same-origin; only the
client's allowed origins (and GuideDesk itself) may frame it (CSP `frame-ancestors`)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.templatetags.static import static
from django.urls import path, reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.clickjacking import xframe_options_exempt
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from apps.clients.models import Client, normalize_origin
from apps.conversations.models import Conversation
from apps.conversations.services import (
    MAX_MESSAGE_CHARS,
    ContactConfirmation,
    contact_confirmation_target,
    contact_email_confirm,
)
from apps.widget import catalogues
from apps.widget.selectors import widget_client_by_key


def frame_csp(client: Client | None) -> str:
    """No inline script or style, no third-party anything; framed only where allowed."""
    ancestors = ["'self'"]
    if client is not None:
        # Origins are validated on save (scheme://host[:port]); re-check so nothing else can
        # reach the header.
        ancestors += sorted(
            {
                normalize_origin(o)
                for o in client.allowed_origins or []
                if isinstance(o, str)
                and o.startswith(("http://", "https://"))
                and ";" not in o
                and " " not in o.strip()
            }
        )
    return "; ".join(
        [
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            "img-src 'self' data:",
            "connect-src 'self'",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors " + " ".join(ancestors),
        ]
    )


@require_GET
@never_cache
@xframe_options_exempt  # framing is governed by the CSP's frame-ancestors instead
def widget_frame(request: HttpRequest) -> HttpResponse:
    client = widget_client_by_key(key=request.GET.get("key", "").strip())
    available = client is not None and client.is_active
    # The first screen's language (docs/widget.md "Languages"): the shop's explicit choice, the
    # host page's <html lang>, the browser's, the client's default. The frame's script
    # re-checks with navigator.languages and follows the customer's own language later.
    explicit = request.GET.get("lang", "")[:16]
    page = request.GET.get("page_lang", "")[:16]
    language = catalogues.choose(
        [
            explicit,
            page,
            *catalogues.accept_language(request.headers.get("Accept-Language", "")),
            client.language if available and client else "",
        ]
    )
    strings = catalogues.catalogue(language)
    name = client.name if available and client else ""
    response = render(
        request,
        "widget/frame.html",
        {
            "client": client if available else None,
            "api_base": reverse("widget:conversations").rsplit("conversations", 1)[0],
            "max_chars": MAX_MESSAGE_CHARS,
            "lang": language,
            "dir": catalogues.direction(language),
            "t": strings,
            "page_title": catalogues.fill(strings["page_title"], name=name),
            "log_label": catalogues.fill(strings["log_label"], name=name),
            "i18n": {
                "language": language,
                "strings": strings,
                # each catalogue's URL (content-hashed in production)
                "urls": {c: static(f"widget/i18n/{c}.json") for c in catalogues.shipped()},
                "explicit": explicit,
                "page": page,
                "client": client.language if available and client else "",
            },
        },
        status=200 if available else 404,
    )
    response["Content-Security-Policy"] = frame_csp(client)
    # Same-origin requests from the frame then carry a Referer (the origin check's fallback in
    # browsers without Sec-Fetch-Site); other sites never see the frame's URL with its key.
    response["Referrer-Policy"] = "same-origin"
    return response


CONFIRM_STATUS = {
    ContactConfirmation.CONFIRMED: 200,
    ContactConfirmation.EXPIRED: 410,
    ContactConfirmation.INVALID: 404,
}


CONFIRM_CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)


def _confirm_page(
    request: HttpRequest,
    outcome: ContactConfirmation,
    conversation: Conversation | None,
    *,
    token: str = "",
    ask: bool = False,
) -> HttpResponse:
    # In the conversation's language when it is known, else the browser's.
    language = catalogues.choose(
        [
            conversation.language if conversation is not None else "",
            *catalogues.accept_language(request.headers.get("Accept-Language", "")),
            conversation.client.language if conversation is not None else "",
        ]
    )
    strings = catalogues.catalogue(language)
    context: dict[str, object] = {
        "outcome": "ask" if ask else outcome.value,
        "lang": language,
        "dir": catalogues.direction(language),
        "t": strings,
    }
    if conversation is not None:
        values = {"business": conversation.client.name, "email": conversation.contact_email}
        context["thanks"] = catalogues.fill(strings["confirm_ok_text"], **values)
        context["question"] = catalogues.fill(strings["confirm_ask_text"], **values)
    if ask:
        context["token"] = token
        context["action"] = reverse("widget-contact-confirm-post")
    response = render(
        request, "widget/contact_confirm.html", context, status=CONFIRM_STATUS[outcome]
    )
    response["Content-Security-Policy"] = CONFIRM_CSP
    response["Referrer-Policy"] = "no-referrer"  # the link carries the token
    return response


@require_GET
@never_cache
def widget_contact_confirm(request: HttpRequest, token: str) -> HttpResponse:
    """The link of the confirmation e-mail (docs/widget.md "The e-mail address"). Opening it
    changes nothing — mail scanners open every link — it shows a page whose button POSTs the
    token (`widget_contact_confirm_post`), in the conversation's language."""
    outcome, conversation = contact_confirmation_target(token=token)
    ask = (
        outcome == ContactConfirmation.CONFIRMED
        and conversation is not None
        and conversation.contact_email_confirmed_at is None
    )
    return _confirm_page(request, outcome, conversation, token=token, ask=ask)


@require_POST
@never_cache
@csrf_exempt  # the signed token in the form is the authorisation; there is no session
def widget_contact_confirm_post(request: HttpRequest) -> HttpResponse:
    """The confirmation page's button: confirms the address the token names for the one
    conversation it was sent for, and says so. A tampered, expired or stale token confirms
    nothing; pressing it again changes nothing."""
    token = request.POST.get("token", "")[:2000]
    outcome, conversation = contact_email_confirm(token=token)
    return _confirm_page(request, outcome, conversation)


# Included by config/urls.py at /widget/ (kept here so the page and its route stay together).
urlpatterns = [
    path("frame/", widget_frame, name="widget-frame"),
    path("confirm-email/", widget_contact_confirm_post, name="widget-contact-confirm-post"),
    path("confirm-email/<str:token>/", widget_contact_confirm, name="widget-contact-confirm"),
]
