"""The tenant file's `mcp_servers` (docs/tenant-import.md): servers are upserted by name with
their secrets, a secret left out keeps the stored one, a bad entry fails the file naming the
place (the admin form's checks, apps/tools/mcp_settings.py), the import lists the tools only
after it commits, in a task (against a real MCP server: all disabled), and the export holds the
servers without a secret and imports again without a change."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from apps.clients.models import Client
from apps.core.exceptions import ApplicationError
from apps.provisioning.services import client_export, tenant_import
from apps.tools.admin import McpServerForm
from apps.tools.mcp_settings import mcp_server_problems
from apps.tools.models import ClientTool, McpServer
from apps.tools.tasks import mcp_sync_server
from tests.factories import ClientFactory
from tests.tools.conftest import mcp_server  # noqa: F401  (the fixture, re-exported)

pytestmark = pytest.mark.django_db

TOKEN = "crm-bearer-token-7f3a91"
CLIENT_SECRET = "billing-client-secret-c24e08"
PUBLIC_ADDRESS = "93.184.215.14"


@pytest.fixture
def production_guard(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard as in production (https, public addresses only), with `*.example.com`
    resolving to a public address without asking a real resolver."""
    settings.TOOL_WEBHOOK_ALLOW_HTTP = False
    settings.TOOL_WEBHOOK_ALLOW_PRIVATE_NETWORKS = False
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if not str(host).endswith(".example.com"):
            return real(host, port, *args, **kwargs)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (PUBLIC_ADDRESS, int(port)))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def crm(**changes: Any) -> dict[str, Any]:
    return {
        "name": "crm",
        "url": "https://mcp.example.com/mcp",
        "auth": {"type": "bearer", "token": TOKEN},
        "timeout_seconds": 5,
        "customer_argument": "customer_id",
        **changes,
    }


def billing(**changes: Any) -> dict[str, Any]:
    return {
        "name": "billing",
        "url": "https://billing.example.com/mcp",
        "auth": {
            "type": "oauth",
            "token_url": "https://auth.example.com/token",
            "client_id": "guidedesk",
            "client_secret": CLIENT_SECRET,
            "scope": "tools.read",
        },
        "customer_header": "X-Customer-Id",
        **changes,
    }


def tenant(servers: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "plans": [{"slug": "mcp", "name": "MCP"}],
        "clients": [
            {"slug": "mcp-shop", "name": "MCP Shop", "plan": "mcp", "mcp_servers": servers, **extra}
        ],
    }


def servers_of(slug: str = "mcp-shop") -> dict[str, McpServer]:
    client = Client.objects.get(slug=slug)
    return {s.name: s for s in McpServer.objects.for_client(client)}


def test_servers_are_stored_with_their_secrets_and_nothing_is_listed_during_the_import(
    production_guard, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as queued:
        tenant_import(data=tenant([crm(), billing()]))
    rows = servers_of()
    assert set(rows) == {"crm", "billing"}
    assert (rows["crm"].url, rows["crm"].auth, rows["crm"].bearer_token) == (
        "https://mcp.example.com/mcp",
        "bearer",
        TOKEN,
    )
    assert (rows["crm"].timeout_seconds, rows["crm"].customer_argument) == (5.0, "customer_id")
    oauth = rows["billing"]
    assert (oauth.auth, oauth.oauth_token_url, oauth.oauth_client_id) == (
        "oauth",
        "https://auth.example.com/token",
        "guidedesk",
    )
    assert (oauth.oauth_client_secret, oauth.oauth_scope) == (CLIENT_SECRET, "tools.read")
    assert (oauth.timeout_seconds, oauth.customer_header, oauth.enabled) == (
        10.0,
        "X-Customer-Id",
        True,
    )
    # No server was asked anything inside the import: one listing per server waits for commit.
    assert not ClientTool.objects.unscoped("test reads every tool").exists()
    assert len(queued) == 2


def test_a_reimport_without_a_secret_keeps_the_stored_one_and_changes_nothing(
    production_guard, django_capture_on_commit_callbacks
):
    tenant_import(data=tenant([crm(), billing()]))
    before = {name: s.updated_at for name, s in servers_of().items()}
    no_secrets = [
        crm(auth={"type": "bearer"}),
        billing(auth={**billing()["auth"], "client_secret": ""}),
    ]
    with django_capture_on_commit_callbacks() as queued:
        tenant_import(data=tenant(no_secrets))
    rows = servers_of()
    assert rows["crm"].bearer_token == TOKEN
    assert rows["billing"].oauth_client_secret == CLIENT_SECRET
    assert {name: s.updated_at for name, s in rows.items()} == before  # not written again
    assert queued == []  # nothing changed: nothing to list again

    with django_capture_on_commit_callbacks() as queued:
        tenant_import(data=tenant([crm(auth={"type": "bearer", "token": "a-new-token-1"})]))
    rows = servers_of()
    assert rows["crm"].bearer_token == "a-new-token-1"
    assert "billing" in rows  # a server the file leaves out is left alone, never deleted
    assert len(queued) == 1  # the changed server is listed again


def test_a_disabled_server_is_stored_but_not_listed(
    production_guard, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as queued:
        tenant_import(data=tenant([crm(enabled=False)]))
    assert servers_of()["crm"].enabled is False
    assert queued == []


PLACE = "clients[0].mcp_servers[0]"


@pytest.mark.parametrize(
    ("servers", "where", "says"),
    [
        ([crm(url="http://mcp.example.com/mcp")], f"{PLACE}.url", "https"),
        ([crm(url="https://127.0.0.1/mcp")], f"{PLACE}.url", "non-public address"),
        ([crm(url="mcp.example.com")], f"{PLACE}.url", "not an http(s) URL"),
        ([crm(name="1crm")], f"{PLACE}.name", "starting with a letter"),
        ([crm(name="crm-tools")], f"{PLACE}.name", "Letters, digits and underscores"),
        ([crm(name="c" * 21)], f"{PLACE}.name", "at most 20 characters"),
        ([crm(timeout_seconds=0)], f"{PLACE}.timeout_seconds", "60 seconds"),
        ([crm(timeout_seconds=61)], f"{PLACE}.timeout_seconds", "60 seconds"),
        ([crm(auth={"type": "bearer"})], f"{PLACE}.auth.token", "bearer token is needed"),
        ([crm(auth={"type": "bearer", "token": ""})], f"{PLACE}.auth.token", "bearer token"),
        (
            [billing(auth={**billing()["auth"], "client_id": ""})],
            f"{PLACE}.auth.client_id",
            "Needed for OAuth",
        ),
        (
            [billing(auth={"type": "oauth", "client_id": "x", "client_secret": "y"})],
            f"{PLACE}.auth.token_url",
            "Needed for OAuth",
        ),
        ([crm(auth={"type": "none", "token": "x"})], f"{PLACE}.auth", "not used by 'none'"),
        ([crm(auth={"type": "basic"})], f"{PLACE}.auth.type", "'none', 'bearer' or 'oauth'"),
        ([crm(token=TOKEN)], f"{PLACE}.token", "Extra inputs are not permitted"),
        ([crm(), crm()], "clients[0]", "mcp_servers: name used twice: crm"),
    ],
)
def test_a_bad_server_fails_the_file_naming_the_place(production_guard, servers, where, says):
    with pytest.raises(ApplicationError) as refused:
        tenant_import(data=tenant(servers))
    fields = refused.value.extra["fields"]
    assert where in fields, fields
    assert says in fields[where]
    assert TOKEN not in str(refused.value)  # a secret is never echoed back
    assert not Client.objects.filter(slug="mcp-shop").exists()  # nothing was changed


def test_the_admin_form_and_the_file_say_the_same(production_guard):
    acme = ClientFactory(slug="acme")
    form = McpServerForm(
        data={
            "client": acme.pk,
            "name": "1crm",
            "url": "http://mcp.example.com/mcp",
            "auth": "bearer",
            "timeout_seconds": 61,
        }
    )
    assert not form.is_valid()
    expected = mcp_server_problems(
        {
            "name": "1crm",
            "url": "http://mcp.example.com/mcp",
            "timeout_seconds": 61,
            "auth": "bearer",
            "bearer_token": "",
        }
    )
    assert set(expected) == {"name", "url", "timeout_seconds", "bearer_token"}
    assert {field: errors[0] for field, errors in form.errors.items()} == expected
    stored = McpServer.objects.create(
        client=acme, name="crm", url="https://mcp.example.com/mcp", bearer_token=TOKEN
    )
    keep = McpServerForm(
        instance=stored,
        data={
            "client": acme.pk,
            "name": "crm",
            "url": "https://mcp.example.com/mcp",
            "auth": "bearer",
            "timeout_seconds": 10,
            "enabled": "on",
        },
    )
    assert keep.is_valid(), keep.errors
    assert keep.cleaned_data["bearer_token"] == TOKEN  # an empty box keeps the saved one


def test_an_mcp_tool_cannot_be_declared_in_tools(production_guard):
    entry = {
        "name": "crm_get_order",
        "description": "An order.",
        "kind": "read",
        "executor": {"type": "mcp", "tool": "get_order"},
    }
    with pytest.raises(ApplicationError) as refused:
        tenant_import(data=tenant([], tools=[entry]))
    message = refused.value.extra["fields"]["clients[0].tools[0].executor.type"]
    assert "mcp_servers" in message
    assert not Client.objects.filter(slug="mcp-shop").exists()


def test_the_import_lists_the_tools_after_it_commits_all_disabled(
    settings,
    mcp_server,  # noqa: F811  (the fixture imported above)
    django_capture_on_commit_callbacks,
):
    settings.TOOL_WEBHOOK_ALLOW_HTTP = True  # the test server listens on http://127.0.0.1
    settings.TOOL_WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    assert settings.CELERY_TASK_ALWAYS_EAGER  # the queued task runs when the import commits
    servers = [
        crm(url=mcp_server.url, auth={"type": "bearer", "token": mcp_server.token}),
        # a server that is down does not hold the import up: its listing records the error
        crm(name="down", url="http://127.0.0.1:9/mcp", timeout_seconds=2),
    ]
    with django_capture_on_commit_callbacks(execute=True) as queued:
        tenant_import(data=tenant(servers))
        assert mcp_server.requests == 0  # not during the import
    assert len(queued) == 2
    shop = Client.objects.get(slug="mcp-shop")
    rows = servers_of()
    tools = list(ClientTool.objects.for_client(shop).filter(mcp_server=rows["crm"]))
    assert {"get_order_status", "cancel_order", "lookup_customer_orders"} <= {
        t.mcp_tool_name for t in tools
    }
    for tool in tools:
        assert (tool.executor_type, tool.kind, tool.enabled) == ("mcp", "destructive", False)
        assert not tool.is_configured  # never reviewed: it cannot run
    lookup = next(t for t in tools if t.mcp_tool_name == "lookup_customer_orders")
    assert lookup.customer_scoped and "customer_id" not in lookup.parameters["properties"]
    assert rows["crm"].last_synced_at is not None and rows["crm"].last_error == ""
    assert rows["down"].last_error and rows["down"].last_synced_at is None
    assert not ClientTool.objects.for_client(shop).filter(mcp_server=rows["down"]).exists()


def test_the_listing_task_keeps_to_its_client(production_guard, client_b):
    tenant_import(data=tenant([crm()]))
    server = servers_of()["crm"]
    mcp_sync_server.apply(kwargs={"server_id": server.pk, "client_id": client_b.pk}).get()
    server.refresh_from_db()
    assert (server.last_synced_at, server.last_error) == (None, "")  # never looked at


def test_the_export_has_the_servers_without_a_secret_and_imports_again_unchanged(
    production_guard, django_capture_on_commit_callbacks
):
    tenant_import(data=tenant([crm(), billing(enabled=False)]))
    shop = Client.objects.get(slug="mcp-shop")
    server = servers_of()["crm"]
    # a tool listed from the server: it comes from the server, never from the file
    ClientTool.objects.create(
        client=shop,
        name="crm_get_order_status",
        description="The status of an order.",
        kind="read",
        parameters={"type": "object", "properties": {"order_id": {"type": "string"}}},
        executor_type="mcp",
        mcp_server=server,
        mcp_tool_name="get_order_status",
        mcp_fingerprint="a" * 64,
        mcp_reviewed_fingerprint="a" * 64,
    )
    exported = client_export(client=shop)
    text = json.dumps(exported)
    assert TOKEN not in text and CLIENT_SECRET not in text
    assert '"token"' not in text and '"client_secret"' not in text
    assert exported["mcp_servers"] == [
        {
            "name": "billing",
            "url": "https://billing.example.com/mcp",
            "auth": {
                "type": "oauth",
                "token_url": "https://auth.example.com/token",
                "client_id": "guidedesk",
                "scope": "tools.read",
            },
            "timeout_seconds": 10.0,
            "customer_argument": "",
            "customer_header": "X-Customer-Id",
            "enabled": False,
        },
        {
            "name": "crm",
            "url": "https://mcp.example.com/mcp",
            "auth": {"type": "bearer"},
            "timeout_seconds": 5.0,
            "customer_argument": "customer_id",
            "customer_header": "",
            "enabled": True,
        },
    ]
    assert "tools" not in exported  # MCP tools included: they are listed from the server

    before = {
        s.name: (s.updated_at, s.bearer_token, s.oauth_client_secret) for s in servers_of().values()
    }
    tools_before = list(ClientTool.objects.for_client(shop).values())
    with django_capture_on_commit_callbacks() as queued:
        tenant_import(data={"clients": [exported]})
    after = {
        s.name: (s.updated_at, s.bearer_token, s.oauth_client_secret) for s in servers_of().values()
    }
    assert after == before  # same rows, secrets kept, nothing written
    assert list(ClientTool.objects.for_client(shop).values()) == tools_before
    assert queued == []

    # … and into another client: the servers arrive, without their secrets to run
    copy = {**exported, "slug": "mcp-copy", "name": "Copy"}
    with pytest.raises(ApplicationError) as refused:
        tenant_import(data={"clients": [copy]})
    assert "clients[0].mcp_servers[1].auth.token" in refused.value.extra["fields"]
