"""Which language a request is served in: staff pages follow the language cookie and the
browser; the widget's paths follow only the browser, never a staff member's cookie."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory
from django.utils import translation

from apps.core.locale import GuideDeskLocaleMiddleware


def language_for(path: str, *, cookie: str = "", accept: str = "") -> str:
    seen: list[str] = []

    def view(request: HttpRequest) -> HttpResponse:
        seen.append(translation.get_language())
        return HttpResponse("ok")

    factory = RequestFactory()
    if cookie:
        factory.cookies[settings.LANGUAGE_COOKIE_NAME] = cookie
    request = factory.get(path, headers={"accept-language": accept} if accept else {})
    with translation.override(None):
        GuideDeskLocaleMiddleware(view)(request)
    assert seen[0] == request.LANGUAGE_CODE
    return seen[0]


def test_the_middleware_sits_after_sessions_and_before_common():
    chain = settings.MIDDLEWARE
    mine = chain.index("apps.core.locale.GuideDeskLocaleMiddleware")
    assert chain.index("django.contrib.sessions.middleware.SessionMiddleware") < mine
    assert mine < chain.index("django.middleware.common.CommonMiddleware")


@pytest.mark.parametrize("path", ["/admin/", "/console/", "/accounts/login/"])
def test_staff_pages_follow_the_language_cookie_then_the_browser(path):
    assert language_for(path, cookie="es", accept="he") == "es"
    assert language_for(path, accept="fr-CH, fr;q=0.9") == "fr"
    assert language_for(path, accept="ja") == "en"


@pytest.mark.parametrize("path", ["/api/v1/widget/conversations", "/widget/frame"])
def test_the_widget_never_follows_a_staff_cookie(path):
    assert language_for(path, cookie="es") == "en"
    assert language_for(path, cookie="es", accept="he-IL,he;q=0.9") == "he"
    assert language_for(path, cookie="es", accept="ja, de;q=0.5") == "de"
