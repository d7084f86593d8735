"""Who must use two-factor authentication (TOTP through allauth) before working as staff.

MFA is required for platform superusers when `MFA_REQUIRED_FOR_SUPERUSERS` is on (the default;
off in local/demo settings), and for every member of a client with `require_mfa`. A signed-in
user who must have MFA and has no authenticator yet cannot use the admin or the console (pages
redirect to allauth's TOTP set-up) nor the staff API with a session (JSON 403 `mfa_required`)
until they set one up. Users who have TOTP sign in through allauth's code step as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from allauth.mfa.models import Authenticator
from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.utils.translation import gettext

from apps.accounts.middleware import staff_prefixes
from apps.accounts.models import Membership

MFA_REQUIRED_CODE = "mfa_required"
MFA_REQUIRED_MESSAGE = (
    "Two-factor authentication is required for this account. Set up an authenticator app at "
    "/accounts/2fa/totp/activate/ and sign in again with its code."
)


def mfa_required(user: Any) -> bool:
    """The user must have TOTP: a superuser (unless MFA_REQUIRED_FOR_SUPERUSERS is off) or a
    member of an active client that requires it."""
    if user.is_superuser and settings.MFA_REQUIRED_FOR_SUPERUSERS:
        return True
    return (
        Membership.objects.unscoped("the user's memberships, across clients")
        .filter(user=user, client__require_mfa=True, client__is_active=True)
        .exists()
    )


def mfa_missing(user: Any) -> bool:
    """A signed-in user who must have TOTP and has not set it up (checked once per request)."""
    if user is None or not user.is_authenticated or not hasattr(user, "memberships"):
        return False  # anonymous, or an API key (not a person)
    cached: bool | None = getattr(user, "_guidedesk_mfa_missing", None)
    if cached is None:
        cached = (
            mfa_required(user)
            and not Authenticator.objects.filter(user=user, type=Authenticator.Type.TOTP).exists()
        )
        user._guidedesk_mfa_missing = cached
    return cached


class RequireMfaMiddleware:
    """Staff pages (admin, console) are closed to a user who must set up MFA first. (The staff
    API checks the same rule in its session authentication, apps/accounts/authentication.py.)"""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith(staff_prefixes()) and mfa_missing(request.user):
            wants_json = request.path.endswith(".json") or "application/json" in (
                request.headers.get("Accept", "")
            )
            if wants_json:
                body = {"error": {"code": MFA_REQUIRED_CODE, "message": MFA_REQUIRED_MESSAGE}}
                return JsonResponse(body, status=403)
            messages.warning(
                request,
                gettext("Set up two-factor authentication (an authenticator app) to continue."),
            )
            return redirect("mfa_activate_totp")
        return self.get_response(request)
