"""Staff pages in the staff member's own time zone and language."""

from __future__ import annotations

import functools
import zoneinfo
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.urls import get_script_prefix, get_urlconf, reverse
from django.utils import timezone, translation


def staff_prefixes() -> tuple[str, ...]:
    """The staff pages: the admin and the console (the widget and the APIs are never among
    them — a customer's words follow the customer, not a signed-in browser's owner). Every
    request asks (this middleware and the MFA one), so the two reversals are kept per URL
    configuration and script prefix."""
    return _staff_prefixes(get_urlconf(), get_script_prefix())


@functools.lru_cache(maxsize=16)
def _staff_prefixes(urlconf: str | None, script_prefix: str) -> tuple[str, ...]:
    return (reverse("admin:index", urlconf), reverse("console-queue", urlconf))


class StaffPreferencesMiddleware:
    """On a staff page, a signed-in user's `time_zone` (times in templates and `localtime`)
    and `language` (Django's translations) are active for the request; both are put back
    afterwards. Goes after the authentication middleware (and after LocaleMiddleware, which
    it overrides for these pages)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        # The path first: a widget or API request never loads the session's user here.
        if not request.path.startswith(staff_prefixes()):
            return self.get_response(request)
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return self.get_response(request)
        zone = _zone(getattr(user, "time_zone", ""))
        language = getattr(user, "language", "")
        if zone is not None:
            timezone.activate(zone)
        previous = translation.get_language()
        if language:
            translation.activate(language)
            request.LANGUAGE_CODE = language
        try:
            response = self.get_response(request)
            if language:
                response.headers.setdefault("Content-Language", language)
            return response
        finally:
            if zone is not None:
                timezone.deactivate()
            if language:
                if previous:
                    translation.activate(previous)
                else:
                    translation.deactivate()


def _zone(name: str) -> zoneinfo.ZoneInfo | None:
    if not name:
        return None
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return None  # a zone removed from the system's database since it was saved
