"""Hostile input gets the one JSON error shape on every endpoint class, never a 500 or an HTML
page: deep nesting, lone surrogates, NUL characters, huge numbers, bodies over
Django's upload limit, unknown /api/ paths and methods, and the server-error page itself.

Bodies are sent raw (not through the test client's JSON encoder, which would refuse some of
them), the way an attacker's script sends them."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.conf import settings
from django.core.cache import cache
from django.test import Client as DjangoClient
from django.test import RequestFactory

from apps.accounts.models import Role
from apps.accounts.services import api_key_issue
from apps.conversations.services import conversation_create
from tests.api.conftest import assert_error, make_tenant_data

pytestmark = pytest.mark.django_db

ORIGIN = "https://shop.example"
DEEP = "[" * 20_000 + "]" * 20_000  # 40 KB
MODERATE = '{"text": ' + "[" * 200 + "]" * 200 + "}"  # under the interpreter's recursion limit


@dataclass
class Endpoint:
    name: str
    method: str
    path: str
    headers: dict[str, str]
    valid: dict[str, Any]  # a body this endpoint accepts (a string field to carry payloads)
    field: str
    reads_body: bool = True  # False: no body is documented, and none is read


@pytest.fixture
def endpoints(client_a: Any) -> dict[str, Endpoint]:
    client_a.allowed_origins = [ORIGIN]
    client_a.save()
    data = make_tenant_data(client_a)
    conversation, token = conversation_create(client=client_a)
    owner_key = api_key_issue(client=client_a, name="owner", role=Role.OWNER)[1]
    owner = {"HTTP_AUTHORIZATION": f"Api-Key {owner_key}"}
    widget = {"HTTP_X_WIDGET_KEY": client_a.widget_key, "HTTP_ORIGIN": ORIGIN}
    visitor = {**widget, "HTTP_AUTHORIZATION": f"Bearer {token}"}
    conv = data.conversation.public_id
    found = [
        Endpoint("widget start", "post", "/api/v1/widget/conversations", widget, {}, "visitor_id"),
        Endpoint(
            "widget message",
            "post",
            f"/api/v1/widget/conversations/{conversation.public_id}/messages",
            visitor,
            {},
            "text",
        ),
        Endpoint(
            "staff message",
            "post",
            f"/api/v1/conversations/{conv}/messages",
            owner,
            {},
            "text",
        ),
        Endpoint(
            "escalation resolve",
            "post",
            f"/api/v1/escalations/{_escalation_ref(data.escalation)}/resolve",
            owner,
            {},
            "note",
            reads_body=False,
        ),
        Endpoint("tool update", "patch", "/api/v1/tools/lookup_order/", owner, {}, "description"),
        Endpoint("api key create", "post", "/api/v1/api-keys/", owner, {"role": "viewer"}, "name"),
        Endpoint("billing usage", "get", "/api/v1/billing/usage/", owner, {}, "start", False),
        Endpoint("current client", "get", "/api/v1/client/", owner, {}, "name", False),
    ]
    return {e.name: e for e in found}


def _escalation_ref(escalation: Any) -> str:
    return str(getattr(escalation, "public_id", escalation.pk))


ENDPOINTS = [
    "widget start",
    "widget message",
    "staff message",
    "tool update",
    "api key create",
    "escalation resolve",
    "billing usage",
    "current client",
]
WRITES = ENDPOINTS[:5]


def send(endpoint: Endpoint, body: str | bytes, **extra: Any) -> Any:
    cache.clear()  # throttles are tested elsewhere
    http = DjangoClient(raise_request_exception=False)
    call: Callable[..., Any] = getattr(http, endpoint.method)
    if endpoint.method == "get":
        # a body on GET is still read by nothing; the point is that it is not a 500
        return call(endpoint.path, content_type="application/json", **endpoint.headers, **extra)
    return call(
        endpoint.path,
        data=body,
        content_type="application/json",
        **endpoint.headers,
        **extra,
    )


def assert_json_error(response: Any, status: int, code: str | None = None) -> dict[str, Any]:
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    return assert_error(response, status, code)


@pytest.mark.parametrize("name", WRITES)
def test_deeply_nested_json_is_a_400(endpoints: dict[str, Endpoint], name: str) -> None:
    assert_json_error(send(endpoints[name], DEEP), 400, "parse_error")


@pytest.mark.parametrize("name", WRITES)
def test_nesting_deeper_than_the_limit_is_a_400_even_below_the_recursion_limit(
    endpoints: dict[str, Endpoint], name: str
) -> None:
    error = assert_json_error(send(endpoints[name], MODERATE), 400, "parse_error")
    assert "nest" in error["message"]


@pytest.mark.parametrize("name", WRITES)
@pytest.mark.parametrize(
    "payload",
    [r'"\ud800"', r'"a\udfffb"', r'"nul \u0000 inside"'],
    ids=["lone high surrogate", "lone low surrogate", "NUL"],
)
def test_surrogates_and_nul_in_strings_are_a_400(
    endpoints: dict[str, Endpoint], name: str, payload: str
) -> None:
    endpoint = endpoints[name]
    body = json.dumps(endpoint.valid)[:-1] + ("," if endpoint.valid else "")
    body += f'"{endpoint.field}": {payload}}}'
    error = assert_json_error(send(endpoint, body), 400, "invalid")
    expected = "NUL characters" if "u0000" in payload else "lone surrogates"
    assert expected in error["fields"][endpoint.field]


@pytest.mark.parametrize("name", WRITES)
def test_surrogates_and_nul_in_nested_values_and_keys_are_a_400(
    endpoints: dict[str, Endpoint], name: str
) -> None:
    nested = send(endpoints[name], r'{"a": {"b": [1, "x\ud800"]}}')
    assert "lone surrogates" in assert_json_error(nested, 400, "invalid")["fields"]["a.b.1"]
    key = send(endpoints[name], r'{"a": {"\ud800\u0000": 1}}')
    assert "Keys: must not" in assert_json_error(key, 400, "invalid")["fields"]["a"]


@pytest.mark.parametrize("name", WRITES)
@pytest.mark.parametrize(
    "payload", ["1e400", "-1e400", "9" * 5000, "1" + "0" * 40], ids=["inf", "-inf", "5000", "1e40"]
)
def test_huge_numbers_are_a_400(endpoints: dict[str, Endpoint], name: str, payload: str) -> None:
    endpoint = endpoints[name]
    assert_json_error(send(endpoint, f'{{"{endpoint.field}": {payload}}}'), 400, "parse_error")


@pytest.mark.parametrize("name", WRITES)
def test_invalid_utf8_is_a_400(endpoints: dict[str, Endpoint], name: str) -> None:
    endpoint = endpoints[name]
    assert_json_error(send(endpoint, b'{"' + endpoint.field.encode() + b'": "\xed\xa0\x80"}'), 400)


@pytest.mark.parametrize("name", ENDPOINTS)
def test_a_body_over_the_upload_limit_is_a_json_413(
    endpoints: dict[str, Endpoint], name: str
) -> None:
    endpoint = endpoints[name]
    text = "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)
    response = send(endpoint, json.dumps({endpoint.field: text}))
    if not endpoint.reads_body:  # a body nobody reads is simply ignored
        assert response.status_code < 500
        assert response["Content-Type"].startswith("application/json")
        return
    assert_json_error(response, 413, "too_large")


@pytest.mark.parametrize("name", ENDPOINTS)
def test_hostile_bodies_never_give_a_server_error(
    endpoints: dict[str, Endpoint], name: str
) -> None:
    for body in [DEEP, MODERATE, r'["\ud800"]', "\x00", "{", "[]", "null", '"x"', "1e999"]:
        response = send(endpoints[name], body)
        assert response.status_code < 500, (body[:40], response.content[:200])
        assert response["Content-Type"].startswith("application/json"), body[:40]


@pytest.mark.parametrize(
    ("path", "query"),
    [
        ("/api/v1/conversations/", "status=%00"),
        ("/api/v1/conversations/", "created_after=%00"),
        ("/api/v1/conversations/", "page=99999999999999999999999"),
        ("/api/v1/escalations/", "status=%00"),
        ("/api/v1/tool-executions/", "tool=%00"),
        ("/api/v1/tool-executions/", "tool=%ED%A0%80"),
        ("/api/v1/billing/usage/", "start=%00"),
        ("/api/v1/billing/turns/", "page_size=99999999999999999999999"),
        ("/api/v1/tools/%00/", ""),
    ],
)
def test_hostile_query_strings_never_give_a_server_error(
    endpoints: dict[str, Endpoint], path: str, query: str
) -> None:
    owner = endpoints["tool update"].headers
    http = DjangoClient(raise_request_exception=False)
    response = http.get(f"{path}?{query}", **owner)
    assert response.status_code < 500, response.content[:200]
    assert response["Content-Type"].startswith("application/json")


def test_a_valid_body_still_works(endpoints: dict[str, Endpoint]) -> None:
    """The parser refuses only what it must: unicode text, nested objects, numbers pass."""
    endpoint = endpoints["api key create"]
    response = send(endpoint, json.dumps({"name": "clé 🔑 – ok", "role": "viewer"}))
    assert response.status_code == 201, response.content
    assert response.json()["name"] == "clé 🔑 – ok"


# ------------------------------------------------------------------ /api/ error pages are JSON


def test_an_unknown_api_path_is_a_json_404(endpoints: dict[str, Endpoint]) -> None:
    http = DjangoClient(raise_request_exception=False)
    for path in ["/api/v1/nothing-here/", "/api/v2/", "/api/v1/widget/nope"]:
        assert_json_error(http.get(path), 404, "not_found")


def test_a_wrong_method_is_a_json_405(endpoints: dict[str, Endpoint]) -> None:
    http = DjangoClient(raise_request_exception=False)
    owner = endpoints["tool update"].headers
    assert_json_error(http.delete("/api/v1/tools/", **owner), 405, "method_not_allowed")
    widget = endpoints["widget start"].headers
    assert_json_error(http.put("/api/v1/widget/conversations", **widget), 405, "method_not_allowed")


def test_pages_outside_the_api_keep_their_html_404(db: Any) -> None:
    response = DjangoClient(raise_request_exception=False).get("/no-such-page/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


def test_the_server_error_handler_answers_json_under_api(db: Any) -> None:
    from django.urls import get_resolver

    handler = get_resolver().resolve_error_handler(500)
    api = handler(RequestFactory().get("/api/v1/conversations/"))
    assert api.status_code == 500
    assert api["Content-Type"].startswith("application/json")
    assert json.loads(api.content) == {
        "error": {"code": "server_error", "message": "A server error occurred."}
    }
    page = handler(RequestFactory().get("/console/"))
    assert page.status_code == 500
    assert page["Content-Type"].startswith("text/html")


def test_the_bad_request_handler_answers_json_under_api(db: Any) -> None:
    from django.core.exceptions import SuspiciousOperation
    from django.urls import get_resolver

    handler: Any = get_resolver().resolve_error_handler(400)
    api = handler(RequestFactory().get("/api/v1/tools/"), SuspiciousOperation("bad"))
    assert api.status_code == 400
    assert json.loads(api.content)["error"]["code"] == "bad_request"
