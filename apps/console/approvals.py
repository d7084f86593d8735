"""The console's approval pages: the tool calls the client's rules hold for a teammate's
approval (waiting ones first), and deciding one — approve (the call runs once, in a worker) or
deny with a reason the customer is told (apps/approvals/services.py). The card shows the sums a
threshold rule held the call on (which scope tripped it, and the calls each sum is made of), and
a request the customer withdrew ("withdrawn by the customer", when and which message; Approve
then does nothing and says so). The conversation page shows the same box for its own requests
(`templatetags/approvals.py`). Each card says the action in words, the customer, the
conversation's last messages and the customer's running total (apps/approvals/cards.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from apps.api.permissions import SUPPORT
from apps.approvals.cards import (
    action_text,
    approval_sums,
    customer_text,
    param_rows,
    rule_text,
    running_total,
    tool_label,
)
from apps.approvals.models import ApprovalRequest, ApprovalStatus
from apps.approvals.selectors import approval_get, approval_list, last_messages
from apps.approvals.services import MAX_REASON_CHARS, approval_approve, approval_deny
from apps.console.access import ConsoleAccess, console_view
from apps.core.exceptions import ApplicationError

PAGE_ROWS = 100


def approval_row(
    access: ConsoleAccess,
    approval: ApprovalRequest,
    recent: dict[int, list[dict[str, str]]] | None = None,
) -> dict[str, Any]:
    """What the list and the conversation page show of one request (`recent`: the last
    messages of the cards' conversations, `approval_rows` loads them for a page at once)."""
    base = reverse("console-approval-approve", args=[approval.public_id])
    return {
        "approval": approval,
        "action": action_text(approval.tool, approval.params, approval.rule),
        "params": param_rows(approval.tool, approval.params, approval.rule),
        "customer": customer_text(approval.conversation),
        "total": running_total(approval),
        "messages": (recent or {}).get(approval.conversation_id, []),
        "sums": approval_sums(approval),
        "withdrawn": approval.status == ApprovalStatus.WITHDRAWN,
        "rule": rule_text(approval.rule),
        "pending": approval.status == ApprovalStatus.PENDING,
        "conversation_url": reverse("console-conversation", args=[approval.conversation.public_id])
        + access.query,
        "approve_url": base + access.query,
        "deny_url": reverse("console-approval-deny", args=[approval.public_id]) + access.query,
    }


def approval_rows(
    access: ConsoleAccess, approvals: Iterable[ApprovalRequest]
) -> list[dict[str, Any]]:
    approvals = list(approvals)
    recent = last_messages(client=access.client, conversations=[a.conversation for a in approvals])
    return [approval_row(access, a, recent) for a in approvals]


@require_GET
@console_view()
def approvals_page(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    status = request.GET.get("status") or ""
    if status not in {"", *ApprovalStatus.values}:
        status = ""
    rows = approval_list(client=access.client, status=status or None)[:PAGE_ROWS]
    return render(
        request,
        "console/approvals.html",
        {
            "access": access,
            "rows": approval_rows(access, rows),
            "status": status,
            "statuses": ApprovalStatus.choices,
            "max_reason": MAX_REASON_CHARS,
            # the client's doorbell: rings when any of its conversations changes
            "events_url": reverse("console-queue-events") + access.query,
        },
    )


def _approval_or_404(access: ConsoleAccess, approval_id: str) -> ApprovalRequest:
    approval = approval_get(client=access.client, approval_id=approval_id)
    if approval is None:
        raise Http404("No such approval request.")
    return approval


def _back(request: HttpRequest, access: ConsoleAccess, approval: ApprovalRequest) -> HttpResponse:
    """Back to the page the decision was made on: the conversation or the list (never a URL
    taken from the request)."""
    if request.POST.get("back") == "conversation":
        path = reverse("console-conversation", args=[approval.conversation.public_id])
        return redirect(path + access.query + "#approvals")
    return redirect(reverse("console-approvals") + access.query)


@require_POST
@console_view(minimum=SUPPORT)
def approval_approve_view(
    request: HttpRequest, access: ConsoleAccess, approval_id: str
) -> HttpResponse:
    approval = _approval_or_404(access, approval_id)
    try:
        approval_approve(client=access.client, approval=approval, actor=request.user)
    except ApplicationError as error:
        messages.error(request, error.message)
    else:
        messages.success(
            request,
            _("Approved: %(tool)s runs now and the customer is told the result.")
            % {"tool": tool_label(approval.tool)},
        )
    return _back(request, access, approval)


@require_POST
@console_view(minimum=SUPPORT)
def approval_deny_view(
    request: HttpRequest, access: ConsoleAccess, approval_id: str
) -> HttpResponse:
    approval = _approval_or_404(access, approval_id)
    try:
        approval_deny(
            client=access.client,
            approval=approval,
            actor=request.user,
            reason=request.POST.get("reason", "")[: MAX_REASON_CHARS * 2],
        )
    except ApplicationError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, _("Denied: the customer is told your reason."))
    return _back(request, access, approval)
