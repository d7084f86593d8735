from __future__ import annotations

from celery import shared_task

from apps.conversations.services import unseen_replies_email


@shared_task(name="conversations.email_unseen_replies", acks_late=True, ignore_result=True)
def email_unseen_replies(conversation_id: int) -> int:
    """Scheduled WIDGET_REPLY_EMAIL_DELAY_SECONDS after a staff reply commits: e-mail the staff
    replies the customer has not seen to the address they left (one e-mail per batch). Safe to
    run twice: the batch is claimed before sending."""
    return unseen_replies_email(conversation_id=conversation_id)
