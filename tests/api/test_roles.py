"""Who may call what: every staff endpoint × every role × API key and staff session, plus
unauthenticated callers and sessions without (or with several) memberships."""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
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
    route: str  # the URL name, less its "api-" prefix
    arg: str | None  # the attribute path, on TenantData, of the URL's one argument
    minimum: str
    success: int
    body: dict[str, Any] | str | None = None
    content_type: str | None = None  # a non-JSON body (the notes import's JSON Lines)

    def url(self, data: TenantData) -> str:
        args = None if self.arg is None else [attrgetter(self.arg)(data)]
        return reverse(f"api-{self.route}", args=args)

    def call(self, api: APIClient, data: TenantData, **extra: Any) -> Any:
        if self.content_type is not None:
            return getattr(api, self.method)(
                self.url(data), self.body, content_type=self.content_type, **extra
            )
        return getattr(api, self.method)(self.url(data), self.body, format="json", **extra)


VIEWER, AGENT, ADMIN = Role.VIEWER, Role.AGENT, Role.ADMIN
CONV = "conversation.public_id"
QUIET = "quiet_conversation.public_id"
ESCALATION = "escalation.public_id"
TOOL = "tool.name"
KEY = "client.apikey_set_first.pk"
NOTE = "client.note_first.pk"
SIMCASE = "client.simcase_first.public_id"
SIMRUN = "client.simrun_first.public_id"
ASSIGN_BODY = {"assignee": None}
KEY_BODY = {"name": "new", "role": "viewer"}
REPLY_BODY = {"text": "Hello from staff"}
HANDBACK_BODY = {"answer_waiting": False}
CONV_NOTE_BODY = {"text": "Checked the order."}
NOTE_BODY = {"type": "tip", "content": "Quote the order code."}
IMPORT_BODY = '{"type": "tip", "content": "Imported."}\n'
NDJSON = "application/x-ndjson"
ENDPOINTS = [
    Endpoint("conversation list", "get", "conversation-list", None, VIEWER, 200),
    Endpoint("conversation detail", "get", "conversation-detail", CONV, VIEWER, 200),
    Endpoint("staff reply", "post", "conversation-messages", CONV, AGENT, 201, REPLY_BODY),
    Endpoint("escalation list", "get", "escalation-list", None, VIEWER, 200),
    Endpoint("escalation resolve", "post", "escalation-resolve", ESCALATION, AGENT, 200),
    Endpoint("conversation takeover", "post", "conversation-takeover", QUIET, AGENT, 200),
    Endpoint("conversation assign", "post", "conversation-assign", CONV, AGENT, 200, ASSIGN_BODY),
    Endpoint(
        "conversation handback", "post", "conversation-handback", CONV, AGENT, 200, HANDBACK_BODY
    ),
    Endpoint("conversation notes", "get", "conversation-notes", CONV, VIEWER, 200),
    Endpoint(
        "conversation note create", "post", "conversation-notes", CONV, AGENT, 201, CONV_NOTE_BODY
    ),
    Endpoint("tool execution list", "get", "tool-execution-list", None, VIEWER, 200),
    Endpoint("tool list", "get", "tool-list", None, ADMIN, 200),
    Endpoint("tool update", "patch", "tool-detail", TOOL, ADMIN, 200, {"enabled": False}),
    Endpoint("api key list", "get", "key-list", None, ADMIN, 200),
    Endpoint("api key create", "post", "key-list", None, ADMIN, 201, KEY_BODY),
    Endpoint("api key revoke", "post", "key-revoke", KEY, ADMIN, 200),
    Endpoint("note list", "get", "note-list", None, VIEWER, 200),
    Endpoint("note create", "post", "note-list", None, AGENT, 201, NOTE_BODY),
    Endpoint("note detail", "get", "note-detail", NOTE, VIEWER, 200),
    Endpoint("note update", "patch", "note-detail", NOTE, AGENT, 200, {"status": "active"}),
    Endpoint("note delete", "delete", "note-detail", NOTE, AGENT, 204),
    Endpoint("note export", "get", "note-export", None, VIEWER, 200),
    Endpoint("note import", "post", "note-import", None, ADMIN, 200, IMPORT_BODY, NDJSON),
]
SIMCASE_BODY = {"name": "new-case", "turns": [{"customer": "Hi", "expect": {"escalated": False}}]}
SIMCASE_REPLACEMENT = {**SIMCASE_BODY, "name": "greeting", "suite": "smoke"}
SIMRUN_BODY = {"selection": {"suite": "default"}, "compare": False}
ENDPOINTS += [
    Endpoint("simcase list", "get", "simcase-list", None, VIEWER, 200),
    Endpoint("simcase create", "post", "simcase-list", None, AGENT, 201, SIMCASE_BODY),
    Endpoint("simcase detail", "get", "simcase-detail", SIMCASE, VIEWER, 200),
    Endpoint("simcase replace", "put", "simcase-detail", SIMCASE, AGENT, 200, SIMCASE_REPLACEMENT),
    Endpoint("simcase update", "patch", "simcase-detail", SIMCASE, AGENT, 200, {"enabled": False}),
    Endpoint("simcase delete", "delete", "simcase-detail", SIMCASE, AGENT, 204),
    Endpoint("simrun list", "get", "simrun-list", None, VIEWER, 200),
    Endpoint("simrun create", "post", "simrun-list", None, AGENT, 201, SIMRUN_BODY),
    Endpoint("simrun detail", "get", "simrun-detail", SIMRUN, VIEWER, 200),
    Endpoint("simrun stop", "post", "simrun-stop", SIMRUN, AGENT, 200),
    Endpoint("simrun cases", "get", "simrun-cases", SIMRUN, VIEWER, 200),
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
        "messages": _rows(Message, "text"),
        "escalations": _rows(Escalation, "status", "assigned_to"),
        "tools": _rows(ClientTool, "enabled", "description"),
        "keys": _rows(ApiKey, "revoked_at"),
        "notes": _rows(Note, "content", "status", "hits"),
        "simulation cases": _rows(SimCase, "name", "suite", "enabled"),
        "simulation runs": _rows(SimulationRun, "status", "stop_requested"),
        "conversation": _rows(type(data.conversation), "status", "last_seq"),
    }


def _rows(model: Any, *fields: str) -> list[Any]:
    """Every row of `model`, in every tenant, as (pk, *fields)."""
    return list(
        model.objects.unscoped("test checks the database directly")
        .order_by("pk")
        .values_list("pk", *fields)
    )


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
