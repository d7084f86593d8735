"""Django's error pages (config/urls.py `handler400/403/404/500`): under /api/ they answer the
API's one JSON error shape, so a caller never has to parse an HTML page; everywhere else they
are Django's own pages.

DRF views already answer their own errors as JSON (apps.api.base.exception_handler); these
handlers cover what happens outside a DRF view: an unknown /api/ path, a suspicious request
refused by Django before any view, and an unhandled exception (the 500 is still logged by
Django as usual)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

API_PREFIX = "/api/"


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIX)


def _json_error(code: str, message: str, status: int) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message}}, status=status)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _is_api(request):
        return _json_error("bad_request", "The request is malformed.", 400)
    return defaults.bad_request(request, exception)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _is_api(request):
        return _json_error(
            "permission_denied", "You do not have permission to perform this action.", 403
        )
    return defaults.permission_denied(request, exception)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _is_api(request):
        return _json_error("not_found", "Not found.", 404)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    if _is_api(request):
        return _json_error("server_error", "A server error occurred.", 500)
    return defaults.server_error(request)
