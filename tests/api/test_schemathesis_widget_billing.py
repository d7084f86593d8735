"""Schemathesis over the widget, billing and current-client operations (the staff ones are in
test_schema.py; together they cover every operation, which the last test here checks):
no 5xx, and every response matches the documented status codes, content type and body schema.

Widget calls carry a real widget key and an allowed Origin, so they get past authentication and
reach the views' own validation; billing calls carry an owner API key."""

from __future__ import annotations

import re
from typing import Any

import pytest
import schemathesis
from django.core.cache import cache
from django.core.wsgi import get_wsgi_application
from django.db import transaction

from apps.accounts.models import Role
from apps.accounts.services import api_key_issue
from apps.conversations.services import conversation_create
from tests.api.conftest import make_tenant_data
from tests.api.test_schema import CHECKS, STAFF_PATHS, generated_schema
from tests.factories import ClientFactory
from tests.support.fuzz import reproducible

pytestmark = pytest.mark.django_db

ORIGIN = "https://fuzzed.example"
# The widget, billing and current client, and the staff workspace's, privacy, events, MCP
# server and e-mail channel operations.
OTHER_PATHS = (
    r"^/api/v1/(widget/|billing/|client/$|outcomes/|approvals/|flags/|reply-templates/|privacy/"
    r"|teach/|events/|mcp-servers/|mail-channels/)"
)

fuzzed_schema = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application()).include(
    path_regex=OTHER_PATHS
)


@pytest.fixture
def tenant_headers(db: Any) -> dict[str, str]:
    client = ClientFactory(slug="fuzzed", allowed_origins=[ORIGIN])
    make_tenant_data(client)
    _, token = conversation_create(client=client)
    secret = api_key_issue(client=client, name="fuzzer", role=Role.OWNER)[1]
    return {
        "X-Widget-Key": client.widget_key,
        "Origin": ORIGIN,
        "widget-token": token,
        "Authorization": f"Api-Key {secret}",
    }


@fuzzed_schema.parametrize()
@reproducible(20)
def test_widget_and_billing_keep_their_schema(
    case: Any, tenant_headers: dict[str, str], keep_connection_in_test_transaction: None
) -> None:
    headers = dict(tenant_headers)
    token = headers.pop("widget-token")
    if case.path.startswith("/api/v1/widget/"):
        headers["Authorization"] = f"Bearer {token}"
    cache.clear()  # throttling is tested elsewhere; here every case should reach the view
    with transaction.atomic():
        response = case.call(headers=headers)
        transaction.set_rollback(True)
    case.validate_response(response, checks=CHECKS, headers=headers)


def test_the_conformance_runs_cover_every_operation() -> None:
    """Every path of the schema is fuzzed for conformance by this module or test_schema.py, so
    a new endpoint cannot slip past both."""
    paths = set(generated_schema()["paths"])
    covered = {p for p in paths if STAFF_PATHS.match(p) or re.match(OTHER_PATHS, p)}
    assert covered == paths, sorted(paths - covered)
