"""The OpenAPI schema (`/api/schema/`) and Swagger UI (`/api/docs/`): public only when
`API_DOCS_PUBLIC` is on (local development and the tests); otherwise — production — only for
signed-in staff (a staff-status user or a member of some client). Swagger UI sends a visitor to
the sign-in page; the schema answers in the API's JSON error shape."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, JsonResponse
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from apps.accounts.models import Membership

View = Callable[..., HttpResponse]


def is_signed_in_staff(user: Any) -> bool:
    if not (user.is_authenticated and user.is_active):
        return False
    memberships = Membership.objects.unscoped("is the user staff of any client")
    return bool(user.is_staff or memberships.filter(user=user).exists())


def staff_unless_public(*, redirect: bool) -> Callable[[View], View]:
    def decorate(view: View) -> View:
        @wraps(view)
        def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if settings.API_DOCS_PUBLIC or is_signed_in_staff(request.user):
                return view(request, *args, **kwargs)
            if not request.user.is_authenticated:
                if redirect:
                    return redirect_to_login(request.get_full_path())
                return _error(401, "not_authenticated", "Sign in as staff to read the schema.")
            return _error(403, "permission_denied", "The API schema is for staff only.")

        return guarded

    return decorate


def _error(status: int, code: str, message: str) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message}}, status=status)


schema_view = staff_unless_public(redirect=False)(SpectacularAPIView.as_view())
docs_view = staff_unless_public(redirect=True)(SpectacularSwaggerView.as_view(url_name="schema"))
