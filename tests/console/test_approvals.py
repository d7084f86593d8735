"""The console's approvals: the list page, the box on the conversation page, approve and deny;
a viewer reads but cannot decide; another client's request answers 404 and nothing changes."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.accounts.models import Role
from apps.approvals.models import ApprovalRequest, ApprovalStatus
from apps.conversations.models import Message
from apps.tools.models import ToolExecution
from tests.support.approvals import pending_approval
from tests.support.fake_webhook import Reply

pytestmark = pytest.mark.django_db
ALL = "test checks the database directly"


def q(approval: ApprovalRequest) -> str:
    return f"?client={approval.client.slug}"


def test_the_list_shows_the_exact_call_with_its_conversation(agent, client_a):
    approval = pending_approval(client_a)
    response = agent.get(reverse("console-approvals") + q(approval))
    assert response.status_code == 200
    html = response.content.decode()
    assert "Refund order: 150.00 on order TH-12345" in html
    assert reverse("console-conversation", args=[approval.conversation.public_id]) in html
    assert "data-approve" in html and "above 100.00" in html
    # the nav links to it from every console page
    assert (
        reverse("console-approvals")
        in agent.get(reverse("console-queue") + q(approval)).content.decode()
    )
    # filters
    denied = agent.get(reverse("console-approvals") + q(approval) + "&status=denied")
    assert "TH-12345" not in denied.content.decode()


def test_the_conversation_page_shows_its_request(agent, client_a):
    approval = pending_approval(client_a)
    page = agent.get(
        reverse("console-conversation", args=[approval.conversation.public_id]) + q(approval)
    ).content.decode()
    assert 'id="approvals"' in page and str(approval.public_id) in page
    assert reverse("console-approval-approve", args=[approval.public_id]) in page


def test_a_viewer_sees_but_cannot_decide(viewer, client_a):
    approval = pending_approval(client_a)
    html = viewer.get(reverse("console-approvals") + q(approval)).content.decode()
    assert "TH-12345" in html and "data-approve" not in html
    for name, body in (
        ("console-approval-approve", {}),
        ("console-approval-deny", {"reason": "no"}),
    ):
        response = viewer.post(reverse(name, args=[approval.public_id]) + q(approval), body)
        assert response.status_code == 403
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.PENDING


def test_an_agent_approves_from_the_conversation_page(
    agent, client_a, webhook, django_capture_on_commit_callbacks
):
    approval = pending_approval(client_a, webhook_url=webhook.url())
    webhook.script(Reply.ok({"refund_id": "R-7"}))
    with django_capture_on_commit_callbacks(execute=True):
        response = agent.post(
            reverse("console-approval-approve", args=[approval.public_id]) + q(approval),
            {"back": "conversation"},
        )
    assert response.status_code == 302
    assert response["Location"].endswith(q(approval) + "#approvals")
    assert str(approval.conversation.public_id) in response["Location"]
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.APPROVED
    assert approval.decided_by == agent.staff_user
    assert len(webhook.requests) == 1
    assert Message.objects.unscoped(ALL).filter(data__outcome="succeeded").count() == 1
    # approving again: refused with a message, nothing runs
    again = agent.post(
        reverse("console-approval-approve", args=[approval.public_id]) + q(approval), follow=True
    )
    assert "already decided" in again.content.decode()
    assert len(webhook.requests) == 1


def test_an_agent_denies_with_a_reason(agent, client_a):
    approval = pending_approval(client_a)
    url = reverse("console-approval-deny", args=[approval.public_id]) + q(approval)
    empty = agent.post(url, {"reason": " "}, follow=True)
    assert "Say why" in empty.content.decode()
    agent.post(url, {"reason": "Refunds over 100 go by bank transfer."})
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.DENIED
    told = Message.objects.unscoped(ALL).get(data__outcome="denied")
    assert "bank transfer" in told.text


def test_another_clients_request_is_404_and_unchanged(browser_for, client_a, client_b):
    approval = pending_approval(client_a)
    pending_approval(client_b)
    b_admin = browser_for(Role.OWNER, client=client_b)
    b_query = f"?client={client_b.slug}"
    listed = b_admin.get(reverse("console-approvals") + b_query).content.decode()
    assert str(approval.public_id) not in listed
    for name, body in (
        ("console-approval-approve", {}),
        ("console-approval-deny", {"reason": "no"}),
    ):
        response = b_admin.post(reverse(name, args=[approval.public_id]) + b_query, body)
        assert response.status_code == 404
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.PENDING
    assert not ToolExecution.objects.unscoped(ALL).exists()
