"""GET /api/v1/tool-executions/, GET /api/v1/tools/ and PATCH /api/v1/tools/<name>/."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from apps.tools.models import ClientTool, ExecutionStatus, FailureKind, ToolExecution
from tests.api.conftest import TenantData, assert_error, make_conversation_with_turn
from tests.factories import ClientToolFactory

pytestmark = pytest.mark.django_db

EXECUTIONS_URL = reverse("api-tool-execution-list")
TOOLS_URL = reverse("api-tool-list")


def tool_url(name: str) -> str:
    return reverse("api-tool-detail", args=[name])


def run(client, tool, status=ExecutionStatus.SUCCEEDED, n=[0], **fields) -> ToolExecution:  # noqa: B006
    n[0] += 1
    return ToolExecution.objects.create(
        client=client,
        tool=tool,
        params={"order_id": "TH-00001"},
        idempotency_key=f"k-{n[0]}",
        status=status,
        **fields,
    )


# ------------------------------------------------------------------------- tool executions


def test_execution_items_have_the_audit_fields(viewer_a, data_a):
    response = viewer_a.get(EXECUTIONS_URL)
    assert response.status_code == 200
    (item,) = response.json()["results"]
    assert item == {
        "id": data_a.execution.pk,
        "tool": "lookup_order",
        "kind": "read",
        "params": {"order_id": "TH-12345"},
        "status": "succeeded",
        "failure_kind": "",
        "error": "",
        "attempts": 1,
        "latency_ms": 42,
        "idempotency_key": data_a.execution.idempotency_key,
        "conversation": str(data_a.conversation.public_id),
        "created_at": item["created_at"],
    }


def test_executions_filter_by_status_and_tool(viewer_a, client_a, data_a):
    other_tool = ClientToolFactory(client=client_a, name="cancel_order", kind="destructive")
    failed = run(
        client_a,
        other_tool,
        ExecutionStatus.FAILED,
        failure_kind=FailureKind.REFUSED,
        error="Already shipped.",
    )

    def ids(**params: str) -> list[int]:
        response = viewer_a.get(EXECUTIONS_URL, params)
        assert response.status_code == 200
        return [item["id"] for item in response.json()["results"]]

    assert ids() == [failed.pk, data_a.execution.pk]
    assert ids(status="failed") == [failed.pk]
    assert ids(tool="lookup_order") == [data_a.execution.pk]
    assert ids(tool="cancel_order", status="succeeded") == []
    assert ids(tool="no_such_tool") == []
    item = viewer_a.get(EXECUTIONS_URL, {"status": "failed"}).json()["results"][0]
    assert (item["kind"], item["failure_kind"], item["error"]) == (
        "destructive",
        "refused",
        "Already shipped.",
    )
    assert item["conversation"] is None


@pytest.mark.parametrize(
    ("params", "field"), [({"status": "done"}, "status"), ({"tool": "x" * 65}, "tool")]
)
def test_executions_reject_bad_filters(viewer_a, data_a, params, field):
    error = assert_error(viewer_a.get(EXECUTIONS_URL, params), 400, "invalid")
    assert set(error["fields"]) == {field}


def test_executions_query_count_does_not_grow(viewer_a, client_a, django_assert_max_num_queries):
    tool = ClientToolFactory(client=client_a)
    conv, _ = make_conversation_with_turn(client_a)
    for _ in range(2):
        run(client_a, tool, conversation=conv)
    viewer_a.get(EXECUTIONS_URL)
    with django_assert_max_num_queries(3) as few:
        viewer_a.get(EXECUTIONS_URL)
    for _ in range(18):
        run(client_a, ClientToolFactory(client=client_a), conversation=conv)
    with django_assert_max_num_queries(3) as many:
        assert len(viewer_a.get(EXECUTIONS_URL).json()["results"]) == 20
    assert len(few.captured_queries) == len(many.captured_queries)


# ----------------------------------------------------------------------------------- tools


def test_tools_list(owner_a, data_a, client_a):
    ClientToolFactory(client=client_a, name="a_disabled", enabled=False, webhook_url="")
    response = owner_a.get(TOOLS_URL)
    assert response.status_code == 200
    items = response.json()["results"]
    assert [t["name"] for t in items] == ["a_disabled", "lookup_order"]
    disabled, lookup = items
    assert disabled["enabled"] is False
    assert disabled["configured"] is False
    assert lookup == {
        "name": "lookup_order",
        "description": "A tool.",
        "kind": "read",
        "enabled": True,
        "executor_type": "webhook",
        "configured": True,
        "parameters": data_a.tool.parameters,
    }
    assert "signing_secret" not in response.content.decode()
    assert "test-signing-secret" not in response.content.decode()


def test_patch_disables_and_enables_a_tool(owner_a, data_a):
    response = owner_a.patch(tool_url("lookup_order"), {"enabled": False}, format="json")
    assert response.status_code == 200
    assert response.json()["enabled"] is False
    data_a.tool.refresh_from_db()
    assert data_a.tool.enabled is False
    assert owner_a.patch(tool_url("lookup_order"), {"enabled": True}, format="json").json()[
        "enabled"
    ]
    data_a.tool.refresh_from_db()
    assert data_a.tool.enabled is True


def test_patch_changes_the_description(owner_a, data_a):
    response = owner_a.patch(
        tool_url("lookup_order"), {"description": "Look an order up by id."}, format="json"
    )
    assert response.status_code == 200
    data_a.tool.refresh_from_db()
    assert data_a.tool.description == "Look an order up by id."
    assert data_a.tool.enabled is True


def tool_row(data: TenantData) -> dict[str, Any]:
    """Every column of the tenant's tool, read from the database."""
    return (
        ClientTool.objects.unscoped("test checks the database directly")
        .filter(pk=data.tool.pk)
        .values()
        .get()
    )


def test_an_empty_patch_changes_nothing(owner_a, data_a):
    before = tool_row(data_a)
    response = owner_a.patch(tool_url("lookup_order"), {}, format="json")
    assert response.status_code == 200
    assert tool_row(data_a) == before


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({"kind": "destructive"}, {"kind"}),
        ({"enabled": False, "webhook_url": "https://evil.example"}, {"webhook_url"}),
        ({"name": "renamed"}, {"name"}),
        ({"description": ""}, {"description"}),
        ({"description": "x" * 2001}, {"description"}),
        ({"enabled": "perhaps"}, {"enabled"}),
        ({"enabled": None}, {"enabled"}),
        (["enabled"], {"non_field_errors"}),
    ],
)
def test_patch_rejects_anything_else_naming_the_field(owner_a, data_a, body, fields):
    before = tool_row(data_a)
    error = assert_error(
        owner_a.patch(tool_url("lookup_order"), body, format="json"), 400, "invalid"
    )
    assert set(error["fields"]) == fields
    assert tool_row(data_a) == before


@pytest.mark.parametrize("name", ["no_such_tool", "lookup-order", "x" * 70, "1abc"])
def test_patch_unknown_tool_is_404(owner_a, data_a, name):
    assert_error(owner_a.patch(tool_url(name), {"enabled": False}, format="json"), 404)
