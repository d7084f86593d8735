"""The approval tasks: the approved run (a worker) and the expiry sweep (beat). Their names
(`reasoning.…`) are the ones queued and scheduled before this app existed: renaming them would
strand queued tasks and the beat schedule's entry."""

from celery import shared_task

from apps.approvals.services import approval_run, approvals_expire
from apps.core.tasks import tenant_task
from apps.core.tenancy import current_tenant


@tenant_task(
    "reasoning.run_approved_action", ("approvals.ApprovalRequest", "approval_id"), retry_db=True
)
def run_approved_action(approval_id: int) -> None:
    """A teammate approved a held tool call: run it once and tell the customer
    (apps/approvals/services.py). Safe to run twice."""
    client_id = current_tenant()
    if client_id is None:
        return
    approval_run(client_id=client_id, approval_id=approval_id)


@shared_task(name="reasoning.expire_approvals", ignore_result=True)
def expire_approvals() -> None:
    """Beat: held tool calls nobody decided in time become hand-offs to a person."""
    approvals_expire()
