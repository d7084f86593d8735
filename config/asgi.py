"""ASGI entry point (the Procfile's `web` process: gunicorn + uvicorn workers)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")
django_application = get_asgi_application()

from django.conf import settings  # noqa: E402

from apps.platform.asgi import BoundedRequests, StreamingPaths  # noqa: E402  (needs the apps loaded)

# The widget's event streams, the console's doorbells and the playground's run streams hold no
# thread while open (apps/platform/asgi.py, docs/deployment.md).
STREAMING_PATHS = [
    r"^/api/v1/widget/conversations/[^/]+/events$",
    r"^/console/events$",
    r"^/console/conversations/[^/]+/events$",
    r"^/console/playground/runs/[^/]+/events$",
]
# The REST API (the widget's and the back-offices'): middleware, view and close in one borrowed
# thread instead of Django's four or five loop/thread hand-offs per request (apps/platform/asgi.py).
DIRECT_PATHS = [r"^/api/v1/"]
# Request bodies are bounded per route before Django reads them (413; docs/deployment.md).
BODY_LIMITS = [
    (r"^/api/v1/widget/", settings.WIDGET_REQUEST_BODY_MAX_BYTES),
    # a provider's post of one e-mail with its attachments (apps/mail/views.py)
    (r"^/mail/inbound/", settings.MAIL_INBOUND_MAX_BYTES),
]
application = BoundedRequests(
    StreamingPaths(django_application, STREAMING_PATHS, DIRECT_PATHS),
    default_limit=settings.REQUEST_BODY_MAX_BYTES,
    limits=BODY_LIMITS,
    body_timeout=settings.REQUEST_BODY_TIMEOUT,
)
