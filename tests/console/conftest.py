"""Staff console fixtures: signed-in Django test clients per role, and tenant data."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.test import Client as DjangoClient

from apps.accounts.models import Role
from apps.clients.models import Client
from tests.api.conftest import data_a, data_b  # noqa: F401  (fixtures, re-exported)
from tests.factories import MembershipFactory

# A real webhook server, for the console actions that run a tool (approving a held call).


@pytest.fixture
def browser_for(client_a: Client) -> Callable[..., DjangoClient]:
    """browser_for(role, client=client_a, csrf=False) → a signed-in Django test client."""

    def make(role: str, client: Client = client_a, csrf: bool = False) -> DjangoClient:
        membership = MembershipFactory(client=client, role=role)
        browser = DjangoClient(enforce_csrf_checks=csrf)
        browser.force_login(membership.user)
        browser.staff_user = membership.user
        return browser

    return make


@pytest.fixture
def agent(browser_for) -> DjangoClient:
    return browser_for(Role.AGENT)


@pytest.fixture
def viewer(browser_for) -> DjangoClient:
    return browser_for(Role.VIEWER)
