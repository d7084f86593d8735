"""The one permission rule of GuideDesk, asked by the API, the staff console and the admin.

    viewer  READ     the client's conversations (with internal reasoning), escalations, tool runs
    agent   SUPPORT  + reply to customers as staff, resolve escalations / hand back to the AI
    admin   MANAGE   + tools, API keys, the client's settings, usage and billing
    owner            everything an admin can, and may grant the owner role
    platform operators (superusers): every client as its owner, and the platform-wide rows
    (plans, model prices, accounts, memberships) nobody else may see or change

The caller's role is the API key's own role, or — for a staff session — the role of the user's
membership in the client (`client_role`). `role_permits(role, need)` is the rule itself:

- the API: a view states the need of each HTTP method in `required_roles`; `HasClientRole`
  enforces it before the handler runs, and a handler the view forgot to give a role is refused
  (ImproperlyConfigured), never let through;
- the console: `console_view(minimum=...)` and `ConsoleAccess.can_act`;
- the admin: `TenantScopedAdmin` (apps/api/admin.py) asks it for every object's client on list,
  change, add and delete pages, inlines, custom views and every admin action. Django's model
  permissions can only narrow what the role allows there, never widen it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from django.core.exceptions import ImproperlyConfigured
from rest_framework import exceptions
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from apps.accounts.models import Role, User, role_at_least
from apps.api.base import Pagination, TenantAPIView
from apps.platform.parsers import JSONParser

NO_CLIENT_MESSAGE = "No client is associated with these credentials."

# What each kind of work needs (the minimum role).
READ = Role.VIEWER
SUPPORT = Role.AGENT
MANAGE = Role.ADMIN


def role_permits(role: str | None, need: str) -> bool:
    """The rule: `role` (None = no role in that client) may do work that needs `need`."""
    return role is not None and role_at_least(role, need)


def may_grant(actor_role: str | None, role: str) -> bool:
    """Managing credentials needs MANAGE, and nobody hands out (or takes away) more power than
    they hold: an admin cannot create or revoke an owner key."""
    return role_permits(actor_role, MANAGE) and role_permits(actor_role, role)


def client_role(user: Any, client_id: int | None) -> str | None:
    """A staff user's role in one client: platform superusers act as owners; members have their
    membership's role; anybody else (or no client) has none. Roles are read once per user object
    and cached on it (the admin asks for every row of a page)."""
    if user is None or not user.is_authenticated or not user.is_active or client_id is None:
        return None
    if user.is_superuser:
        return Role.OWNER
    return client_roles(user).get(client_id)


def client_roles(user: Any) -> dict[int, str]:
    """{client id: role} of every membership of an active client (cached on the user object)."""
    from apps.accounts.selectors import membership_roles

    cached: dict[int, str] | None = getattr(user, "_guidedesk_roles", None)
    if cached is None:
        cached = membership_roles(user=user)
        user._guidedesk_roles = cached
    return cached


def user_may(user: Any, client_id: int | None, need: str) -> bool:
    return role_permits(client_role(user, client_id), need)


def clients_permitting(user: Any, need: str) -> list[int]:
    """Ids of the clients in which a (non-superuser) staff user may do work that needs `need`."""
    return [pk for pk, role in client_roles(user).items() if role_permits(role, need)]


def required_role(view: Any, method: str) -> str | None:
    """The minimum role for `method` on `view`; None when the view has no such handler (DRF then
    answers 405)."""
    method = method.upper()
    if method == "HEAD":
        method = "GET"
    roles: Mapping[str, str] = getattr(view, "required_roles", {})
    if method in roles:
        return roles[method]
    if method == "OPTIONS":
        return Role.VIEWER
    if hasattr(view, method.lower()):
        raise ImproperlyConfigured(f"{type(view).__name__} declares no role for {method}.")
    return None


def slug_is_usable(slug: str | None) -> bool:
    """False for a `?client=` value no client can have and PostgreSQL cannot even compare (a NUL
    byte makes the driver raise): such a request names no client."""
    return slug is None or "\x00" not in slug


class HasClientRole(BasePermission):
    """The caller has at least the role the view requires for this method in the client the
    request acts for. Stores the role on the view as `view.role`.

    The tenant is resolved by the resolver `TenantAPIView` uses (DRF checks permissions
    before the view's `initial()` sets `self.client`); for API keys that costs no query, for
    staff sessions one cheap membership lookup."""

    message = NO_CLIENT_MESSAGE

    def has_permission(self, request: Request, view: Any) -> bool:
        from apps.api.resolver import resolver

        minimum = required_role(view, request.method or "GET")
        if not slug_is_usable(request.query_params.get("client")):
            self.message = NO_CLIENT_MESSAGE
            return False
        client = resolver.client(request)
        if client is None:
            self.message = NO_CLIENT_MESSAGE
            return False
        role = resolver.role(request, client)
        if role is None:
            self.message = NO_CLIENT_MESSAGE
            return False
        view.role = role
        if minimum is None or role_permits(role, minimum):
            return True
        self.message = (
            f"This needs the {minimum} role or higher; these credentials have the {role} role."
        )
        return False


class StaffAPIView(TenantAPIView):
    """Base of every staff / back-office endpoint: a tenant (`self.client`) and a role check
    (`self.role`). Subclasses declare `required_roles = {"GET": Role.VIEWER, ...}`."""

    permission_classes = [IsAuthenticated, HasClientRole]
    # JSON only: one request format to document, validate and test.
    parser_classes = [JSONParser]
    # Read by drf-spectacular to document list responses as pages.
    pagination_class = Pagination
    required_roles: ClassVar[Mapping[str, str]] = {}
    role: str

    def paginated_response(self, queryset: Any, serializer_class: type[Any]) -> Response:
        """One page of `queryset` as `{"count", "next", "previous", "results"}`."""
        paginator = self.pagination_class()
        page: list[Any] | None = paginator.paginate_queryset(queryset, self.request, view=self)
        return paginator.get_paginated_response(serializer_class(page, many=True).data)

    def list_response(
        self,
        selector: Callable[..., Any],
        serializer_class: type[Any],
        *,
        filters: type[Any] | None = None,
        **fixed: Any,
    ) -> Response:
        """A list endpoint's answer: one page of what `selector` finds for this client, given the
        query string validated by `filters` (each filter a keyword argument of the selector) and
        the endpoint's own `fixed` arguments. The selector always gets `client=self.client`, so
        a list cannot leave its tenant."""
        query = self.validated_query(filters) if filters is not None else {}
        return self.paginated_response(
            selector(client=self.client, **fixed, **query), serializer_class
        )


def acting_user(request: Request) -> User | None:
    """The staff user behind the request, or None for an API key (a back-office, not a
    person)."""
    user = request.user
    return user if isinstance(user, User) else None


def ensure_may_grant(*, actor_role: str, role: str) -> None:
    """Nobody hands out (or takes away) more power than they hold: an admin cannot create or
    revoke an owner key."""
    if not may_grant(actor_role, role):
        raise exceptions.PermissionDenied(
            f"Your role ({actor_role}) cannot manage credentials with the {role} role."
        )
