"""A destructive tool's precondition (apps/tools/preconditions.py): checked when it is saved —
the tenant file and the tools admin — against the tool's schema and the client's read tools,
and read purely by the turn (the state at a field, compared with the allowed states)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from django.urls import reverse
from django.utils import translation

from apps.core.exceptions import ApplicationError
from apps.provisioning.files import load_tenant_file
from apps.provisioning.services import tenant_import
from apps.tools.models import ClientTool, ToolKind
from apps.tools.preconditions import (
    not_possible_text,
    precondition_of,
    precondition_problems,
)
from tests.conftest import DEMO_TENANT
from tests.factories import ClientToolFactory
from tests.support.tenant_files import one_client_tenant

ALL = "test checks the database directly"
ORDER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}, "reason": {"type": "string"}},
    "required": ["order_id"],
}
READ_TOOLS = {"get_order_status": ("read", ORDER_SCHEMA), "refund": ("destructive", ORDER_SCHEMA)}
GOOD = {
    "tool": "get_order_status",
    "params": {"order_id": "order_id"},
    "field": "status",
    "allowed": ["processing"],
}


def problems(value: Any, kind: str = "destructive") -> list[str]:
    return precondition_problems(value, kind=kind, parameters=ORDER_SCHEMA, read_tools=READ_TOOLS)


def test_a_good_precondition_and_none_at_all_are_valid():
    assert problems(GOOD) == []
    assert problems({}) == []
    assert problems(GOOD | {"field": "order.status", "allowed": ["a", 2, True]}) == []


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("status", "must be an object"),
        (GOOD | {"when": "always"}, "when: unknown key"),
        ({k: v for k, v in GOOD.items() if k != "field"}, "field: required"),
        (GOOD | {"tool": "track_parcel"}, "'track_parcel' is not one of the client's tools"),
        (GOOD | {"tool": "refund"}, "'refund' is a destructive tool; it must be a read tool"),
        (GOOD | {"params": {}}, "params: must map"),
        (GOOD | {"params": {"order_id": "order"}}, "'order' is not one of this tool's parameters"),
        (
            GOOD | {"params": {"order": "order_id"}},
            "'order' is not one of get_order_status's parameters",
        ),
        (
            GOOD | {"params": {"reason": "reason"}},
            "get_order_status needs 'order_id'",
        ),
        (GOOD | {"field": "status[0]"}, "field: must name a result field"),
        (GOOD | {"allowed": []}, "allowed: must be a list"),
        (GOOD | {"allowed": "processing"}, "allowed: must be a list"),
        (GOOD | {"allowed": [{"status": "x"}]}, "allowed: must be a list"),
    ],
)
def test_what_does_not_fit_is_refused_by_name(value, problem):
    found = problems(value)
    assert any(problem in p for p in found), found


def test_only_a_destructive_tool_has_one():
    assert problems(GOOD, kind="action") == [
        "only a destructive tool has a precondition (it is checked before the question)"
    ]


def test_reading_the_state():
    precondition = precondition_of(GOOD | {"field": "order.status"})
    assert precondition is not None
    assert precondition.read_params({"order_id": "TH-1", "reason": "x"}) == {"order_id": "TH-1"}
    assert precondition.read_params({"reason": "x"}) is None  # nothing to read with
    assert precondition.state({"order": {"status": "Delivered"}}) == "Delivered"
    assert precondition.state({"order": {"status": None}}) is None
    assert precondition.state({"order": {"status": ["a"]}}) is None
    assert precondition.state({"status": "processing"}) is None
    assert precondition.state(None) is None
    assert precondition.allows(" PROCESSING ")
    assert not precondition.allows("delivered")
    flags = precondition_of(GOOD | {"allowed": [False, 0]})
    assert flags is not None and flags.allows(0) and flags.allows(False)
    assert not flags.allows("false") and not flags.allows(True)
    assert precondition_of({}) is None
    assert precondition_of(GOOD | {"allowed": []}) is None  # unreadable: never used


@pytest.mark.parametrize(
    ("language", "expected"),
    [
        ("en", "its status is delivered"),
        ("es", "su estado es entregado"),
        ("de", "der Status ist zugestellt"),
        ("he", "הסטטוס הוא נמסר"),
        ("ar", "الحالة هي تم التسليم"),
    ],
)
def test_the_customer_is_told_in_their_language(language, expected):
    with translation.override(language):
        text = not_possible_text(
            action="cancel_order", details={"order_id": "TH-10001"}, state="delivered"
        )
    assert expected in text and "TH-10001" in text and "cancel order" in text
    with translation.override(language):
        unknown = not_possible_text(
            action="cancel_order", details={"order_id": "TH-1"}, state="on_the_truck"
        )
    assert "on the truck" in unknown  # the client's own word, as its system gives it


def tenant(precondition: Any, *, with_read_tool: bool = True) -> dict[str, Any]:
    hook = {
        "type": "webhook",
        "url": "https://shop.example/hook",
        "secret": "whsec_dGVzdHNlY3JldHRlc3RzZWNyZXQ=",
    }
    tools = [
        {
            "name": "cancel_order",
            "description": "Cancel an order.",
            "kind": "destructive",
            "parameters": ORDER_SCHEMA,
            "executor": hook,
            "precondition": precondition,
        }
    ]
    if with_read_tool:
        tools.append(
            {
                "name": "get_order_status",
                "description": "Look up an order.",
                "kind": "read",
                "parameters": ORDER_SCHEMA,
                "executor": hook,
            }
        )
    return one_client_tenant("pre-shop", tools=tools)


@pytest.mark.django_db
def test_the_tenant_file_sets_and_checks_the_precondition():
    tenant_import(data=tenant(GOOD))
    tool = ClientTool.objects.unscoped(ALL).get(name="cancel_order")
    assert tool.precondition == GOOD
    # a read tool already stored (not in this file) is found too
    tenant_import(data=tenant(GOOD | {"allowed": ["pending"]}, with_read_tool=False))
    tool.refresh_from_db()
    assert tool.precondition["allowed"] == ["pending"]

    for bad, path, problem in [
        (GOOD | {"tool": "cancel_order"}, "clients[0]", "a destructive tool"),
        (GOOD | {"tool": "nope"}, "clients[0].tools[0].precondition", "not one of the client's"),
        (GOOD | {"field": ""}, "clients[0].tools[0]", "field: must name a result field"),
    ]:
        with pytest.raises(ApplicationError) as refused:
            tenant_import(data=tenant(bad, with_read_tool=bad["tool"] != "nope"))
        fields = refused.value.extra["fields"]
        assert any(key.startswith(path) and problem in msg for key, msg in fields.items()), fields
    tool.refresh_from_db()
    assert tool.precondition["allowed"] == ["pending"]  # nothing changed


@pytest.mark.django_db
def test_the_demo_shop_reads_the_order_before_cancelling_or_refunding():
    data = load_tenant_file(DEMO_TENANT)
    tools = {t["name"]: t for t in data["clients"][0]["tools"]}
    assert tools["cancel_order"]["precondition"]["allowed"] == ["processing"]
    assert tools["request_refund"]["precondition"]["allowed"] == ["shipped", "delivered"]
    broken = copy.deepcopy(data)
    broken["clients"][0]["tools"][0]["kind"] = "action"  # get_order_status is no read tool
    with pytest.raises(ApplicationError) as refused:
        tenant_import(data=broken)
    assert "must be a read tool" in refused.value.message


@pytest.mark.django_db
def test_the_admin_form_checks_the_precondition_against_the_clients_tools(
    admin_client, client_a, client_b
):
    from tests.test_admin_conversations import tool_form

    # another tenant's read tool of that name is not this client's
    ClientToolFactory(client=client_b, name="get_order_status", kind=ToolKind.READ)
    precondition = (
        '{"tool": "get_order_status", "params": {"order_id": "order_id"}, "field": "status", '
        '"allowed": ["processing"]}'
    )
    response = admin_client.post(
        reverse("admin:tools_clienttool_add"), tool_form(client_a, precondition=precondition)
    )
    assert response.status_code == 200
    assert "is not one of the client" in response.content.decode()
    assert not ClientTool.objects.for_client(client_a).exists()

    ClientToolFactory(client=client_a, name="get_order_status", kind=ToolKind.READ)
    response = admin_client.post(
        reverse("admin:tools_clienttool_add"),
        tool_form(client_a, precondition=precondition, kind=ToolKind.ACTION),
    )
    assert "only a destructive tool has a precondition" in response.content.decode()

    response = admin_client.post(
        reverse("admin:tools_clienttool_add"), tool_form(client_a, precondition=precondition)
    )
    assert response.status_code == 302
    tool = ClientTool.objects.for_client(client_a).get(name="cancel_order")
    assert tool.precondition["tool"] == "get_order_status"
    page = admin_client.get(reverse("admin:tools_clienttool_change", args=[tool.pk]))
    assert "Check before asking" in page.content.decode()
