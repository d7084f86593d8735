"""The e-mail replies' tasks (the `background` queue): send a turn's reply, send one queued
or failed reply, and the beat task that sends what is due. Thin: each calls one service.

Its own module, apart from the inbound transports' `tasks.py`: loaded by `MailConfig.ready`,
so the names are registered in every process; the services queue them by name."""

from __future__ import annotations

from celery import shared_task
from django.db import InterfaceError, OperationalError
from django.utils.dateparse import parse_datetime

from apps.core.tasks import TenantTask
from apps.core.tenancy import current_tenant
from apps.mail.services.outbound import (
    DELIVER_TASK,
    REPLY_SEND_TASK,
    mail_deliver,
    mails_send_due,
    turn_reply_send,
)


@shared_task(
    name=REPLY_SEND_TASK,
    base=TenantTask,
    ignore_result=True,
    acks_late=True,
    autoretry_for=(OperationalError, InterfaceError),
    max_retries=3,
    retry_backoff=True,
)
def reply_send(conversation_id: int, trace_id: int, client_id: int) -> None:
    """E-mail what one turn of an e-mail conversation posted. Safe to run twice."""
    turn_reply_send(conversation_id=conversation_id, trace_id=trace_id, client_id=client_id)


@shared_task(name=DELIVER_TASK, base=TenantTask, ignore_result=True, acks_late=True)
def deliver(mail_id: int, client_id: int, now: str = "") -> None:
    """Send one queued or failed reply if it is due (a failure schedules its next try)."""
    from apps.clients.models import Client

    if current_tenant() is None:
        return
    client = Client.objects.filter(pk=client_id).first()
    if client is not None:
        mail_deliver(client=client, mail_id=mail_id, now=parse_datetime(now) if now else None)


@shared_task(name="mail.send_due", ignore_result=True)
def send_due() -> None:
    """Beat: send the replies whose (next) attempt is due."""
    mails_send_due()
