"""What every console page needs: who is acting, for which client, and the decorators that
resolve it. The console's pages (`views.py`, `inbox.py`, `approvals.py`, `outcomes.py`,
`reply_templates.py`) and the playground's, insights' and simulations' pages build on this
module; it imports none of them.

The tenant and the role are resolved exactly as the API resolves them for a staff session (the
one resolver, apps/api/resolver.py, with `?client=<slug>` choosing among several memberships).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import wraps
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache

from apps.api.permissions import READ, SUPPORT, role_permits, slug_is_usable
from apps.api.resolver import resolver
from apps.clients.models import Client
from apps.conversations.models import Conversation
from apps.conversations.selectors import conversation_get, staff_client_choices

# Pages refresh themselves this often (seconds) without a live doorbell stream, and this often
# with one, as a safety net.
POLL_SECONDS = 4
PUSHED_POLL_SECONDS = 60


@dataclass(frozen=True)
class ConsoleAccess:
    client: Client
    role: str
    choices: list[Client] = field(default_factory=list)

    @property
    def can_act(self) -> bool:
        """Agents and above reply and resolve; viewers only read."""
        return role_permits(self.role, SUPPORT)

    @property
    def query(self) -> str:
        """The query string that keeps this client selected on every link and form."""
        return "?" + urlencode({"client": self.client.slug})


def refresh_context(access: ConsoleAccess, poll_url: str) -> dict[str, Any]:
    """What a list page that refreshes itself needs: where it polls, the client's doorbell
    stream (it rings when any of the client's conversations changes), and how often to poll
    without and with that stream."""
    return {
        "poll_url": poll_url,
        "events_url": reverse("console-queue-events") + access.query,
        "poll_seconds": POLL_SECONDS,
        "pushed_poll_seconds": PUSHED_POLL_SECONDS,
    }


def _resolve_access(request: HttpRequest) -> ConsoleAccess | HttpResponse:
    choices = staff_client_choices(user=request.user)
    if not choices:
        return render(request, "console/no_access.html", status=403)
    if not slug_is_usable(request.GET.get("client")):
        raise Http404("No such client.")
    client = resolver.client(request)
    if client is None and not request.GET.get("client") and len(choices) == 1:
        # One client (the usual case, and the demo's superuser): nothing to choose, so straight
        # to its conversations, the client kept in every link as if it had been picked.
        client = resolver.client(request, slug=choices[0].slug)
    if client is None:
        if request.GET.get("client"):
            # A slug the user is no member of answers like an unknown one.
            raise Http404("No such client.")
        return render(request, "console/pick_client.html", {"choices": choices})
    role = resolver.role(request, client)
    if role is None:  # pragma: no cover - the resolver only returns member clients
        raise PermissionDenied
    return ConsoleAccess(client=client, role=role, choices=choices)


# A console view takes the request, the resolved access and the URL's arguments.
ConsoleView = Callable[..., HttpResponseBase]


def console_view(minimum: str = READ) -> Callable[[ConsoleView], ConsoleView]:
    """Signed-in staff only; resolves the client and role and refuses (403) a role below
    `minimum`."""

    def decorate(view: ConsoleView) -> ConsoleView:
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            access = _resolve_access(request)
            if isinstance(access, HttpResponse):
                return access
            if not role_permits(access.role, minimum):
                raise PermissionDenied(_("This needs the %(role)s role.") % {"role": minimum})
            return view(request, access, *args, **kwargs)

        return login_required(never_cache(wrapper))

    return decorate


def json_view(view: ConsoleView) -> ConsoleView:
    """For the polling endpoints: JSON errors instead of a redirect to the login page, so the
    page's script can tell "signed out" from "no access"."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not request.user.is_authenticated:
            return json_error(401, "not_authenticated", _("Sign in again."))
        access = _resolve_access(request)
        if isinstance(access, HttpResponse):
            return json_error(403, "permission_denied", _("No client is selected."))
        return view(request, access, *args, **kwargs)

    return never_cache(wrapper)


def json_error(status: int, code: str, message: str) -> JsonResponse:
    """The console's JSON error body: `{"error": {"code", "message"}}`."""
    return JsonResponse({"error": {"code": code, "message": message}}, status=status)


def conversation_or_404(access: ConsoleAccess, public_id: str) -> Conversation:
    """The client's conversation with this public id; another client's answers 404 like a
    missing one."""
    conversation = conversation_get(client=access.client, public_id=public_id)
    if conversation is None:
        raise Http404("No such conversation.")
    return conversation


def conversation_url(access: ConsoleAccess, conversation: Conversation) -> str:
    """The conversation's console page, the client kept selected."""
    path = reverse("console-conversation", args=[conversation.public_id])
    return path + access.query
