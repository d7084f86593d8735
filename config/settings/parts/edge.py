"""The edge: what the web process itself refuses (request heads and bodies)."""

from config.settings.parts.core import env

# The edge: what the web process itself refuses, with or without a proxy in front
# (apps/platform/uvicorn_worker.py for the request head, apps/platform/asgi.BoundedRequests for
# the body; docs/deployment.md). A request head (request line + header fields) larger than
# REQUEST_HEADERS_MAX_BYTES or with more than REQUEST_HEADERS_MAX_COUNT fields gets 431; one not
# complete REQUEST_HEADER_TIMEOUT seconds after the connection opened (or the request began)
# gets 408 and the connection is closed.
REQUEST_HEADERS_MAX_BYTES = env.int("REQUEST_HEADERS_MAX_BYTES", default=32 * 1024)
REQUEST_HEADERS_MAX_COUNT = env.int("REQUEST_HEADERS_MAX_COUNT", default=100)
REQUEST_HEADER_TIMEOUT = env.float("REQUEST_HEADER_TIMEOUT", default=10.0)
# Request bodies: the widget's API (a customer message is at most 4,000 characters) and every
# other route (the back-office API's bulk imports); larger gets 413 — by Content-Length before
# a byte is read, or as soon as a streamed (chunked) body passes it. A body whose bytes do not
# arrive within REQUEST_BODY_TIMEOUT seconds gets 408.
WIDGET_REQUEST_BODY_MAX_BYTES = env.int("WIDGET_REQUEST_BODY_MAX_BYTES", default=64 * 1024)
REQUEST_BODY_MAX_BYTES = env.int("REQUEST_BODY_MAX_BYTES", default=2_621_440)
REQUEST_BODY_TIMEOUT = env.float("REQUEST_BODY_TIMEOUT", default=30.0)
# A body within the limits stays in memory: Django's ASGI handler never spools it to a file.
FILE_UPLOAD_MAX_MEMORY_SIZE = max(2_621_440, REQUEST_BODY_MAX_BYTES, WIDGET_REQUEST_BODY_MAX_BYTES)
