"""What an approval card says, in words: the action and its amount ("Request refund: 425.76 on
order TH-12346"), the other parameters under their labels, the customer, the sums a threshold rule
held the call on and the customer's running total (the conversation's last messages come from
`selectors.last_messages`). No JSON, no
internal ids (idempotency keys, public ids): a teammate decides from what a person reads.

A tool's name as staff read it comes from one function, `tool_label`: the tool definition's
optional `display_name` (a string, or a map keyed by language) when it has one, else its name
humanised ("request_refund" → "Request refund"). `param_label` does the same for a parameter
with the optional `labels`."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.utils import formats
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from apps.approvals.models import ApprovalRequest, ApprovalStatus
from apps.conversations.models import Conversation
from apps.core.numbers import finite_decimal
from apps.tools import wording
from apps.tools.approval_rules import DEFAULT_ORDER_PARAM, sum_rule
from apps.tools.models import ClientTool, ExecutionStatus

SCOPE_LABELS = {
    "conversation": gettext_lazy("this conversation"),
    "customer": gettext_lazy("this customer"),
    "order": gettext_lazy("this order"),
}
# What a listed call's status reads as (a run's or a request's; "new" is this call).
CALL_STATUS_LABELS = {**dict(ExecutionStatus.choices), **dict(ApprovalStatus.choices)}


def tool_label(tool: ClientTool, language: str | None = None) -> str:
    """The tool's name for staff: as the customer reads it (its definition's `display_name` in
    `language`, the active one by default, else its name humanised; apps/tools/wording.py)."""
    return wording.display_name(tool, language)


def param_label(tool: ClientTool, name: str, language: str | None = None) -> str:
    """A parameter's label, as the customer reads it (the definition's `labels`), capitalised
    for a row of the card."""
    label = wording.field_label(tool, name, language)
    return label[:1].upper() + label[1:]


def format_amount(value: Any) -> str:
    """An amount with two decimals and the active language's separators ("425.76", "425,76")."""
    number = finite_decimal(value)
    if number is None:
        return str(value)
    return formats.number_format(number, decimal_pos=2, use_l10n=True, force_grouping=True)


def format_value(value: Any) -> str:
    """A parameter's value as a person reads it: text as it is, numbers with the language's
    separators, yes/no, lists joined; nested objects as "label: value" pairs, never JSON."""
    if isinstance(value, bool):
        return _("yes") if value else _("no")
    if isinstance(value, int | float | Decimal):
        return formats.number_format(value, use_l10n=True, force_grouping=True)
    if isinstance(value, list):
        return ", ".join(format_value(v) for v in value)
    if isinstance(value, dict):
        return "; ".join(
            f"{wording.humanised(str(k))}: {format_value(v)}" for k, v in value.items()
        )
    if value is None:
        return "—"
    return str(value)


def _amount_param(rule: Any, params: dict[str, Any]) -> str:
    """The parameter that is the call's amount: the threshold rule's `param`, else `amount`."""
    summed = sum_rule(rule)
    if summed is not None and summed.param in params:
        return summed.param
    return "amount" if finite_decimal(params.get("amount")) is not None else ""


def _order_param(rule: Any, params: dict[str, Any]) -> str:
    summed = sum_rule(rule)
    name = summed.order_param if summed is not None else DEFAULT_ORDER_PARAM
    value = params.get(name)
    return name if isinstance(value, str | int) and not isinstance(value, bool) else ""


def action_text(tool: ClientTool, params: Any, rule: Any) -> str:
    """The action in words, with its amount and order when it has them."""
    params = params if isinstance(params, dict) else {}
    action = tool_label(tool)
    amount_name = _amount_param(rule, params)
    order_name = _order_param(rule, params)
    values = {
        "action": action,
        "amount": format_amount(params.get(amount_name)) if amount_name else "",
        "order": str(params.get(order_name)) if order_name else "",
    }
    if amount_name and order_name:
        return _("%(action)s: %(amount)s on order %(order)s") % values
    if amount_name:
        return _("%(action)s: %(amount)s") % values
    if order_name:
        return _("%(action)s: order %(order)s") % values
    return action


def param_rows(tool: ClientTool, params: Any, rule: Any) -> list[dict[str, str]]:
    """The parameters the action's sentence does not already say (its amount and order), each
    under its label."""
    params = params if isinstance(params, dict) else {}
    said = {_amount_param(rule, params), _order_param(rule, params)}
    return [
        {"name": name, "label": param_label(tool, name), "value": format_value(value)}
        for name, value in params.items()
        if name not in said
    ]


def customer_text(conversation: Conversation) -> str:
    """Who the customer is: the verified customer's name and e-mail (else the shop's id for
    them), or that nobody verified the visitor."""
    if not conversation.customer_verified:
        return _("not verified (anonymous visitor)")
    parts = [p for p in (conversation.customer_name, conversation.customer_email) if p]
    who = " · ".join(parts) or conversation.customer_id
    return _("%(who)s (verified)") % {"who": who}


def running_total(approval: Any) -> dict[str, str] | None:
    """The customer's total of the calls the rule adds up (running, approved or waiting, this
    one included) over the rule's window, from the sums the call was held on; the conversation's
    when no customer is known. None when the rule sums nothing (e.g. "always")."""
    basis = approval.basis if isinstance(approval.basis, dict) else {}
    raw = basis.get("scopes")
    scopes: dict[str, Any] = raw if isinstance(raw, dict) else {}
    for scope in ("customer", "conversation"):
        value = scopes.get(scope)
        if isinstance(value, dict) and finite_decimal(value.get("total")) is not None:
            tripped = scope in (basis.get("tripped") or [])
            return {
                "scope": scope,
                "total": format_amount(value["total"]),
                "above": format_amount(basis.get("above")) if basis.get("above") else "",
                "hours": str(basis.get("window_hours") or ""),
                "tripped": "1" if tripped else "",
            }
    return None


def approval_sums(approval: ApprovalRequest) -> list[dict[str, Any]]:
    """The sums a threshold rule held the call on (`ApprovalRequest.basis`), tripped scopes
    first: the scope, its total and the calls it is made of — in words (the tool's label, the
    status's label), without the internal references the basis keeps."""
    basis = approval.basis if isinstance(approval.basis, dict) else {}
    raw = basis.get("scopes")
    scopes: dict[str, Any] = raw if isinstance(raw, dict) else {}
    tripped = basis.get("tripped") or []
    rows = [
        {
            "scope": scope,
            "label": SCOPE_LABELS.get(scope, scope),
            "total": format_amount(value.get("total", "")),
            "tripped": scope in tripped,
            "calls": [_sum_call(approval, call) for call in value.get("calls", [])],
        }
        for scope, value in scopes.items()
        if isinstance(value, dict)
    ]
    return sorted(rows, key=lambda row: not row["tripped"])


def _sum_call(approval: ApprovalRequest, call: Any) -> dict[str, Any]:
    call = call if isinstance(call, dict) else {}
    name = str(call.get("tool") or "")
    status = str(call.get("status") or "")
    return {
        "this": bool(call.get("this")),
        "tool": tool_label(approval.tool)
        if name == approval.tool.name
        else wording.humanised(name),  # another tool of its group
        "status": CALL_STATUS_LABELS.get(status, status),
        "amount": format_amount(call.get("amount")) if call.get("amount") is not None else "—",
        "at": call.get("at") or "",
    }


def rule_text(rule: Any) -> str:
    """Why the call waits, in words."""
    if not isinstance(rule, dict) or not rule:
        return ""
    if rule.get("always") is True:
        return _("Every call of this tool needs a teammate's approval.")
    summed = sum_rule(rule)
    if summed is None:
        return _("The tool's approval rule cannot be read, so every call waits.")
    return _("Needs approval when the sum over %(hours)s h is above %(above)s.") % {
        "hours": summed.window_hours,
        "above": format_amount(summed.above),
    }
