"""The OpenAPI schema: it generates without warnings and validates, documents every staff
operation fully, and the running API keeps its promises (schemathesis: no 5xx, and every response
matches the documented status codes, content type and body schema)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from io import StringIO
from typing import Any

import pytest
import schemathesis
from django.core.management import call_command
from django.core.wsgi import get_wsgi_application
from django.db import transaction
from drf_spectacular.generators import SchemaGenerator
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from apps.accounts.models import Role
from apps.accounts.services import api_key_issue
from tests.api.conftest import make_tenant_data
from tests.factories import ClientFactory
from tests.support.fuzz import reproducible

pytestmark = pytest.mark.django_db

# The staff / back-office operations this module owns. Widget and billing operations are built
# and fuzzed by their own modules.
STAFF_PATHS = re.compile(
    r"^/api/v1/(conversations|escalations|tool-executions|tools|api-keys|notes|simulations"
    r"|knowledge)/"
)
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@schemathesis.serializer("application/x-ndjson")
def json_lines_serializer(ctx: Any, value: Any) -> bytes:
    """The notes import's body (JSON Lines, documented as a string): sent as its UTF-8 bytes;
    a generated lone surrogate goes out as the invalid bytes a broken client would send."""
    if isinstance(value, bytes):
        return value
    text = value if isinstance(value, str) else json.dumps(value)
    return text.encode("utf-8", "surrogatepass")


def make_note(client: Any) -> Any:
    """A note (an AI proposal waiting for review) for the notes operations to find."""
    from apps.notes.services import note_add

    return note_add(client=client, type="pattern", content="Customers say hi.", source="ai")


def generated_schema() -> dict[str, Any]:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    # plain JSON types only (spectacular hands back lazy strings and ordered dicts)
    return json.loads(json.dumps(schema, default=str))


# ------------------------------------------------------------------------------ the document


def test_schema_generates_without_warnings_and_validates():
    out = StringIO()
    call_command(
        "spectacular", "--fail-on-warn", "--validate", "--format", "openapi-json", stdout=out
    )
    assert json.loads(out.getvalue())["openapi"].startswith("3.")


def test_schema_and_docs_are_served(api):
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    assert "/api/v1/conversations/" in schema.json()["paths"]
    docs = api.get("/api/docs/")
    assert docs.status_code == 200
    assert b"swagger-ui" in docs.content
    assert b"cdn." not in docs.content  # assets come from drf-spectacular-sidecar


def staff_operations() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in generated_schema()["paths"].items():
        if STAFF_PATHS.match(path):
            for method, operation in item.items():
                yield path, method, operation


def test_every_staff_operation_is_documented():
    operations = list(staff_operations())
    assert {(path, method) for path, method, _ in operations} == {
        ("/api/v1/conversations/", "get"),
        ("/api/v1/conversations/{public_id}/", "get"),
        ("/api/v1/conversations/{public_id}/messages", "post"),
        ("/api/v1/escalations/", "get"),
        ("/api/v1/escalations/{escalation_id}/resolve", "post"),
        ("/api/v1/conversations/{public_id}/takeover", "post"),
        ("/api/v1/conversations/{public_id}/assign", "post"),
        ("/api/v1/conversations/{public_id}/handback", "post"),
        ("/api/v1/conversations/{public_id}/notes", "get"),
        ("/api/v1/conversations/{public_id}/notes", "post"),
        ("/api/v1/conversations/{public_id}/emails/", "get"),
        ("/api/v1/tool-executions/", "get"),
        ("/api/v1/tools/", "get"),
        ("/api/v1/tools/{name}/", "patch"),
        ("/api/v1/api-keys/", "get"),
        ("/api/v1/api-keys/", "post"),
        ("/api/v1/api-keys/{key_id}/revoke", "post"),
        ("/api/v1/notes/", "get"),
        ("/api/v1/notes/", "post"),
        ("/api/v1/notes/{note_id}/", "get"),
        ("/api/v1/notes/{note_id}/", "patch"),
        ("/api/v1/notes/{note_id}/", "delete"),
        ("/api/v1/notes/export/", "get"),
        ("/api/v1/notes/import/", "post"),
        ("/api/v1/simulations/cases/", "get"),
        ("/api/v1/simulations/cases/", "post"),
        ("/api/v1/simulations/cases/{public_id}/", "get"),
        ("/api/v1/simulations/cases/{public_id}/", "put"),
        ("/api/v1/simulations/cases/{public_id}/", "patch"),
        ("/api/v1/simulations/cases/{public_id}/", "delete"),
        ("/api/v1/simulations/runs/", "get"),
        ("/api/v1/simulations/runs/", "post"),
        ("/api/v1/simulations/runs/estimate", "post"),
        ("/api/v1/simulations/runs/{public_id}/", "get"),
        ("/api/v1/simulations/runs/{public_id}/stop", "post"),
        ("/api/v1/simulations/runs/{public_id}/cases/", "get"),
        *{
            (f"/api/v1/knowledge/{kind}/{suffix}", method)
            for kind in ("articles", "faqs", "sources")
            for suffix, methods in (("", "get post"), ("{public_id}/", "get put patch delete"))
            for method in methods.split()
        },
        ("/api/v1/knowledge/sources/{public_id}/sync", "post"),
    }
    for path, method, operation in operations:
        label = f"{method.upper()} {path}"
        assert operation.get("summary"), label
        assert operation.get("description"), label
        assert operation.get("tags"), label
        assert {"ApiKeyAuth": []} in operation["security"], label
        assert {"cookieAuth": []} in operation["security"], label
        responses = operation["responses"]
        success = [code for code in responses if code.startswith("2")]
        assert len(success) == 1, label
        for code in ("401", "403"):
            error_schema = responses[code]["content"]["application/json"]["schema"]
            assert error_schema == {"$ref": "#/components/schemas/Error"}, label
        if "{" in path:
            assert "404" in responses, label
        # JSON everywhere, but for the notes' JSON Lines export and import; a 204 has no body
        jsonl = "application/x-ndjson"
        if success[0] != "204":
            media = jsonl if path.endswith("/export/") else "application/json"
            assert "examples" in responses[success[0]]["content"][media], label
        if "requestBody" in operation:
            body_media = [jsonl if path.endswith("/import/") else "application/json"]
            if path.startswith("/api/v1/knowledge/sources/"):  # a file is uploaded as a form
                body_media.append("multipart/form-data")
            assert list(operation["requestBody"]["content"]) == body_media, label
        parameters = {p["name"] for p in operation.get("parameters", [])}
        assert "client" in parameters, label


def test_list_operations_document_pagination_and_filters():
    paths = generated_schema()["paths"]
    conversations = paths["/api/v1/conversations/"]["get"]
    parameters = {p["name"]: p for p in conversations["parameters"]}
    assert {"page", "page_size", "status", "created_after", "created_before", "has_escalation"} <= (
        set(parameters)
    )
    assert parameters["created_after"]["schema"] == {"type": "string", "format": "date"}
    assert parameters["status"]["schema"]["enum"] == ["closed", "escalated", "open"]
    page = conversations["responses"]["200"]["content"]["application/json"]["schema"]
    assert page == {"$ref": "#/components/schemas/PaginatedConversationSummaryList"}


# ---------------------------------------------------------------------------------- fuzzing


@pytest.fixture
def owner_headers(db: Any) -> dict[str, str]:
    """An owner key of a tenant with data, so every operation can succeed for real."""
    client = ClientFactory(slug="fuzzed")
    make_tenant_data(client)
    make_note(client)
    make_note(ClientFactory(slug="other-tenant"))
    secret = api_key_issue(client=client, name="fuzzer", role=Role.OWNER)[1]
    return {"Authorization": f"Api-Key {secret}"}


# Loaded from the running app, as a client would (schemathesis' pytest integration against the
# WSGI application). Its lazy `from_fixture` loader does not work with pytest 9 yet (it writes
# `Node._nodeid`, which pytest 9 renamed), so the schema is loaded when the module is collected.
fuzzed_schema = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application()).include(
    path_regex=STAFF_PATHS.pattern
)


@fuzzed_schema.parametrize()
@reproducible(25)
def test_staff_api_keeps_its_schema(
    case: Any, owner_headers: dict[str, str], keep_connection_in_test_transaction: None
) -> None:
    # Each case runs in a savepoint that is rolled back, so one case (revoking the key, say)
    # cannot change what the next one sees.
    with transaction.atomic():
        response = case.call(headers=owner_headers)
        transaction.set_rollback(True)
    case.validate_response(response, checks=CHECKS, headers=owner_headers)


# Fuzzing rarely hits a real id; these cases do, for every operation and for its error answers,
# and hold each response to the schema with the same checks.
SEEDED_CASES = [
    ("/api/v1/conversations/", "GET", {}, {"has_escalation": "true"}, None, "owner", 200),
    ("/api/v1/conversations/", "GET", {}, {"created_after": "soon"}, None, "owner", 400),
    ("/api/v1/conversations/{public_id}/", "GET", {"public_id": "conv"}, {}, None, "viewer", 200),
    (
        "/api/v1/conversations/{public_id}/messages",
        "POST",
        {"public_id": "conv"},
        {},
        {"text": "Hello"},
        "agent",
        201,
    ),
    (
        "/api/v1/conversations/{public_id}/messages",
        "POST",
        {"public_id": "conv"},
        {},
        {"text": "x" * 4001},
        "agent",
        413,
    ),
    (
        "/api/v1/conversations/{public_id}/messages",
        "POST",
        {"public_id": "conv"},
        {},
        {"text": "Hello"},
        "viewer",
        403,
    ),
    ("/api/v1/escalations/", "GET", {}, {"status": "open"}, None, "viewer", 200),
    (
        "/api/v1/escalations/{escalation_id}/resolve",
        "POST",
        {"escalation_id": "escalation"},
        {},
        None,
        "agent",
        200,
    ),
    ("/api/v1/tool-executions/", "GET", {}, {"tool": "lookup_order"}, None, "viewer", 200),
    ("/api/v1/tools/", "GET", {}, {}, None, "admin", 200),
    ("/api/v1/tools/", "GET", {}, {}, None, None, 401),
    (
        "/api/v1/tools/{name}/",
        "PATCH",
        {"name": "lookup_order"},
        {},
        {"enabled": False},
        "admin",
        200,
    ),
    (
        "/api/v1/tools/{name}/",
        "PATCH",
        {"name": "lookup_order"},
        {},
        {"kind": "read"},
        "admin",
        400,
    ),
    ("/api/v1/api-keys/", "GET", {}, {}, None, "admin", 200),
    ("/api/v1/api-keys/", "POST", {}, {}, {"name": "k", "role": "agent"}, "admin", 201),
    ("/api/v1/api-keys/{key_id}/revoke", "POST", {"key_id": "key"}, {}, None, "owner", 200),
    ("/api/v1/api-keys/{key_id}/revoke", "POST", {"key_id": "9999"}, {}, None, "owner", 404),
    ("/api/v1/notes/", "GET", {}, {"q": "order", "type": "tip"}, None, "viewer", 200),
    ("/api/v1/notes/", "GET", {}, {"status": "live"}, None, "viewer", 400),
    ("/api/v1/notes/", "POST", {}, {}, {"type": "tip", "content": "Hi."}, "agent", 201),
    ("/api/v1/notes/", "POST", {}, {}, {"type": "tip", "content": "Hi."}, "viewer", 403),
    ("/api/v1/notes/", "POST", {}, {}, {"type": "tip", "source": "ai"}, "agent", 400),
    ("/api/v1/notes/{note_id}/", "GET", {"note_id": "note"}, {}, None, "viewer", 200),
    ("/api/v1/notes/{note_id}/", "GET", {"note_id": "99999"}, {}, None, "viewer", 404),
    (
        "/api/v1/notes/{note_id}/",
        "PATCH",
        {"note_id": "note"},
        {},
        {"status": "archived"},
        "agent",
        200,
    ),
    ("/api/v1/notes/{note_id}/", "PATCH", {"note_id": "note"}, {}, {"hits": 9}, "agent", 400),
    ("/api/v1/notes/{note_id}/", "DELETE", {"note_id": "note"}, {}, None, "agent", 204),
    ("/api/v1/notes/{note_id}/", "DELETE", {"note_id": "other"}, {}, None, "owner", 404),
    ("/api/v1/notes/export/", "GET", {}, {}, None, "viewer", 200),
    ("/api/v1/notes/export/", "GET", {}, {}, None, None, 401),
    (
        "/api/v1/notes/import/",
        "POST",
        {},
        {},
        '{"type": "tip", "content": "Imported."}\n',
        "admin",
        200,
    ),
    ("/api/v1/notes/import/", "POST", {}, {}, '{"type": "hint"}\n', "admin", 400),
    ("/api/v1/notes/import/", "POST", {}, {}, '{"type": "tip"}\n', "agent", 403),
]


@pytest.mark.parametrize(
    ("path", "method", "path_parameters", "query", "body", "role", "expected"),
    SEEDED_CASES,
    ids=[f"{c[1]} {c[0]} {c[6]}" for c in SEEDED_CASES],
)
def test_seeded_requests_keep_the_schema(
    keep_connection_in_test_transaction,
    client_a,
    path,
    method,
    path_parameters,
    query,
    body,
    role,
    expected,
):
    data = make_tenant_data(client_a)
    real_ids = {
        "conv": str(data.conversation.public_id),
        "escalation": str(data.escalation.public_id),
        "key": str(api_key_issue(client=client_a, name="to revoke", role=Role.VIEWER)[0].pk),
        "note": str(make_note(client_a).pk),
        "other": str(make_note(ClientFactory(slug="other-tenant")).pk),
    }
    headers = {}
    if role:
        headers["Authorization"] = (
            "Api-Key " + api_key_issue(client=client_a, name=role, role=role)[1]
        )
    operation = fuzzed_schema[path][method]
    kwargs: dict[str, Any] = {
        "path_parameters": {k: real_ids.get(v, v) for k, v in path_parameters.items()},
        "query": query,
    }
    if body is not None:
        kwargs["body"] = body
        kwargs["media_type"] = (
            "application/x-ndjson" if isinstance(body, str) else "application/json"
        )
    case = operation.Case(**kwargs)
    response = case.call(headers=headers)
    assert response.status_code == expected, response.text
    case.validate_response(response, checks=CHECKS, headers=headers)
