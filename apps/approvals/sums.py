"""What a threshold rule is checked against: the SUM of the amounts of a tool's calls (and of
its group's), per conversation, per customer and per order, over the rule's window — so three
refunds of 50, or 100 + 99.99 on one order, ask for approval under `"above": 100` like one
refund of 150 does (apps/tools/approval_rules.py for the rule's keys).

A call counts when it ran or is running (a `ToolExecution` that did not fail), or is waiting
for or got a teammate's approval (an `ApprovalRequest` pending or approved whose run did not
fail) — not a denied, withdrawn, expired or failed one — plus the new call itself. One call is
counted once (its idempotency key: an approved request and its run share it).

Read-only; the caller holds the lock that keeps two racing calls from both slipping under the
threshold (`apps.approvals.services.approval_gate`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Q
from django.utils import timezone

from apps.approvals.models import ApprovalRequest, ApprovalStatus
from apps.clients.models import Client
from apps.conversations.models import Conversation
from apps.tools.approval_rules import SumRule, amount_of, sum_rule
from apps.tools.models import ClientTool, ExecutionStatus, ToolExecution


def customer_key(conversation: Conversation) -> tuple[str, str] | None:
    """Whose calls "per customer" adds up, as (conversation field, value): the verified
    customer (`customer_id`). A conversation with no verified customer falls back to its
    `visitor_id` — the widget's id for one browser, so an anonymous person with two browsers
    counts as two customers (the conversation and order scopes still hold for them). None when
    neither is known (no customer scope). The one place to change that choice."""
    if conversation.customer_id:
        return "customer_id", conversation.customer_id
    if conversation.visitor_id:
        return "visitor_id", conversation.visitor_id
    return None


def group_tools(*, client: Client, tool: ClientTool) -> list[ClientTool]:
    """The tools whose calls add up with `tool`'s: itself, and every tool of the client whose
    threshold rule names the same `group`."""
    rule = sum_rule(tool.approval_rule)
    if rule is None or not rule.group:
        return [tool]
    members = ClientTool.objects.for_client(client).filter(approval_rule__group=rule.group)
    found = {t.pk: t for t in members if sum_rule(t.approval_rule) is not None}
    found[tool.pk] = tool
    return [found[pk] for pk in sorted(found)]


@dataclass
class _Call:
    kind: str  # "execution" | "approval"
    ref: str
    tool: ClientTool
    params: dict[str, Any]
    conversation: Conversation | None
    at: datetime
    status: str


def _scope_filters(
    *,
    rule: SumRule,
    rules: dict[int, SumRule],
    conversation: Conversation,
    params: dict[str, Any],
) -> dict[str, Q]:
    filters: dict[str, Q] = {}
    for scope in rule.scopes:
        if scope == "conversation":
            filters[scope] = Q(conversation_id=conversation.pk)
        elif scope == "customer":
            key = customer_key(conversation)
            if key is None:
                continue
            field, value = key
            match = Q(**{f"conversation__{field}": value})
            if field == "visitor_id":
                match &= Q(conversation__customer_id="")
            filters[scope] = match
        elif scope == "order":
            order = params.get(rule.order_param)
            if order is None or order == "":
                continue
            match = Q(pk__in=[])
            for tool_pk, member in rules.items():
                match |= Q(tool_id=tool_pk, **{f"params__{member.order_param}": order})
            filters[scope] = match
    return filters


def _calls(
    *, client: Client, tools: list[ClientTool], since: datetime, match: Q, exclude_key: str
) -> list[_Call]:
    by_key: dict[str, _Call] = {}
    executions = (
        ToolExecution.objects.for_client(client)
        .filter(tool__in=tools, created_at__gte=since)
        .filter(match)
        .exclude(idempotency_key=exclude_key)
        .select_related("tool", "conversation")
    )
    failed: set[str] = set()
    for execution in executions:
        if execution.status == ExecutionStatus.FAILED:
            failed.add(execution.idempotency_key)
            continue
        by_key[execution.idempotency_key] = _Call(
            "execution",
            str(execution.pk),
            execution.tool,
            execution.params,
            execution.conversation,
            execution.created_at,
            execution.status,
        )
    approvals = (
        ApprovalRequest.objects.for_client(client)
        .filter(tool__in=tools, created_at__gte=since)
        .filter(status__in=[ApprovalStatus.PENDING, ApprovalStatus.APPROVED])
        .filter(match)
        .exclude(idempotency_key=exclude_key)
        .select_related("tool", "conversation")
    )
    for approval in approvals:
        key = approval.idempotency_key
        if key in failed or key in by_key:  # its run failed / is counted as the run
            continue
        by_key[key] = _Call(
            "approval",
            str(approval.public_id),
            approval.tool,
            approval.params,
            approval.conversation,
            approval.created_at,
            approval.status,
        )
    return sorted(by_key.values(), key=lambda c: c.at)


def _in_scope(
    call: _Call,
    scope: str,
    *,
    rules: dict[int, SumRule],
    conversation: Conversation,
    params: dict[str, Any],
    rule: SumRule,
) -> bool:
    other = call.conversation
    if scope == "conversation":
        return other is not None and other.pk == conversation.pk
    if scope == "customer":
        key = customer_key(conversation)
        if key is None or other is None:
            return False
        field, value = key
        if field == "visitor_id" and other.customer_id:
            return False
        return getattr(other, field) == value
    member = rules.get(call.tool.pk)
    order = params.get(rule.order_param)
    return member is not None and order is not None and call.params.get(member.order_param) == order


def approval_basis(
    *,
    client: Client,
    conversation: Conversation,
    tool: ClientTool,
    params: dict[str, Any],
    exclude_key: str = "",
    tools: list[ClientTool] | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Per scope of `tool`'s threshold rule, the sum of the new call (these `params`) and the
    calls that count, and which scopes went over the threshold (`tripped`; empty = no approval
    needed on the sums). JSON-ready: it is stored on the request and shown to the approver.
    {} when the tool has no threshold rule."""
    rule = sum_rule(tool.approval_rule)
    if rule is None:
        return {}
    now = now or timezone.now()
    tools = tools or group_tools(client=client, tool=tool)
    rules = {t.pk: r for t in tools if (r := sum_rule(t.approval_rule)) is not None}
    filters = _scope_filters(rule=rule, rules=rules, conversation=conversation, params=params)
    amount = amount_of(params, rule.param)
    since = now - timedelta(hours=rule.window_hours)
    match = Q(pk__in=[])
    for q in filters.values():
        match |= q
    calls = (
        _calls(client=client, tools=tools, since=since, match=match, exclude_key=exclude_key)
        if filters
        else []
    )
    this = {
        "this": True,
        "tool": tool.name,
        "amount": str(amount) if amount is not None else None,
        "at": now.isoformat(),
        "status": "new",
    }
    scopes: dict[str, Any] = {}
    for scope in filters:
        total = amount or Decimal(0)
        listed = []
        for call in calls:
            member = rules.get(call.tool.pk)
            value = amount_of(call.params, member.param) if member else None
            if value is None or not _in_scope(
                call, scope, rules=rules, conversation=conversation, params=params, rule=rule
            ):
                continue
            total += value
            listed.append(
                {
                    "kind": call.kind,
                    "ref": call.ref,
                    "tool": call.tool.name,
                    "amount": str(value),
                    "at": call.at.isoformat(),
                    "status": call.status,
                    "conversation": str(call.conversation.public_id)
                    if call.conversation is not None
                    else None,
                }
            )
        scopes[scope] = {"key": _scope_key(scope, conversation, params, rule), "total": str(total)}
        scopes[scope]["calls"] = [*listed, this]
    tripped = [s for s, v in scopes.items() if Decimal(v["total"]) > rule.above]
    customer = customer_key(conversation)
    return {
        "param": rule.param,
        "above": str(rule.above),
        "window_hours": rule.window_hours,
        "group": rule.group,
        "group_tools": [t.name for t in tools],
        "amount": this["amount"],
        "customer_from": customer[0] if customer else None,
        "scopes": scopes,
        "tripped": tripped,
    }


def _scope_key(
    scope: str, conversation: Conversation, params: dict[str, Any], rule: SumRule
) -> str:
    if scope == "conversation":
        return str(conversation.public_id)
    if scope == "customer":
        key = customer_key(conversation)
        return f"{key[0]}={key[1]}" if key else ""
    return f"{rule.order_param}={params.get(rule.order_param)}"
