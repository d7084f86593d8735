"""Staff replies out by e-mail: a visible staff message in an e-mail conversation (the console's
reply form, the admin, `POST /api/v1/conversations/<id>/messages`) goes to the customer as one
threaded e-mail through `mail_reply_send`, once its transaction has committed.

Every staff reply path ends in `message_append`, which emits `message.created` on the kernel's
outbound bus (apps/core/outbound.py) after commit; `MailConfig.ready` connects
`staff_reply_receive` to it. The receiver queues `mail.send_staff_reply` (the default queue: a
customer is waiting) for staff messages of e-mail conversations only. The assistant's replies
are e-mailed by the post-turn trigger (apps/mail/services), never here; the widget's "unseen
replies" e-mail skips e-mail conversations — so each staff reply is e-mailed exactly once.
"""

from __future__ import annotations

import logging

from celery import shared_task

from apps.conversations.models import Channel, Conversation, Message, Role, Visibility
from apps.core.outbound import OutboundEvent
from apps.core.tasks import TenantTask
from apps.core.tenancy import tenant_scope
from apps.mail.models import MailMessage
from apps.mail.services.outbound import mail_reply_send

logger = logging.getLogger(__name__)

TASK_NAME = "mail.send_staff_reply"


def staff_reply_receive(event: OutboundEvent) -> None:
    """The outbound bus's receiver: queue the e-mail of a staff message of an e-mail
    conversation. Runs after the reply committed; never raises into the caller (the bus logs)."""
    if event.type != "message.created" or event.data.get("role") != "staff":
        return
    if not event.conversation and not event.data.get("conversation"):
        return
    with tenant_scope(event.client_id):
        is_email = (
            Conversation.objects.for_current_client()
            .filter(public_id=str(event.conversation or event.data.get("conversation") or ""))
            .filter(channel=Channel.EMAIL)
            .values_list("pk", flat=True)
            .first()
        )
    if is_email is None:
        return
    send_staff_reply.apply_async(
        kwargs={
            "conversation_id": is_email,
            "seq": int(event.data["seq"]),
            "client_id": event.client_id,
        }
    )


def staff_reply_email(*, conversation_id: int, seq: int) -> MailMessage | None:
    """E-mail the staff message `seq` of the conversation (inside its client's scope). Safe to
    run twice. None when there is nothing to send."""
    conversation = (
        Conversation.objects.for_current_client()
        .select_related("client")
        .filter(pk=conversation_id, channel=Channel.EMAIL)
        .first()
    )
    if conversation is None:
        return None
    client = conversation.client
    message = (
        Message.objects.for_client(client)
        .filter(conversation=conversation, seq=seq, role=Role.STAFF, visibility=Visibility.VISIBLE)
        .first()
    )
    if message is None:
        return None
    # mail_reply_send claims the message on the conversation's `reply_emailed_seq` (the row
    # locked): a second run, or a turn's reply task racing this one, never sends it again.
    return mail_reply_send(client=client, conversation=conversation, messages=[message])


@shared_task(name=TASK_NAME, base=TenantTask, ignore_result=True)
def send_staff_reply(conversation_id: int, seq: int) -> bool:
    """Queued after a staff reply commits: e-mail it in the conversation's thread."""
    return staff_reply_email(conversation_id=conversation_id, seq=seq) is not None
