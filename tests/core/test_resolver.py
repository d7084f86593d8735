"""One resolver (apps/api/resolver.py) turns a request into its client for every surface: the
API, the widget, the staff console, the playground and the admin all go through it. Each test
records the resolver's calls (the real method runs) while a surface serves a request."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client as DjangoClient
from django.urls import reverse

from apps.accounts.models import Role
from apps.api.resolver import TenantResolver, resolver
from tests.conftest import api_for
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """Each call of the shared resolver: (method, what it returned)."""
    seen: list[tuple[str, Any]] = []

    def recording(name: str) -> Callable[..., Any]:
        real = getattr(TenantResolver, name).__get__(resolver)

        def call(*args: Any, **kwargs: Any) -> Any:
            result = real(*args, **kwargs)
            seen.append((name, result))
            return result

        return call

    for name in ("client", "role", "widget_client", "admin_client_ids"):
        monkeypatch.setattr(resolver, name, recording(name))
    return seen


def _browser(client: Any, role: str = Role.AGENT) -> DjangoClient:
    membership = MembershipFactory(client=client, role=role)
    browser = DjangoClient()
    browser.force_login(membership.user)
    return browser


def test_the_api_resolves_through_it(calls, client_a, key_a):
    response = api_for(key_a).get("/api/v1/conversations/")
    assert response.status_code == 200
    assert ("client", client_a) in calls


def test_the_widget_resolves_through_it(calls, client_a):
    response = DjangoClient().post(
        "/api/v1/widget/conversations",
        {},
        content_type="application/json",
        headers={"X-Widget-Key": client_a.widget_key, "Origin": client_a.allowed_origins[0]},
    )
    assert response.status_code == 201, response.content
    assert ("widget_client", client_a) in calls


def test_the_console_resolves_through_it(calls, client_a):
    response = _browser(client_a).get(reverse("console-queue"))
    assert response.status_code == 200
    assert ("client", client_a) in calls
    assert ("role", Role.AGENT) in calls


def test_the_playground_resolves_through_it(calls, client_a):
    response = _browser(client_a).get(reverse("playground"))
    assert response.status_code == 200
    assert ("client", client_a) in calls


def test_the_admin_resolves_through_it(calls, client_a, client_b):
    member = MembershipFactory(
        client=client_a, role=Role.ADMIN, user=UserFactory(is_superuser=False, is_staff=True)
    )
    member.user.user_permissions.add(*Permission.objects.filter(codename="view_conversation"))
    browser = DjangoClient()
    browser.force_login(member.user)
    response = browser.get(reverse("admin:conversations_conversation_changelist"))
    assert response.status_code == 200
    assert ("admin_client_ids", [client_a.pk]) in calls
    operator = DjangoClient()
    operator.force_login(UserFactory(is_superuser=True, is_staff=True))
    assert operator.get(reverse("admin:conversations_conversation_changelist")).status_code == 200
    assert ("admin_client_ids", None) in calls  # a platform operator: every client
