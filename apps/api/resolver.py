"""The one resolver: how every surface turns a request into the client it acts for.

- API key → its client and role; staff session → the membership's client and role
  (`?client=<slug>` picks one of several; platform superusers may pick any client):
  `TenantAPIView`, the permission check, the staff console and the playground.
- Widget public key → its active client, then the request's origin must be one it allows:
  `WidgetAPIView`.
- Admin: the clients whose rows a page may show for a role (`TenantScopedAdmin`); platform
  operators see every client, through an explicit `unscoped(...)`.

It lives in apps.api, above accounts and clients, whose selectors and models it reads; the
widget's key check (apps.widget.auth) is the one import it makes upward (pyproject.toml).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from apps.clients.models import Client

_FROM_REQUEST = object()


class TenantResolver:
    def client(self, request: Any, *, slug: Any = _FROM_REQUEST) -> Client | None:
        """The client a staff or API-key request acts for, or None. `slug` overrides the
        request's `?client=`. Resolved once per request (cached on it)."""
        from apps.accounts.selectors import client_for_request

        if slug is _FROM_REQUEST:
            return client_for_request(request=request)
        return client_for_request(request=request, slug=slug)

    def role(self, request: Any, client: Client) -> str | None:
        """The role the request's principal holds in `client` (None: none)."""
        from apps.accounts.selectors import role_for_request

        return role_for_request(request=request, client=client)

    def widget_client(self, request: Any) -> Client:
        """The widget key's active client (401 missing/unknown, 403 switched off), whose
        allowed origins must include the request's (403)."""
        from apps.widget.auth import widget_client_resolve, widget_origin_check

        client = widget_client_resolve(request)
        widget_origin_check(request, client=client)
        return client

    def admin_client_ids(self, request: Any, need: str | None) -> list[int] | None:
        """The clients whose rows an admin page may show or change for `need`: None for a
        platform operator (every client), else the ids where the user's role reaches it."""
        from apps.api.permissions import clients_permitting

        if request.user.is_superuser:
            return None
        if need is None:
            return []
        return list(clients_permitting(request.user, need))


resolver = TenantResolver()
