"""`python -m tests.faults.serve PORT`: GuideDesk behind a single-threaded WSGI server, for the
fault suite. One process, one thread: its database connection persists from request to request
(CONN_MAX_AGE), as in a gunicorn sync worker."""

from __future__ import annotations

import sys
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

import django


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """No access log."""


def main() -> None:
    django.setup()
    from django.core.wsgi import get_wsgi_application

    httpd = make_server(
        "127.0.0.1", int(sys.argv[1]), get_wsgi_application(), handler_class=_QuietHandler
    )
    httpd.serve_forever()


if __name__ == "__main__":
    main()
