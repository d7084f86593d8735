"""The approval API: list, approve (the held call runs once), deny (the customer is told why);
roles (a viewer reads but cannot decide) and tenancy (another client's request answers 404 and
nothing changes)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.urls import reverse

from apps.accounts.models import Role
from apps.approvals.models import ApprovalRequest, ApprovalStatus
from apps.conversations.models import Message
from apps.tools.models import ToolExecution
from tests.api.conftest import assert_error
from tests.conftest import key_for, session_for
from tests.support.approvals import pending_approval
from tests.support.fake_webhook import Reply

pytestmark = pytest.mark.django_db
ALL = "test checks the database directly"


def url(name: str, approval: ApprovalRequest | None = None) -> str:
    if approval is None:
        return reverse(name)
    return reverse(name, args=[approval.public_id])


def state(approval: ApprovalRequest) -> tuple[str, object, int]:
    approval.refresh_from_db()
    executions = ToolExecution.objects.unscoped(ALL).filter(client=approval.client).count()
    return approval.status, approval.decided_by_id, executions


def assert_cannot_decide(api: Any, approval: ApprovalRequest, status: int, code: str) -> None:
    """Both approving and denying `approval` are refused with `status` and the error `code`."""
    assert_error(api.post(url("api-approval-approve", approval)), status, code)
    deny = api.post(url("api-approval-deny", approval), {"reason": "no"}, format="json")
    assert_error(deny, status, code)


def test_a_viewer_lists_and_reads_but_cannot_decide(client_a):
    approval = pending_approval(client_a)
    viewer = key_for(client_a, Role.VIEWER)

    listed = viewer.get(url("api-approval-list")).json()["results"]
    assert [a["id"] for a in listed] == [str(approval.public_id)]
    assert listed[0]["tool"] == "refund_order"
    assert listed[0]["params"] == {"order_id": "TH-12345", "amount": 150}
    assert listed[0]["status"] == "pending"
    assert viewer.get(url("api-approval-detail", approval)).status_code == 200
    assert viewer.get(url("api-approval-list") + "?status=denied").json()["results"] == []

    before = state(approval)
    assert_cannot_decide(viewer, approval, 403, "permission_denied")
    assert state(approval) == before


def test_an_agent_approves_and_the_call_runs_once(
    client_a, webhook, django_capture_on_commit_callbacks
):
    approval = pending_approval(client_a, webhook_url=webhook.url())
    agent = session_for(client_a, Role.AGENT)
    webhook.script(Reply.ok({"refund_id": "R-1"}))

    with django_capture_on_commit_callbacks(execute=True):  # the run, queued after commit
        response = agent.post(url("api-approval-approve", approval))

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "approved"
    assert body["decided_by"] == agent.staff_user.email
    detail = agent.get(url("api-approval-detail", approval)).json()
    assert detail["execution_status"] == "succeeded"
    assert len(webhook.requests) == 1
    assert webhook.requests[0].headers["idempotency-key"] == approval.idempotency_key
    told = Message.objects.unscoped(ALL).filter(data__outcome="succeeded").get()
    assert told.conversation_id == approval.conversation_id
    # a second approval is refused and nothing runs again
    assert_error(agent.post(url("api-approval-approve", approval)), 409, "approval_decided")
    assert len(webhook.requests) == 1


def test_deny_needs_a_reason_and_tells_the_customer(client_a, webhook):
    approval = pending_approval(client_a, webhook_url=webhook.url())
    agent = key_for(client_a, Role.AGENT)

    assert_error(agent.post(url("api-approval-deny", approval), {}, format="json"), 400)
    response = agent.post(
        url("api-approval-deny", approval),
        {"reason": "Refunds over 100 go by bank."},
        format="json",
    )

    assert response.status_code == 200, response.content
    assert response.json()["status"] == "denied"
    assert response.json()["reason"] == "Refunds over 100 go by bank."
    told = Message.objects.unscoped(ALL).filter(data__outcome="denied").get()
    assert "Refunds over 100 go by bank." in told.text
    assert webhook.requests == []
    assert_error(agent.post(url("api-approval-approve", approval)), 409, "approval_decided")


@pytest.mark.parametrize("kind", ["api_key", "session"])
def test_another_client_cannot_see_or_decide_it(client_a, client_b, kind):
    approval = pending_approval(client_a)
    own = pending_approval(client_b)
    b_owner = (
        key_for(client_b, Role.OWNER) if kind == "api_key" else session_for(client_b, Role.OWNER)
    )
    before = state(approval)

    listed = b_owner.get(url("api-approval-list")).json()["results"]
    assert [a["id"] for a in listed] == [str(own.public_id)]
    missing = reverse("api-approval-detail", args=[uuid.uuid4()])
    assert b_owner.get(url("api-approval-detail", approval)).json() == b_owner.get(missing).json()
    assert_error(b_owner.get(url("api-approval-detail", approval)), 404, "not_found")
    assert_cannot_decide(b_owner, approval, 404, "not_found")
    assert state(approval) == before
    assert (
        ApprovalRequest.objects.unscoped(ALL).get(pk=approval.pk).status == ApprovalStatus.PENDING
    )
