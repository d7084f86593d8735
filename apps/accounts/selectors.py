from __future__ import annotations

from typing import Any

from apps.accounts.authentication import ApiKeyPrincipal
from apps.accounts.models import Membership, Role
from apps.clients.models import Client

_CACHE_ATTR = "_guidedesk_tenant"  # (client, role) once resolved for this request
_FROM_REQUEST: Any = object()


def client_for_request(*, request: Any, slug: str | None = _FROM_REQUEST) -> Client | None:
    """The tenant a request acts for: the API key's client, or — for a staff session — the
    client of the user's membership (`?client=<slug>` picks one when the user has several;
    platform superusers may pick any client; `slug` given: that instead of the query string's).
    Resolved once per request: the permission check and the view both ask."""
    cached = getattr(request, _CACHE_ATTR, None)
    if cached is not None:
        return cached[0]
    if slug is _FROM_REQUEST:
        query = getattr(request, "query_params", None)
        if query is None:
            query = getattr(request, "GET", {})
        slug = query.get("client")
    client, role = _resolve(request, slug)
    if client is not None:
        setattr(request, _CACHE_ATTR, (client, role))
    return client


def _resolve(request: Any, wanted: str | None) -> tuple[Client | None, str | None]:
    user = request.user
    if isinstance(user, ApiKeyPrincipal):
        return user.client, user.role
    if user is None or not user.is_authenticated:
        return None, None
    if wanted is not None and ("\x00" in wanted or len(wanted) > 50):
        return None, None  # no client has such a slug (and PostgreSQL refuses NUL in text)
    if user.is_superuser:
        if wanted:
            return Client.objects.select_related("plan").filter(slug=wanted).first(), Role.OWNER
        return None, None
    memberships = (
        Membership.objects.unscoped("the user's memberships, across clients, pick the client")
        .select_related("client", "client__plan")
        .filter(user=user, client__is_active=True)
    )
    if wanted:
        memberships = memberships.filter(client__slug=wanted)
    found = list(memberships[:2])
    if len(found) != 1:
        return None, None
    return found[0].client, found[0].role


def role_for_request(*, request: Any, client: Client) -> str | None:
    cached = getattr(request, _CACHE_ATTR, None)
    if cached is not None and cached[0].pk == client.pk:
        return cached[1]
    user = request.user
    if isinstance(user, ApiKeyPrincipal):
        return user.role if user.client.pk == client.pk else None
    if user is None or not user.is_authenticated:
        return None
    if user.is_superuser:
        return Role.OWNER
    membership = Membership.objects.for_client(client).filter(user=user).first()
    return membership.role if membership else None


def membership_roles(*, user: Any) -> dict[int, str]:
    """{client id: role} for each of the user's memberships in an active client."""
    return dict(
        Membership.objects.unscoped("the user's memberships, across clients")
        .filter(user=user, client__is_active=True)
        .values_list("client_id", "role")
    )
