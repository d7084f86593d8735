"""Which language a request is served in.

Staff pages (admin, console, sign-in) follow Django's `LocaleMiddleware`: the language cookie,
then the browser's Accept-Language, then LANGUAGE_CODE. The customer's side — the widget's API
and its frame — must never follow a staff member's cookie or session (a staff member testing the
widget on the same host would otherwise switch a customer's texts): there only the browser's
Accept-Language counts, and the turn itself renders its replies in the reply language."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest
from django.middleware.locale import LocaleMiddleware
from django.utils import translation
from django.utils.translation.trans_real import (
    get_supported_language_variant,
    parse_accept_lang_header,
)

# Paths served to customers (the widget's API and its pages).
CUSTOMER_PATH_PREFIXES = ("/api/v1/widget/", "/widget/")


def customer_language(request: HttpRequest) -> str:
    """The shipped language the customer's browser asks for first, else LANGUAGE_CODE."""
    header = request.META.get("HTTP_ACCEPT_LANGUAGE", "")
    for code, _quality in parse_accept_lang_header(header):
        if code == "*":
            break
        try:
            return get_supported_language_variant(code)
        except LookupError:
            continue
    return get_supported_language_variant(settings.LANGUAGE_CODE)


class GuideDeskLocaleMiddleware(LocaleMiddleware):
    """`LocaleMiddleware`, except on customer paths, which ignore the language cookie."""

    def process_request(self, request: HttpRequest) -> None:
        if request.path_info.startswith(CUSTOMER_PATH_PREFIXES):
            translation.activate(customer_language(request))
            request.LANGUAGE_CODE = translation.get_language()
            return
        super().process_request(request)
