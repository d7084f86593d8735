"""Absolute links to GuideDesk itself, for e-mails written outside a request (a Celery task has
no Host header to build one from): SITE_URL, else derived from ALLOWED_HOSTS."""

from __future__ import annotations

from django.conf import settings

LOCAL_HOSTS = {"localhost", "127.0.0.1", "[::1]"}


def site_url() -> str:
    configured = str(settings.SITE_URL or "").strip().rstrip("/")
    if configured:
        return configured
    hosts = [h for h in settings.ALLOWED_HOSTS if h and h != "*" and not h.startswith(".")]
    host = hosts[0] if hosts else "localhost"
    if host in LOCAL_HOSTS:
        return f"http://{host}:8000"
    return f"https://{host}"


def absolute_url(path: str) -> str:
    """`path` (from reverse(), starting with "/") on GuideDesk's own address."""
    return site_url() + path
