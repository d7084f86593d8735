"""The approval rule of a tool: checked against its JSON Schema when saved (admin, tenant file),
and read when the guards let a call run — a threshold is "greater than", and a value the rule
cannot read fails closed (asks for approval)."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from apps.core.exceptions import ApplicationError
from apps.provisioning.services import tenant_import
from apps.tools.approval_rules import (
    approval_needed,
    approval_rule_problems,
    approval_rule_text,
    approval_timeout_minutes,
    sum_rule,
)
from apps.tools.models import ClientTool
from tests.support.tenant_files import one_client_tenant

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string"},
        "amount": {"type": "number"},
        "count": {"type": "integer"},
    },
    "required": ["order_id"],
}
ALL = "test checks the database directly"


@pytest.mark.parametrize(
    ("rule", "params", "needed"),
    [
        ({}, {"amount": 1000}, False),
        ({"always": True}, {}, True),
        ({"param": "amount", "above": 100}, {"amount": 100}, False),
        ({"param": "amount", "above": 100}, {"amount": 100.01}, True),
        ({"param": "amount", "above": 100}, {"amount": 99}, False),
        ({"param": "amount", "above": 100}, {}, True),  # not there: fails closed
        ({"param": "amount", "above": 100}, {"amount": "lots"}, True),
        ({"param": "count", "above": 2.5}, {"count": 3}, True),
    ],
)
def test_when_a_call_needs_approval(rule, params, needed):
    assert approval_needed(rule, params) is needed


@pytest.mark.parametrize(
    ("rule", "problem"),
    [
        ({"always": False}, "always: must be true"),
        ({"always": True, "param": "amount", "above": 1}, "cannot be combined"),
        ({"param": "amount"}, "both are needed"),
        ({"param": "total", "above": 1}, "'total' is not one of the tool's parameters"),
        ({"param": "order_id", "above": 1}, "must be a number or integer parameter"),
        ({"param": "amount", "above": "100"}, "above: must be a number"),
        ({"param": "amount", "above": True}, "above: must be a number"),
        ({"always": True, "timeout_minutes": 0}, "timeout_minutes"),
        ({"always": True, "when": "late"}, "when: unknown key"),
        ([1], "must be an object"),
        ({"always": True, "per": ["order"]}, "cannot be combined"),
        ({"param": "amount", "above": 1, "per": []}, "per: must be a non-empty list"),
        ({"param": "amount", "above": 1, "per": "order"}, "per: must be a non-empty list"),
        ({"param": "amount", "above": 1, "per": ["visitor"]}, "'visitor' is not a scope"),
        ({"param": "amount", "above": 1, "per": ["order", "order"]}, "named twice"),
        ({"param": "amount", "above": 1, "order_param": "sku"}, "'sku' is not one of"),
        ({"param": "amount", "above": 1, "order_param": "amount"}, "string or integer"),
        ({"param": "amount", "above": 1, "window_hours": 0}, "window_hours: must be"),
        ({"param": "amount", "above": 1, "window_hours": 1000}, "window_hours: must be"),
        ({"param": "amount", "above": 1, "window_hours": 1.5}, "window_hours: must be"),
        ({"param": "amount", "above": 1, "group": "two words"}, "group: must be a name"),
    ],
)
def test_a_rule_that_does_not_fit_the_schema_is_refused(rule, problem):
    problems = approval_rule_problems(rule, SCHEMA)
    assert any(problem in p for p in problems), problems


def test_valid_rules_and_their_timeout(settings):
    settings.TOOL_APPROVAL_TIMEOUT_MINUTES = 30
    for rule in ({}, {"always": True}, {"param": "amount", "above": 100, "timeout_minutes": 5}):
        assert approval_rule_problems(rule, SCHEMA) == []
    assert approval_timeout_minutes({"always": True}) == 30
    assert approval_timeout_minutes({"always": True, "timeout_minutes": 5}) == 5


def test_the_order_scope_needs_an_order_parameter():
    no_order = {"type": "object", "properties": {"amount": {"type": "number"}}}
    # the old form: the order scope is simply not there without an order_id parameter
    assert approval_rule_problems({"param": "amount", "above": 1}, no_order) == []
    problems = approval_rule_problems({"param": "amount", "above": 1, "per": ["order"]}, no_order)
    assert any("order_param: needed" in p for p in problems), problems


def test_the_old_form_sums_over_every_scope_for_24_hours():
    summed = sum_rule({"param": "amount", "above": 100})
    assert summed is not None
    assert summed.scopes == ("conversation", "customer", "order")
    assert (summed.window_hours, summed.order_param, summed.group) == (24, "order_id", "")
    rule = {
        "param": "amount",
        "above": 100,
        "per": ["order", "customer"],
        "order_param": "order_id",
        "window_hours": 48,
        "group": "money-out",
    }
    assert approval_rule_problems(rule, SCHEMA) == []
    summed = sum_rule(rule)
    assert summed is not None and summed.scopes == ("customer", "order")
    assert (
        approval_rule_text(rule) == "amount > 100 (sum per customer/order, 48 h, group money-out)"
    )
    assert sum_rule({"always": True}) is None


def tenant(rule: Any) -> dict[str, Any]:
    tool = {
        "name": "refund_order",
        "description": "Refund an order.",
        "kind": "destructive",
        "parameters": SCHEMA,
        "executor": {
            "type": "webhook",
            "url": "https://shop.example/hook",
            "secret": "whsec_dGVzdHNlY3JldHRlc3RzZWNyZXQ=",
        },
        "approval_rule": rule,
    }
    return one_client_tenant("rules-shop", tools=[tool])


@pytest.mark.django_db
def test_the_tenant_file_sets_and_checks_the_rule():
    tenant_import(data=tenant({"param": "amount", "above": 100}))
    tool = ClientTool.objects.unscoped(ALL).get(name="refund_order")
    assert tool.approval_rule == {"param": "amount", "above": 100}
    with pytest.raises(ApplicationError) as refused:
        tenant_import(data=tenant({"param": "order_id", "above": 100}))
    assert "approval_rule" in str(refused.value.extra or refused.value.message)
    with pytest.raises(ApplicationError) as refused:
        tenant_import(data=tenant({"param": "amount", "above": 100, "per": ["week"]}))
    assert "'week' is not a scope" in str(refused.value.extra or refused.value.message)
    tool.refresh_from_db()
    assert tool.approval_rule == {"param": "amount", "above": 100}


@pytest.mark.django_db
def test_the_admin_form_checks_the_rule_against_the_schema(admin_client, client_a):
    from tests.test_admin_conversations import tool_form

    schema = '{"type": "object", "properties": {"amount": {"type": "number"}}}'
    bad = tool_form(
        client_a, parameters=schema, approval_rule='{"param": "order_id", "above": 100}'
    )
    response = admin_client.post(reverse("admin:tools_clienttool_add"), bad)
    assert response.status_code == 200
    assert "is not one of the tool" in response.content.decode()
    assert not ClientTool.objects.unscoped(ALL).exists()
    bad_window = tool_form(
        client_a,
        parameters=schema,
        approval_rule='{"param": "amount", "above": 100, "window_hours": 0}',
    )
    response = admin_client.post(reverse("admin:tools_clienttool_add"), bad_window)
    assert "window_hours: must be a whole number from 1 to 720" in response.content.decode()
    assert not ClientTool.objects.unscoped(ALL).exists()

    good = tool_form(client_a, parameters=schema, approval_rule='{"param": "amount", "above": 100}')
    assert admin_client.post(reverse("admin:tools_clienttool_add"), good).status_code == 302
    assert ClientTool.objects.unscoped(ALL).get().approval_rule == {"param": "amount", "above": 100}
    # empty = no approval
    tool = ClientTool.objects.unscoped(ALL).get()
    page = admin_client.get(reverse("admin:tools_clienttool_change", args=[tool.pk]))
    assert "Needs a teammate" in page.content.decode()
