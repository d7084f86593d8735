"""Two tenants everywhere: every test that touches tenant data can check isolation."""

from __future__ import annotations

import importlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from django.apps import AppConfig
from django.apps import apps as django_apps
from django.core.cache import cache
from django.db.models.signals import post_migrate
from django.utils import translation
from hypothesis import settings as hypothesis_settings
from rest_framework.test import APIClient

from apps.accounts.models import Role as StaffRole
from apps.accounts.services import api_key_issue
from apps.clients import rowcache
from apps.clients.models import Client
from apps.conversations.services import unseen_replies_checks_cancel
from apps.reasoning.llm import forget_response_formats
from tests.factories import ClientFactory, MembershipFactory, ModelPriceFactory, PlanFactory

# Property tests check behaviour, not speed: on a loaded 2-core CI box one example can take
# longer than hypothesis's default 200 ms deadline, which would fail a correct test.
hypothesis_settings.register_profile("guidedesk", deadline=None)
hypothesis_settings.load_profile("guidedesk")

# The shop (read, action and destructive webhook tools), the scripted OpenAI-compatible server
# and the webhook server: fixtures that most suites use, so they are a plugin rather than a list
# each suite's conftest re-exports. A suite's own fixture of the same name still wins.
pytest_plugins = ("tests.support.shop",)

ROOT = Path(__file__).resolve().parent.parent
DEMO_TENANT = ROOT / "demo" / "tenant.json"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests against the real llama.cpp server (one file, the longest by far) first: under
    `make test`'s parallel workers (`--dist loadfile`) one worker then runs them while the others
    take the rest, instead of them running alone at the end (pytest-django orders transactional
    tests last; this runs after it)."""
    _unique_node_ids(items)
    items.sort(key=lambda item: item.get_closest_marker("llm_server") is None)


def _unique_node_ids(items: list[pytest.Item]) -> None:
    """Every collected test under its own node id. schemathesis (4.x on pytest 9) names each
    API operation's test `test_x[GET /path]` but leaves every one the function's node id;
    pytest-xdist schedules by node id, so under `make test` only one operation per schema test
    ran and the others were silently dropped. Such an item gets the id its name says; any
    other collision stops the run instead of losing tests."""
    for item in items:
        named = f"{item.parent.nodeid}::{item.name}" if item.parent is not None else item.nodeid
        if item.nodeid != named and item.name.startswith(f"{item.nodeid.rpartition('::')[2]}["):
            # pytest 9 keeps the id structured (`_pytest.nodeid.NodeId`); parse the full one.
            item._id = type(item.id).parse(named)
    twice = sorted(nodeid for nodeid, n in Counter(item.nodeid for item in items).items() if n > 1)
    if twice:
        raise pytest.UsageError(f"tests collected twice under one node id: {twice[:5]}")


def _shipped_rubrics_again(sender: AppConfig, **kwargs: Any) -> None:
    """A transactional test ends by flushing every table, the rubrics that migration
    `clients.0001_squashed_0023` ships included; Django then sends `post_migrate` (as it does to
    recreate content types). Under `make test`'s parallel workers a later test in the same worker
    can rely on those rubrics, so they are installed again here exactly as the migration leaves
    them. Tests only: in production a rubric staff deleted stays deleted."""
    if sender.label != "clients":
        return
    migration = importlib.import_module("apps.clients.migrations.0001_squashed_0023")
    migration.install_rubrics(django_apps, None)


post_migrate.connect(_shipped_rubrics_again, dispatch_uid="tests-shipped-rubrics")


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Cached rows (the notes' recent-notes list) must not outlive the test's database: on
    SQLite a later test can reuse the same client id. Throttle and login-limit counters live in
    the cache too, so every test also starts with none of those."""
    cache.clear()
    forget_response_formats()  # what the LLM gateway learnt about a provider, in this process
    rowcache.forget_all()  # client rows a rolled-back test left in this process
    # A request through the test client leaves its language (LocaleMiddleware) active in the
    # test's thread; the next test in this worker must start in the default language.
    translation.deactivate()
    yield
    cache.clear()
    forget_response_formats()
    rowcache.forget_all()
    translation.deactivate()
    # A staff reply's unseen-reply check waits on a timer (no broker here); one still waiting
    # would read a database that is gone by the time it fires.
    unseen_replies_checks_cancel()


@pytest.fixture
def plan(db):
    return PlanFactory(slug="pro", ai_mode="adaptive")


@pytest.fixture
def model_price(db):
    return ModelPriceFactory()


@pytest.fixture
def client_a(plan) -> Client:
    return ClientFactory(slug="acme", name="Acme", plan=plan)


@pytest.fixture
def client_b(plan) -> Client:
    return ClientFactory(slug="globex", name="Globex", plan=plan)


@pytest.fixture
def key_a(client_a) -> str:
    return api_key_issue(client=client_a, name="a")[1]


@pytest.fixture
def key_b(client_b) -> str:
    return api_key_issue(client=client_b, name="b")[1]


@pytest.fixture
def api() -> APIClient:
    return APIClient()


def api_for(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {key}")
    return client


def session_for(client: Client, role: str) -> APIClient:
    """An API client signed in as a new staff user with `role` in `client`."""
    membership = MembershipFactory(client=client, role=role)
    api = APIClient()
    api.force_login(membership.user)
    api.staff_user = membership.user
    return api


def key_for(client: Client, role: str) -> APIClient:
    return api_for(api_key_issue(client=client, name=f"{role} key", role=role)[1])


def credentials_for(client: Client, role: str, kind: str) -> APIClient:
    """An API client for `client` with `role`: an API key (kind "api_key") or a signed-in
    staff user (kind "session")."""
    return key_for(client, role) if kind == "api_key" else session_for(client, role)


@pytest.fixture
def owner_a(client_a: Client) -> APIClient:
    return key_for(client_a, StaffRole.OWNER)


@pytest.fixture
def agent_a(client_a: Client) -> APIClient:
    return key_for(client_a, StaffRole.AGENT)


@pytest.fixture
def viewer_a(client_a: Client) -> APIClient:
    return key_for(client_a, StaffRole.VIEWER)


@pytest.fixture
def owner_b(client_b: Client) -> APIClient:
    """Client B's most powerful key: whatever it tries on A's objects must fail."""
    return key_for(client_b, StaffRole.OWNER)


@pytest.fixture(params=["api_key", "session"])
def b_owner(request: pytest.FixtureRequest, client_b: Client) -> APIClient:
    """Client B's most powerful credentials, as a key and as a signed-in owner: whatever they
    try on A's objects must fail."""
    return credentials_for(client_b, StaffRole.OWNER, request.param)
