"""Who may call what: every staff endpoint × every role × API key and staff session, plus
unauthenticated callers and sessions without (or with several) memberships."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from apps.accounts.models import Role, role_at_least
from tests.api.conftest import AUTH_KINDS, ROLES, TenantData, assert_error
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db


@dataclass(frozen=True)
class Endpoint:
    name: str
    method: str
    url: Callable[[TenantData], str]
    minimum: str
    success: int
    body: dict[str, Any] | str | None = None
    content_type: str | None = None  # a non-JSON body (the notes import's JSON Lines)

    def call(self, api: APIClient, data: TenantData, **extra: Any) -> Any:
        if self.content_type is not None:
            return getattr(api, self.method)(
                self.url(data), self.body, content_type=self.content_type, **extra
            )
        return getattr(api, self.method)(self.url(data), self.body, format="json", **extra)


ENDPOINTS = [
    Endpoint(
        "conversation list", "get", lambda d: reverse("api-conversation-list"), Role.VIEWER, 200
    ),
    Endpoint(
        "conversation detail",
        "get",
        lambda d: reverse("api-conversation-detail", args=[d.conversation.public_id]),
        Role.VIEWER,
        200,
    ),
    Endpoint(
        "staff reply",
        "post",
        lambda d: reverse("api-conversation-messages", args=[d.conversation.public_id]),
        Role.AGENT,
        201,
        {"text": "Hello from staff"},
    ),
    Endpoint("escalation list", "get", lambda d: reverse("api-escalation-list"), Role.VIEWER, 200),
    Endpoint(
        "escalation resolve",
        "post",
        lambda d: reverse("api-escalation-resolve", args=[d.escalation.public_id]),
        Role.AGENT,
        200,
    ),
    Endpoint(
        "conversation takeover",
        "post",
        lambda d: reverse("api-conversation-takeover", args=[d.quiet_conversation.public_id]),
        Role.AGENT,
        200,
    ),
    Endpoint(
        "conversation assign",
        "post",
        lambda d: reverse("api-conversation-assign", args=[d.conversation.public_id]),
        Role.AGENT,
        200,
        {"assignee": None},
    ),
    Endpoint(
        "conversation handback",
        "post",
        lambda d: reverse("api-conversation-handback", args=[d.conversation.public_id]),
        Role.AGENT,
        200,
        {"answer_waiting": False},
    ),
    Endpoint(
        "conversation notes",
        "get",
        lambda d: reverse("api-conversation-notes", args=[d.conversation.public_id]),
        Role.VIEWER,
        200,
    ),
    Endpoint(
        "conversation note create",
        "post",
        lambda d: reverse("api-conversation-notes", args=[d.conversation.public_id]),
        Role.AGENT,
        201,
        {"text": "Checked the order."},
    ),
    Endpoint(
        "tool execution list", "get", lambda d: reverse("api-tool-execution-list"), Role.VIEWER, 200
    ),
    Endpoint("tool list", "get", lambda d: reverse("api-tool-list"), Role.ADMIN, 200),
    Endpoint(
        "tool update",
        "patch",
        lambda d: reverse("api-tool-detail", args=[d.tool.name]),
        Role.ADMIN,
        200,
        {"enabled": False},
    ),
    Endpoint("api key list", "get", lambda d: reverse("api-key-list"), Role.ADMIN, 200),
    Endpoint(
        "api key create",
        "post",
        lambda d: reverse("api-key-list"),
        Role.ADMIN,
        201,
        {"name": "new", "role": "viewer"},
    ),
    Endpoint(
        "api key revoke",
        "post",
        lambda d: reverse("api-key-revoke", args=[d.client.apikey_set_first.pk]),
        Role.ADMIN,
        200,
    ),
    Endpoint("note list", "get", lambda d: reverse("api-note-list"), Role.VIEWER, 200),
    Endpoint(
        "note create",
        "post",
        lambda d: reverse("api-note-list"),
        Role.AGENT,
        201,
        {"type": "tip", "content": "Quote the order code."},
    ),
    Endpoint(
        "note detail",
        "get",
        lambda d: reverse("api-note-detail", args=[d.client.note_first.pk]),
        Role.VIEWER,
        200,
    ),
    Endpoint(
        "note update",
        "patch",
        lambda d: reverse("api-note-detail", args=[d.client.note_first.pk]),
        Role.AGENT,
        200,
        {"status": "active"},
    ),
    Endpoint(
        "note delete",
        "delete",
        lambda d: reverse("api-note-detail", args=[d.client.note_first.pk]),
        Role.AGENT,
        204,
    ),
    Endpoint("note export", "get", lambda d: reverse("api-note-export"), Role.VIEWER, 200),
    Endpoint(
        "note import",
        "post",
        lambda d: reverse("api-note-import"),
        Role.ADMIN,
        200,
        '{"type": "tip", "content": "Imported."}\n',
        "application/x-ndjson",
    ),
]
SIMCASE_BODY = {"name": "new-case", "turns": [{"customer": "Hi", "expect": {"escalated": False}}]}
ENDPOINTS += [
    Endpoint("simcase list", "get", lambda d: reverse("api-simcase-list"), Role.VIEWER, 200),
    Endpoint(
        "simcase create",
        "post",
        lambda d: reverse("api-simcase-list"),
        Role.AGENT,
        201,
        SIMCASE_BODY,
    ),
    Endpoint(
        "simcase detail",
        "get",
        lambda d: reverse("api-simcase-detail", args=[d.client.simcase_first.public_id]),
        Role.VIEWER,
        200,
    ),
    Endpoint(
        "simcase replace",
        "put",
        lambda d: reverse("api-simcase-detail", args=[d.client.simcase_first.public_id]),
        Role.AGENT,
        200,
        {**SIMCASE_BODY, "name": "greeting", "suite": "smoke"},
    ),
    Endpoint(
        "simcase update",
        "patch",
        lambda d: reverse("api-simcase-detail", args=[d.client.simcase_first.public_id]),
        Role.AGENT,
        200,
        {"enabled": False},
    ),
    Endpoint(
        "simcase delete",
        "delete",
        lambda d: reverse("api-simcase-detail", args=[d.client.simcase_first.public_id]),
        Role.AGENT,
        204,
    ),
    Endpoint("simrun list", "get", lambda d: reverse("api-simrun-list"), Role.VIEWER, 200),
    Endpoint(
        "simrun create",
        "post",
        lambda d: reverse("api-simrun-list"),
        Role.AGENT,
        201,
        {"selection": {"suite": "default"}, "compare": False},
    ),
    Endpoint(
        "simrun detail",
        "get",
        lambda d: reverse("api-simrun-detail", args=[d.client.simrun_first.public_id]),
        Role.VIEWER,
        200,
    ),
    Endpoint(
        "simrun stop",
        "post",
        lambda d: reverse("api-simrun-stop", args=[d.client.simrun_first.public_id]),
        Role.AGENT,
        200,
    ),
    Endpoint(
        "simrun cases",
        "get",
        lambda d: reverse("api-simrun-cases", args=[d.client.simrun_first.public_id]),
        Role.VIEWER,
        200,
    ),
]
ENDPOINT_IDS = [e.name for e in ENDPOINTS]


@pytest.fixture
def data(data_a: TenantData) -> TenantData:
    from apps.accounts.services import api_key_issue

    # a viewer key to revoke: every role that may revoke at all may revoke this one
    from apps.notes.services import note_add

    key, _ = api_key_issue(client=data_a.client, name="to revoke", role=Role.VIEWER)
    data_a.client.apikey_set_first = key
    # an AI proposal waiting for review: approving it changes it
    data_a.client.note_first = note_add(
        client=data_a.client, type="pattern", content="Customers say hi.", source="ai"
    )
    # a simulation test case and a running run (stopping it changes it)
    from apps.simulations.models import RunStatus, SimCase, SimulationRun

    data_a.client.simcase_first = SimCase.objects.create(
        client=data_a.client, name="greeting", turns=[{"customer": "Hi", "expect": {}}]
    )
    data_a.client.simrun_first = SimulationRun.objects.create(
        client=data_a.client, status=RunStatus.RUNNING, total=2
    )
    return data_a


@pytest.mark.parametrize("kind", AUTH_KINDS)
@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=ENDPOINT_IDS)
def test_role_matrix(caller, data, endpoint, role, kind):
    response = endpoint.call(caller(kind, role), data)
    if role_at_least(role, endpoint.minimum):
        assert response.status_code == endpoint.success, response.content
    else:
        error = assert_error(response, 403, "permission_denied")
        assert f"needs the {endpoint.minimum} role" in error["message"]
        assert f"have the {role} role" in error["message"]


GUARDED = [e for e in ENDPOINTS if e.minimum != Role.VIEWER]


@pytest.mark.parametrize("kind", AUTH_KINDS)
@pytest.mark.parametrize("endpoint", GUARDED, ids=[e.name for e in GUARDED])
def test_the_role_just_below_changes_nothing(caller, data, endpoint, kind):
    below = ROLES[ROLES.index(endpoint.minimum) - 1]
    api = caller(kind, below)
    snapshot = _snapshot(data)
    assert endpoint.call(api, data).status_code == 403
    assert _snapshot(data) == snapshot


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=ENDPOINT_IDS)
@pytest.mark.parametrize(
    "authorization",
    [None, "Api-Key gd_deadbeef_wrong", "Api-Key nonsense", "Bearer token", "Basic dXNlcjpwdw=="],
)
def test_unauthenticated_is_401(api, data, endpoint, authorization):
    extra = {"HTTP_AUTHORIZATION": authorization} if authorization else {}
    snapshot = _snapshot(data)
    error = assert_error(endpoint.call(api, data, **extra), 401)
    assert error["code"] in {"not_authenticated", "authentication_failed"}
    assert _snapshot(data) == snapshot


def test_401_names_the_scheme(api, data):
    response = api.get(reverse("api-conversation-list"))
    assert response["WWW-Authenticate"] == "Api-Key"


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=ENDPOINT_IDS)
def test_a_session_without_membership_is_403(api, data, endpoint):
    api.force_login(UserFactory())
    error = assert_error(endpoint.call(api, data), 403, "permission_denied")
    assert error["message"] == "No client is associated with these credentials."


def test_a_member_of_several_clients_picks_one_with_client_param(api, data, client_b):
    user = UserFactory()
    MembershipFactory(client=data.client, user=user, role=Role.VIEWER)
    MembershipFactory(client=client_b, user=user, role=Role.OWNER)
    api.force_login(user)
    url = reverse("api-conversation-list")
    assert_error(api.get(url), 403)  # ambiguous without ?client=
    acme = api.get(url, {"client": data.client.slug})
    assert acme.status_code == 200
    assert acme.json()["count"] == 2
    assert api.get(url, {"client": client_b.slug}).json()["count"] == 0
    # the role is the one of the chosen membership
    tools = reverse("api-tool-list")
    assert_error(api.get(tools, {"client": data.client.slug}), 403)
    assert api.get(tools, {"client": client_b.slug}).status_code == 200
    assert_error(api.get(url, {"client": "no-such-client"}), 403)
    assert_error(api.get(url, {"client": "acme\x00"}), 403)  # not a 500 on PostgreSQL


def test_a_superuser_acts_as_owner_of_the_chosen_client(api, data):
    api.force_login(UserFactory(is_superuser=True))
    assert_error(api.get(reverse("api-tool-list")), 403)  # which client?
    response = api.get(reverse("api-tool-list"), {"client": data.client.slug})
    assert response.status_code == 200


def test_unknown_methods_are_405_not_403(owner_a, viewer_a, data):
    url = reverse("api-conversation-list")
    assert_error(owner_a.delete(url), 405, "method_not_allowed")
    assert_error(viewer_a.put(url, {}, format="json"), 405, "method_not_allowed")


def test_session_writes_need_the_csrf_token(data):
    api = APIClient(enforce_csrf_checks=True)
    membership = MembershipFactory(client=data.client, role=Role.OWNER)
    api.force_login(membership.user)
    url = reverse("api-escalation-resolve", args=[data.escalation.public_id])
    error = assert_error(api.post(url), 403, "permission_denied")
    assert "CSRF" in error["message"]
    data.escalation.refresh_from_db()
    assert data.escalation.status == "open"


def _snapshot(data: TenantData) -> dict[str, Any]:
    from apps.accounts.models import ApiKey
    from apps.conversations.models import Message
    from apps.escalations.models import Escalation
    from apps.notes.models import Note
    from apps.simulations.models import SimCase, SimulationRun
    from apps.tools.models import ClientTool

    return {
        "messages": list(
            Message.objects.unscoped("test checks the database directly")
            .order_by("pk")
            .values_list("pk", "text")
        ),
        "escalations": list(
            Escalation.objects.unscoped("test checks the database directly")
            .order_by("pk")
            .values_list("pk", "status", "assigned_to")
        ),
        "tools": list(
            ClientTool.objects.unscoped("test checks the database directly")
            .order_by("pk")
            .values_list("pk", "enabled", "description")
        ),
        "keys": list(
            ApiKey.objects.unscoped("test checks the database directly")
            .order_by("pk")
            .values_list("pk", "revoked_at")
        ),
        "notes": list(
            Note.objects.unscoped("test checks the database directly")
            .order_by("pk")
            .values_list("pk", "content", "status", "hits")
        ),
        "simulation cases": list(
            SimCase.objects.unscoped("test checks the database directly")
            .order_by("pk")
            .values_list("pk", "name", "suite", "enabled")
        ),
        "simulation runs": list(
            SimulationRun.objects.unscoped("test checks the database directly")
            .order_by("pk")
            .values_list("pk", "status", "stop_requested")
        ),
        "conversation": list(
            type(data.conversation)
            .objects.unscoped("test checks the database directly")
            .order_by("pk")
            .values_list("pk", "status", "last_seq")
        ),
    }


STAFF_URLCONFS = [
    "apps.conversations.urls",
    "apps.escalations.urls",
    "apps.tools.urls",
    "apps.accounts.urls",
    "apps.notes.urls",
    "apps.simulations.urls",
    "apps.knowledge.urls",
    "apps.approvals.urls",
]
HANDLERS = ("get", "post", "put", "patch", "delete")


@pytest.mark.parametrize("urlconf", STAFF_URLCONFS)
def test_every_staff_view_checks_a_role_for_every_handler(urlconf):
    from importlib import import_module

    from apps.api.base import TenantAPIView
    from apps.api.permissions import HasClientRole, StaffAPIView

    patterns = import_module(urlconf).urlpatterns
    assert patterns
    for pattern in patterns:
        view = pattern.callback.view_class
        assert issubclass(view, StaffAPIView), view
        assert issubclass(view, TenantAPIView), view
        assert HasClientRole in view.permission_classes, view
        for handler in HANDLERS:
            if hasattr(view, handler):
                assert handler.upper() in view.required_roles, (view, handler)


def test_a_handler_without_a_role_is_refused_not_let_through(owner_a):
    from django.core.exceptions import ImproperlyConfigured
    from rest_framework.response import Response
    from rest_framework.test import APIRequestFactory

    from apps.api.permissions import StaffAPIView

    class Forgetful(StaffAPIView):
        required_roles = {"GET": Role.VIEWER}

        def get(self, request):
            return Response({})

        def delete(self, request):  # no role declared
            return Response({})

    request = APIRequestFactory().delete(
        "/", HTTP_AUTHORIZATION=owner_a._credentials["HTTP_AUTHORIZATION"]
    )
    with pytest.raises(ImproperlyConfigured, match="declares no role for DELETE"):
        Forgetful.as_view()(request)
