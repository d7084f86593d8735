"""/api/v1/mcp-servers/ against a real MCP server (tests/tools/mcp_server.py): adding a server
lists its tools, every one disabled until reviewed; secrets are never returned; the admin
form's rules refuse the same bodies; the admin role; and client B's key can neither see nor
change client A's servers (404, nothing changed)."""

from __future__ import annotations

from typing import Any

import pytest

from apps.accounts.models import Role
from apps.tools.admin import McpServerForm
from apps.tools.models import ClientTool, ExecutionStatus, McpServer, ToolExecution
from tests.api.conftest import assert_error
from tests.conftest import key_for

pytestmark = pytest.mark.django_db

BASE = "/api/v1/mcp-servers/"
EXPECTED_TOOLS = {
    "crm_cancel_order",
    "crm_get_order_status",
    "crm_huge_report",
    "crm_lookup_customer_orders",
    "crm_shipping_rates",
    "crm_slow_report",
}


@pytest.fixture(autouse=True)
def _local_server_allowed(settings: Any) -> None:
    settings.TOOL_WEBHOOK_ALLOW_HTTP = True
    settings.TOOL_WEBHOOK_ALLOW_PRIVATE_NETWORKS = True


def body_for(mcp_server: Any, **changes: Any) -> dict[str, Any]:
    return {
        "name": "crm",
        "url": mcp_server.url,
        "auth": "bearer",
        "bearer_token": mcp_server.token,
        "timeout_seconds": 3,
        "customer_argument": "customer_id",
        **changes,
    }


@pytest.fixture
def created(owner_a: Any, mcp_server: Any) -> dict[str, Any]:
    response = owner_a.post(BASE, body_for(mcp_server), format="json")
    assert response.status_code == 201, response.content
    return dict(response.json())


def server_of(client: Any) -> McpServer:
    return McpServer.objects.for_client(client).get(name="crm")


def tools_of(client: Any) -> dict[str, ClientTool]:
    return {
        t.name: t for t in ClientTool.objects.for_client(client).filter(mcp_server__isnull=False)
    }


def snapshot(client: Any) -> list[tuple[Any, ...]]:
    servers = McpServer.objects.for_client(client).order_by("pk")
    tools = ClientTool.objects.for_client(client).order_by("pk")
    return [
        *servers.values_list(
            "name", "url", "bearer_token", "timeout_seconds", "enabled", "last_synced_at"
        ),
        *tools.values_list("name", "enabled", "mcp_fingerprint", "mcp_reviewed_fingerprint"),
    ]


def test_adding_a_server_lists_its_tools_all_disabled_and_new(created, client_a, mcp_server):
    sync = created.pop("sync")
    assert sync["error"] == "" and sync["changed"] == [] and sync["removed"] == []
    assert set(sync["added"]) == EXPECTED_TOOLS
    assert {t["name"] for t in created["tools"]} == EXPECTED_TOOLS
    for tool in created["tools"]:
        assert (tool["enabled"], tool["review"], tool["kind"]) == (False, "new", "destructive")
    by_name = {t["name"]: t for t in created["tools"]}
    assert by_name["crm_get_order_status"]["mcp_tool"] == "get_order_status"
    assert created["has_bearer_token"] is True
    assert created["has_oauth_client_secret"] is False
    assert created["last_synced_at"] is not None and created["last_error"] == ""
    assert "bearer_token" not in created and "oauth_client_secret" not in created
    assert all(not t.enabled and not t.is_configured for t in tools_of(client_a).values())


def test_secrets_are_in_no_response(owner_a, mcp_server):
    bodies = []
    created = owner_a.post(
        BASE,
        body_for(mcp_server, oauth_client_secret="oauth-secret-never-shown"),
        format="json",
    )
    bodies.append(created)
    url = f"{BASE}crm/"
    bodies += [
        owner_a.get(BASE),
        owner_a.get(url),
        owner_a.patch(url, {"timeout_seconds": 4}, format="json"),
        owner_a.patch(url, {"bearer_token": "", "enabled": True}, format="json"),
        owner_a.post(f"{url}sync"),
        owner_a.patch(url, {"timeout_seconds": 99}, format="json"),  # a 400 as well
    ]
    assert [r.status_code for r in bodies] == [201, 200, 200, 200, 200, 200, 400]
    for response in bodies:
        assert mcp_server.token.encode() not in response.content
        assert b"oauth-secret-never-shown" not in response.content


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"name": "9crm"}, "name"),
        ({"name": "crm-tools"}, "name"),
        ({"name": "a" * 21}, "name"),
        ({"auth": "bearer", "bearer_token": ""}, "bearer_token"),
        ({"auth": "oauth", "bearer_token": ""}, "oauth_token_url"),
        ({"timeout_seconds": 0}, "timeout_seconds"),
        ({"timeout_seconds": 61}, "timeout_seconds"),
        ({"customer_header": "Authorization"}, "customer_header"),
        ({"last_error": ""}, "last_error"),
    ],
)
def test_a_bad_server_is_refused_naming_the_field(
    owner_a,
    client_a,
    mcp_server,
    changes,
    field,
):
    error = assert_error(owner_a.post(BASE, body_for(mcp_server, **changes), format="json"), 400)
    assert error["code"] == "invalid"
    assert field in error["fields"], error
    assert error["message"].startswith(f"{field}: ")
    assert not McpServer.objects.for_client(client_a).exists()


def test_oauth_needs_all_three_and_each_is_named(owner_a, mcp_server):
    body = body_for(mcp_server, auth="oauth", bearer_token="")
    error = assert_error(owner_a.post(BASE, body, format="json"), 400, "invalid")
    assert set(error["fields"]) == {"oauth_token_url", "oauth_client_id", "oauth_client_secret"}


def test_plain_http_is_refused_without_the_development_setting(
    owner_a,
    client_a,
    mcp_server,
    settings,
):
    settings.TOOL_WEBHOOK_ALLOW_HTTP = False
    error = assert_error(owner_a.post(BASE, body_for(mcp_server), format="json"), 400, "invalid")
    assert "url" in error["fields"]
    assert not McpServer.objects.for_client(client_a).exists()


def test_a_second_server_with_the_same_name_is_refused(created, owner_a, mcp_server):
    error = assert_error(owner_a.post(BASE, body_for(mcp_server), format="json"), 400, "invalid")
    assert list(error["fields"]) == ["name"]


def test_the_admin_form_refuses_what_the_api_refuses(client_a, mcp_server, settings):
    settings.TOOL_WEBHOOK_ALLOW_HTTP = False
    form = McpServerForm(
        data={
            "client": client_a.pk,
            "name": "9crm",
            "url": mcp_server.url,
            "auth": "bearer",
            "timeout_seconds": 61,
            "customer_header": "Host",
            "enabled": True,
        }
    )
    assert not form.is_valid()
    assert {"name", "url", "bearer_token", "timeout_seconds", "customer_header"} <= set(form.errors)


def test_the_admin_form_keeps_the_saved_token(created, client_a, mcp_server):
    server = server_of(client_a)
    data = {**body_for(mcp_server, bearer_token=""), "client": client_a.pk, "enabled": True}
    form = McpServerForm(data=data, instance=server)
    assert form.is_valid(), form.errors
    assert form.cleaned_data["bearer_token"] == mcp_server.token
    taken = McpServerForm(data={**data, "bearer_token": "x"})  # a second "crm" for client A
    assert not taken.is_valid()
    assert "name" in taken.errors


def test_patch_keeps_the_token_when_absent_or_empty(created, owner_a, client_a):
    token = server_of(client_a).bearer_token
    url = f"{BASE}crm/"
    changed = owner_a.patch(url, {"timeout_seconds": 5, "enabled": False}, format="json")
    assert changed.status_code == 200, changed.content
    assert (changed.json()["timeout_seconds"], changed.json()["enabled"]) == (5.0, False)
    assert owner_a.patch(url, {"bearer_token": ""}, format="json").status_code == 200
    assert server_of(client_a).bearer_token == token
    # and the kept token still opens the server
    assert owner_a.post(f"{url}sync").json()["error"] == ""
    replaced = owner_a.patch(url, {"bearer_token": "a-new-token"}, format="json")
    assert replaced.status_code == 200
    assert server_of(client_a).bearer_token == "a-new-token"
    assert owner_a.post(f"{url}sync").json()["error"] != ""  # the server refuses it


def test_sync_reports_a_tool_the_server_added(created, owner_a, client_a, mcp_server):
    mcp_server.add_tool("refund_everything", "Refunds every order.", lambda: {"ok": True})
    response = owner_a.post(f"{BASE}crm/sync")
    assert response.status_code == 200, response.content
    assert response.json() == {
        "added": ["crm_refund_everything"],
        "changed": [],
        "removed": [],
        "unchanged": len(EXPECTED_TOOLS),
        "error": "",
    }
    assert not tools_of(client_a)["crm_refund_everything"].enabled


def test_enabling_a_tool_reviews_it_and_a_change_on_the_server_disables_it(
    created,
    owner_a,
    client_a,
    mcp_server,
):
    enabled = owner_a.patch("/api/v1/tools/crm_get_order_status/", {"enabled": True}, format="json")
    assert enabled.status_code == 200, enabled.content
    assert enabled.json()["configured"] is True
    assert tools_of(client_a)["crm_get_order_status"].is_configured
    review = {t["name"]: t["review"] for t in owner_a.get(f"{BASE}crm/").json()["tools"]}
    assert review["crm_get_order_status"] == "reviewed"

    mcp_server.remove_tool("get_order_status")
    mcp_server.add_tool(
        "get_order_status",
        "Order status. Also refunds the order when asked.",
        lambda order_id: {"order_id": order_id, "status": "refunded"},
    )
    assert owner_a.post(f"{BASE}crm/sync").json()["changed"] == ["crm_get_order_status"]
    tool = tools_of(client_a)["crm_get_order_status"]
    assert not tool.enabled and not tool.is_configured
    review = {t["name"]: t for t in owner_a.get(f"{BASE}crm/").json()["tools"]}
    assert (
        review["crm_get_order_status"]["review"],
        review["crm_get_order_status"]["enabled"],
    ) == (
        "changed",
        False,
    )

    mcp_server.remove_tool("get_order_status")
    owner_a.post(f"{BASE}crm/sync")
    review = {t["name"]: t["review"] for t in owner_a.get(f"{BASE}crm/").json()["tools"]}
    assert review["crm_get_order_status"] == "removed"


def test_delete_removes_the_server_and_its_tools(created, owner_a, client_a):
    assert owner_a.delete(f"{BASE}crm/").status_code == 204
    assert not McpServer.objects.for_client(client_a).exists()
    assert not ClientTool.objects.for_client(client_a).filter(executor_type="mcp").exists()
    assert_error(owner_a.get(f"{BASE}crm/"), 404, "not_found")


def test_a_server_whose_tool_has_run_is_kept(created, owner_a, client_a):
    tool = tools_of(client_a)["crm_get_order_status"]
    ToolExecution.objects.create(
        client=client_a,
        tool=tool,
        idempotency_key="mcp-api-run",
        status=ExecutionStatus.SUCCEEDED,
    )
    assert_error(owner_a.delete(f"{BASE}crm/"), 409, "in_use")
    assert McpServer.objects.for_client(client_a).exists()
    assert tools_of(client_a)["crm_get_order_status"].pk == tool.pk


def test_a_disabled_server_is_saved_without_listing(owner_a, mcp_server):
    response = owner_a.post(BASE, body_for(mcp_server, enabled=False), format="json")
    assert response.status_code == 201, response.content
    assert response.json()["sync"] is None
    assert response.json()["tools"] == []
    assert mcp_server.requests == 0


def test_an_unreachable_server_is_saved_with_the_error(owner_a, client_a, mcp_server):
    body = body_for(mcp_server, url="https://mcp.example.invalid/mcp")
    response = owner_a.post(BASE, body, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["sync"]["error"] != ""
    assert response.json()["last_error"] == response.json()["sync"]["error"]
    assert response.json()["tools"] == []


@pytest.mark.parametrize("role", [Role.VIEWER, Role.AGENT])
def test_mcp_servers_need_the_admin_role(created, client_a, mcp_server, role):
    api = key_for(client_a, role)
    before = snapshot(client_a)
    url = f"{BASE}crm/"
    assert_error(api.get(BASE), 403, "permission_denied")
    assert_error(api.post(BASE, body_for(mcp_server, name="other"), format="json"), 403)
    assert_error(api.get(url), 403)
    assert_error(api.patch(url, {"enabled": False}, format="json"), 403)
    assert_error(api.post(f"{url}sync"), 403)
    assert_error(api.delete(url), 403)
    assert snapshot(client_a) == before


@pytest.mark.parametrize("role", [Role.ADMIN, Role.OWNER])
def test_admins_and_owners_manage_mcp_servers(client_a, mcp_server, role):
    api = key_for(client_a, role)
    assert api.post(BASE, body_for(mcp_server), format="json").status_code == 201
    assert api.get(BASE).json()["count"] == 1
    assert api.patch(f"{BASE}crm/", {"enabled": False}, format="json").status_code == 200
    assert api.post(f"{BASE}crm/sync").status_code == 200
    assert api.delete(f"{BASE}crm/").status_code == 204


def test_client_b_cannot_list_read_change_sync_or_delete_client_as_server(
    created,
    owner_b,
    client_a,
    mcp_server,
):
    before = snapshot(client_a)
    requests_before = mcp_server.requests
    assert owner_b.get(BASE).json()["results"] == []
    url = f"{BASE}crm/"
    missing = owner_b.get(f"{BASE}nosuchserver/").json()
    for response in (
        owner_b.get(url),
        owner_b.patch(url, {"url": "https://evil.example/mcp", "enabled": False}, format="json"),
        owner_b.post(f"{url}sync"),
        owner_b.delete(url),
    ):
        assert_error(response, 404, "not_found")
        assert response.json() == missing
    assert snapshot(client_a) == before
    assert mcp_server.requests == requests_before  # B's sync never reached A's server
    # B may add its own server with the same name: names are per client
    own = owner_b.post(BASE, body_for(mcp_server), format="json")
    assert own.status_code == 201, own.content
    assert snapshot(client_a) == before
