from __future__ import annotations

from celery import shared_task

from apps.conversations.services import contact_confirmation_send, unseen_replies_email
from apps.core.tasks import TenantTask, tenant_task


@tenant_task(
    "conversations.email_unseen_replies", ("conversations.Conversation", "conversation_id")
)
def email_unseen_replies(conversation_id: int) -> int:
    """Scheduled WIDGET_REPLY_EMAIL_DELAY_SECONDS after a staff reply commits: e-mail the staff
    replies the customer has not seen to the address they left (one e-mail per batch). Safe to
    run twice: the batch is claimed before sending."""
    return unseen_replies_email(conversation_id=conversation_id)


@shared_task(
    name="conversations.send_contact_confirmation",
    base=TenantTask,
    tenant_from=("conversations.Conversation", "conversation_id"),
    ignore_result=True,
)
def send_contact_confirmation(conversation_id: int, email: str, site: str) -> bool:
    """The confirmation e-mail for an address a visitor left, sent by a worker so a slow mail
    server never holds a widget request. Sending twice sends two links for the same address,
    either of which confirms it."""
    return contact_confirmation_send(conversation_id=conversation_id, email=email, site=site)
