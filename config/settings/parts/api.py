"""The HTTP API: proxies in front of it, DRF (throttles), the OpenAPI schema, CORS."""

from corsheaders.defaults import default_headers

from config.settings.parts.core import env

# Client addresses behind a reverse proxy: the number of proxies we run in front of the app,
# each appending the address it saw to X-Forwarded-For. One setting feeds DRF's throttles
# (NUM_PROXIES) and allauth's login limits (ALLAUTH_TRUSTED_PROXY_COUNT); with 0 the header is
# ignored, so behind a proxy every visitor would share the proxy's address (and its limits).
TRUSTED_PROXY_COUNT = env.int("TRUSTED_PROXY_COUNT", default=0)
ALLAUTH_TRUSTED_PROXY_COUNT = TRUSTED_PROXY_COUNT

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "apps.accounts.authentication.ApiKeyAuthentication",
        "apps.accounts.authentication.StaffSessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "apps.api.base.exception_handler",
    # JSON only, with limits on nesting, strings and numbers (apps/platform/parsers.py).
    "DEFAULT_PARSER_CLASSES": ["apps.platform.parsers.JSONParser"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "apps.platform.negotiation.LenientContentNegotiation",
    "DEFAULT_PAGINATION_CLASS": "apps.api.base.Pagination",
    "PAGE_SIZE": 50,
    "UNAUTHENTICATED_USER": None,
    # How many reverse proxies in front of us append to X-Forwarded-For (see TRUSTED_PROXY_COUNT
    # below); 0 = the address comes from the socket (REMOTE_ADDR) and the header is ignored.
    "NUM_PROXIES": TRUSTED_PROXY_COUNT,
    "DEFAULT_THROTTLE_RATES": {
        # The public chat widget (docs/widget.md). Every request, failed ones included, counts
        # against the caller's address; the tenant-wide ceiling counts only real work
        # (conversations started and messages posted), so nobody can lock a tenant out with its
        # public widget key.
        "widget_ip": env("THROTTLE_WIDGET_IP", default="120/min"),
        "widget_key": env("THROTTLE_WIDGET_KEY", default="3000/min"),
        "widget_conversations": env("THROTTLE_WIDGET_CONVERSATIONS", default="10/min"),
        "widget_messages": env("THROTTLE_WIDGET_MESSAGES", default="20/min"),
        # Ratings per visitor (client address) and client, over all their conversations: a
        # visitor cannot stuff the outcome figures by starting and rating many conversations.
        "widget_ratings": env("THROTTLE_WIDGET_RATINGS", default="20/hour"),
        # Tokens, not requests: what the turns of one conversation (a widget session: one
        # customer), and of one client address (an office or a carrier's NAT: many), used in
        # the window. Over either, the next message is stored and handed to staff with a short
        # notice, no model call (docs/widget.md "Limits"); a turn admitted under it may take
        # them past it. Sized from the README's demo conversation
        # (devtools/benchmarks/demo_tokens.py: ≈ 40k tokens, ≈ 144k were every turn
        # deliberative): a conversation gets more than that, an address ten times it.
        "widget_tokens": env("THROTTLE_WIDGET_TOKENS", default="200000/hour"),
        "widget_address_tokens": env("THROTTLE_WIDGET_ADDRESS_TOKENS", default="2000000/hour"),
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "GuideDesk API",
    "DESCRIPTION": "Widget, staff and back-office API of GuideDesk.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI and Redoc are served from our own static files, never a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# The OpenAPI schema and Swagger UI: signed-in staff only unless this is on (config/api_docs.py).
API_DOCS_PUBLIC = env.bool("API_DOCS_PUBLIC", default=False)

CORS_ALLOW_ALL_ORIGINS = False
# The widget API sends its public key and SSE resume position in headers (apps/widget/auth.py
# decides per request which origins get CORS).
CORS_ALLOW_HEADERS = (*default_headers, "x-widget-key", "last-event-id")
CORS_ALLOWED_ORIGINS: list[str] = env.list("CORS_ALLOWED_ORIGINS", default=[])
