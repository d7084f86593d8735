from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from drf_spectacular.authentication import SessionScheme
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from apps.accounts.models import ApiKey
from apps.accounts.services import parse_api_key
from apps.clients.models import Client


@dataclass(frozen=True)
class ApiKeyPrincipal:
    """`request.user` for a request authenticated by an API key: the client's back-office."""

    api_key: ApiKey

    is_authenticated = True
    is_anonymous = False
    is_staff = False
    is_superuser = False

    @property
    def client(self) -> Client:
        return self.api_key.client

    @property
    def role(self) -> str:
        return self.api_key.role

    @property
    def pk(self) -> str:
        return f"api-key:{self.api_key.pk}"

    def __str__(self) -> str:
        return f"API key {self.api_key.prefix}"


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """`Authorization: Api-Key <secret>`. A wrong, revoked or malformed key is a 401, never a
    fall-through to another scheme."""

    keyword = "Api-Key"

    def authenticate(self, request: Request) -> tuple[ApiKeyPrincipal, ApiKey] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, raw = header.partition(" ")
        if scheme.lower() != self.keyword.lower():
            return None
        parsed = parse_api_key(raw.strip())
        if parsed is None:
            raise exceptions.AuthenticationFailed("Malformed API key.")
        prefix, secret = parsed
        key = (
            ApiKey.objects.unscoped("an API key names its client: looked up by its prefix")
            .select_related("client", "client__plan")
            .filter(prefix=prefix)
            .first()
        )
        if key is None or not key.matches(secret):
            raise exceptions.AuthenticationFailed("Invalid API key.")
        if not key.is_active:
            raise exceptions.AuthenticationFailed("This API key has been revoked.")
        if not key.client.is_active:
            raise exceptions.AuthenticationFailed("This client is not active.")
        key.mark_used()
        return ApiKeyPrincipal(key), key

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "apps.accounts.authentication.ApiKeyAuthentication"
    name = "ApiKeyAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Api-Key <secret>` — a client API key (shown once when issued).",
        }


class StaffSessionAuthentication(authentication.SessionAuthentication):
    """Django session (staff signed in through allauth), refused with `403 mfa_required` while
    the user must set up two-factor authentication (apps/accounts/mfa.py)."""

    def authenticate(self, request: Request) -> tuple[Any, None] | None:
        from apps.accounts.mfa import MFA_REQUIRED_CODE, MFA_REQUIRED_MESSAGE, mfa_missing

        result = super().authenticate(request)
        if result is not None and mfa_missing(result[0]):
            raise exceptions.PermissionDenied(MFA_REQUIRED_MESSAGE, code=MFA_REQUIRED_CODE)
        return result


class StaffSessionScheme(SessionScheme):
    """Documented like DRF's session authentication (the `cookieAuth` scheme)."""

    target_class = "apps.accounts.authentication.StaffSessionAuthentication"
