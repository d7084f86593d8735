"""Who may talk to the widget API, from where, and how often (docs/widget.md).

* **Widget key** (`X-Widget-Key`, public, one per client) → the active client. `?key=` works
  too: a browser's `EventSource` cannot send headers, and a cross-origin caller's preflight is
  answered by django-cors-headers, whose allowed request headers (`CORS_ALLOW_HEADERS`) do not
  list `X-Widget-Key` unless the deployment adds it. The key is public, so a URL may carry it.
* **Visitor token** (`Authorization: Bearer <token>`, issued once per conversation, stored
  hashed) → one conversation of that client. Only the events endpoint also takes `?token=`.
* **Origin**: a browser request must come from one of the client's `allowed_origins` or from
  GuideDesk's own origin (the chat runs in our iframe page, `/widget/frame/`, which the client's
  site embeds). Browsers omit `Origin` on same-origin GETs, so for those `Sec-Fetch-Site:
  same-origin` (or, in older browsers, a same-origin `Referer`) stands for our own origin. A
  request with none of these (curl, a server) is refused: send the `Origin` of the site the
  widget runs on. This is a browser policy, not authentication — the key is public by design;
  the throttles below bound what anyone can do with it.
* **Throttles** (DRF, cache-backed; rates in `REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]`, from
  the `THROTTLE_WIDGET_*` environment variables): `widget_ip` per client address — every
  request, failed and unauthenticated ones included, before anything else is looked at;
  `widget_conversations` per address for starting conversations; `widget_messages` per
  conversation for posting messages; and `widget_key`, the tenant-wide ceiling, which counts only
  real work (a conversation started, a message posted — each after every check passed). The
  widget key is public: anything that counted failed requests against it would let anyone lock
  the tenant's widget. The client address is the socket's unless `TRUSTED_PROXY_COUNT` (DRF's
  `NUM_PROXIES`) says how many of our proxies appended to `X-Forwarded-For`.
* **Token windows** (`widget_tokens` per conversation, `widget_address_tokens` per address):
  tokens, not requests. Reaching one never refuses a message: it is stored and handed to staff
  (`widget_token_window` below; docs/widget.md "Limits and throttles").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit
from uuid import UUID

from corsheaders.signals import check_request_enabled
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle

from apps.clients.models import Client, normalize_origin
from apps.conversations.services import conversation_token_matches
from apps.platform.throttling import (
    SlidingWindowThrottle,
    TokenWindowReached,
    token_window_reached,
    visitor_key,
)
from apps.widget.selectors import (
    widget_client_by_key,
    widget_conversation_get,
    widget_known_origins,
)

if TYPE_CHECKING:
    from rest_framework.views import APIView

    from apps.conversations.models import Conversation

WIDGET_API_PREFIX = "/api/v1/widget/"
WIDGET_KEY_HEADER = "X-Widget-Key"
# Response headers a cross-origin page's script may read (the throttles' back-off).
CORS_EXPOSE_HEADERS = ("Retry-After",)
# Set on the Django request once the origin passed (or failed) the per-client check, so the
# CORS signal below answers for exactly that client.
_ORIGIN_VERDICT_ATTR = "_widget_origin_allowed"


# --------------------------------------------------------------------------------------------
# Credentials
# --------------------------------------------------------------------------------------------


def widget_key_from(request: Request) -> str:
    key = request.headers.get(WIDGET_KEY_HEADER, "").strip()
    return key or request.query_params.get("key", "").strip()


def visitor_token_from(request: Request, *, allow_query: bool = False) -> str:
    scheme, _, token = request.headers.get("Authorization", "").strip().partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    if allow_query:
        return request.query_params.get("token", "").strip()
    return ""


def widget_client_resolve(request: Request) -> Client:
    """The active client of the request's widget key: 401 when missing or unknown, 403 when the
    client is switched off."""
    key = widget_key_from(request)
    if not key:
        raise exceptions.NotAuthenticated(
            f"A widget key is required (the {WIDGET_KEY_HEADER} header)."
        )
    client = widget_client_by_key(key=key)
    if client is None:
        raise exceptions.AuthenticationFailed("Unknown widget key.")
    if not client.is_active:
        raise exceptions.PermissionDenied("This chat widget is switched off.", code="inactive")
    return client


def widget_conversation_resolve(
    request: Request, *, client: Client, conversation_id: str, allow_query: bool = False
) -> Conversation:
    """The conversation, looked up within the client. A malformed id, another client's
    conversation and a wrong token all answer 404 exactly like a missing one, so ids cannot be
    probed; only a missing token says so (401), whatever the id."""
    token = visitor_token_from(request, allow_query=allow_query)
    if not token:
        raise exceptions.NotAuthenticated(
            "A visitor token is required (Authorization: Bearer <token>)."
        )
    not_found = exceptions.NotFound("Conversation not found.")
    try:
        public_id = UUID(conversation_id)
    except ValueError:
        raise not_found from None
    conversation = widget_conversation_get(client=client, public_id=public_id)
    if conversation is None or not conversation_token_matches(
        conversation=conversation, token=token
    ):
        raise not_found
    return conversation


# --------------------------------------------------------------------------------------------
# Origin
# --------------------------------------------------------------------------------------------


def own_origin(request: HttpRequest) -> str:
    """GuideDesk's own origin as this request reached it (honours SECURE_PROXY_SSL_HEADER)."""
    return normalize_origin(f"{request.scheme}://{request.get_host()}")


def _origin_of(url: str) -> str | None:
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        return None
    return normalize_origin(f"{parts.scheme}://{parts.netloc}")


def request_origin(request: HttpRequest) -> str | None:
    """The origin of the page that made the request, or None when nothing says (curl)."""
    origin = request.headers.get("Origin", "").strip()
    if origin:
        return "null" if origin == "null" else normalize_origin(origin)
    site = request.headers.get("Sec-Fetch-Site", "")
    if site == "same-origin":
        return own_origin(request)
    if not site:  # a browser too old to send Sec-Fetch-*: fall back to a same-origin Referer
        referer = _origin_of(request.headers.get("Referer", ""))
        if referer and referer == own_origin(request):
            return referer
    return None


def origin_allowed(*, client: Client, origin: str, request: HttpRequest) -> bool:
    if origin == own_origin(request):
        return True
    return origin in {normalize_origin(o) for o in client.allowed_origins or []}


def widget_origin_check(request: Request, *, client: Client) -> None:
    """403 unless the request comes from a site this client allows (or our own iframe page)."""
    django_request = request._request
    origin = request_origin(django_request)
    allowed = origin is not None and origin_allowed(
        client=client, origin=origin, request=django_request
    )
    setattr(django_request, _ORIGIN_VERDICT_ATTR, allowed)
    if origin is None:
        raise exceptions.PermissionDenied(
            "The request's Origin is missing; send the Origin of the site the widget runs on.",
            code="origin_required",
        )
    if not allowed:
        raise exceptions.PermissionDenied(
            f"The origin {origin} is not allowed to use this widget.", code="origin_not_allowed"
        )


def widget_cors_enabled(sender: Any, request: HttpRequest, **kwargs: Any) -> bool:
    """django-cors-headers asks this before adding CORS headers; it answers only for
    /api/v1/widget/. A preflight carries no widget key, so it is answered for any origin some
    active client allows (or the `?key=` client's origins when the URL has one); the real request
    is then checked against its own client, and its response only gets CORS headers if it passed.
    """
    if not request.path_info.startswith(WIDGET_API_PREFIX):
        return False
    verdict = getattr(request, _ORIGIN_VERDICT_ATTR, None)
    if verdict is not None:
        return bool(verdict)
    origin = request.headers.get("Origin", "").strip()
    if not origin or origin == "null":
        return False
    origin = normalize_origin(origin)
    key = request.GET.get("key", "").strip()
    if key:
        client = widget_client_by_key(key=key)
        return bool(
            client
            and client.is_active
            and origin_allowed(client=client, origin=origin, request=request)
        )
    return origin in widget_known_origins()


check_request_enabled.connect(widget_cors_enabled, dispatch_uid="guidedesk-widget-cors")


# --------------------------------------------------------------------------------------------
# Throttles
# --------------------------------------------------------------------------------------------


class _WidgetThrottle(SlidingWindowThrottle):
    """Reads its rate when it is built (per request), not at import, so a changed
    `REST_FRAMEWORK` setting applies at once."""

    def get_rate(self) -> str | None:
        rates = api_settings.DEFAULT_THROTTLE_RATES or {}
        if self.scope not in rates:
            raise ImproperlyConfigured(f"No throttle rate set for scope {self.scope!r}.")
        rate = rates[self.scope]
        return str(rate) if rate else None  # (an empty rate turns the throttle off)

    def get_ident(self, request: Request) -> str:
        return client_address(request)


def client_address(request: Request) -> str:
    """The caller's address as every widget throttle sees it. X-Forwarded-For is only believed
    when NUM_PROXIES (TRUSTED_PROXY_COUNT) says how many of our proxies append to it; then the
    address the outermost of them saw is taken (DRF), so a visitor cannot pick their own bucket
    by sending a made-up header."""
    if not api_settings.NUM_PROXIES:
        return str(request.META.get("REMOTE_ADDR", ""))
    return BaseThrottle().get_ident(request)


def widget_token_window(
    request: Request, *, client: Client, conversation: Conversation
) -> TokenWindowReached | None:
    """The token window a new message finds reached — its conversation's (`widget_tokens`) or
    its client address's (`widget_address_tokens`), charged by each turn when it ends
    (apps.billing.services.visitors) — or None. Not a refusal: over a window the message is
    still stored, and handed to staff with a short notice instead of a model's answer."""
    return token_window_reached(
        client_id=client.pk, conversation_id=conversation.pk, visitor=widget_visitor(request)
    )


def widget_visitor(request: Request) -> str:
    """The visitor a widget request comes from: the keyed hash of its client address."""
    return visitor_key(client_address(request))


class WidgetIPThrottle(_WidgetThrottle):
    scope = "widget_ip"

    def get_cache_key(self, request: Request, view: APIView) -> str | None:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class _ViewObjectThrottle(_WidgetThrottle):
    """Counted per object the view has resolved (`view_attr`: its `client` or `conversation`);
    a request it has not resolved one for is not counted here."""

    view_attr: ClassVar[str]

    def ident_of(self, owner: Any, request: Request) -> str:
        return str(owner.pk)

    def get_cache_key(self, request: Request, view: APIView) -> str | None:
        owner = getattr(view, self.view_attr, None)
        if owner is None:
            return None
        return self.cache_format % {"scope": self.scope, "ident": self.ident_of(owner, request)}


class WidgetKeyThrottle(_ViewObjectThrottle):
    """The tenant-wide ceiling: checked only right before real work (starting a conversation,
    posting a message), never for a request that failed a check — those count against the
    caller's address only."""

    scope = "widget_key"
    view_attr = "client"


class WidgetNewConversationThrottle(WidgetIPThrottle):
    scope = "widget_conversations"


class WidgetMessageThrottle(_ViewObjectThrottle):
    """Per conversation (that is, per visitor token)."""

    scope = "widget_messages"
    view_attr = "conversation"


class WidgetRatingThrottle(_ViewObjectThrottle):
    """Ratings per visitor (the keyed hash of the client address) and client, across all their
    conversations: a visitor who starts many conversations cannot stuff the outcome figures
    with ratings (docs/outcomes.md, "CSAT")."""

    scope = "widget_ratings"
    view_attr = "client"

    def ident_of(self, owner: Any, request: Request) -> str:
        return f"{owner.pk}:{widget_visitor(request)}"
