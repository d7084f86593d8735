"""Flags on the assistant's answers: staff mark a visible assistant reply as wrong, unhelpful or
unsafe, with an optional correction (docs/architecture.md, "Flags"). The one place a flag is
made; the console, the API, insights (teaching from a flag) and simulations (a test case from a
flag) call it and read flags through `apps.flags.selectors`.

A flag is a record, nothing more: it changes no prompt. What staff teach from it goes through
the insights proposals (apps/insights/teach.py) and reaches prompts only once approved.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils.translation import gettext as _

from apps.clients.models import Client
from apps.conversations.events import conversation_changed
from apps.conversations.models import Message, Role, Visibility
from apps.core.exceptions import ApplicationError
from apps.flags.models import FlagReason, MessageFlag

MAX_CORRECTION_CHARS = 2000


def _field_error(field: str, message: str) -> ApplicationError:
    return ApplicationError(message, {"fields": {field: message}}, code="invalid")


@transaction.atomic
def message_flag(
    *, client: Client, message: Message, reason: str, correction: str = "", actor: Any = None
) -> MessageFlag:
    """Flag one of the assistant's visible replies. Only the assistant's replies the customer
    saw can be flagged (not a customer's, staff's or internal message)."""
    if message.client_id != client.pk:
        raise ApplicationError(_("Not found."), status=404, code="not_found")
    if message.role != Role.ASSISTANT or message.visibility != Visibility.VISIBLE:
        raise _field_error("message", _("Only the assistant's replies can be flagged."))
    if reason not in FlagReason.values:
        raise _field_error("reason", _("Choose wrong, unhelpful or unsafe."))
    correction = (correction or "").strip()
    if len(correction) > MAX_CORRECTION_CHARS:
        raise _field_error(
            "correction",
            _("At most %(count)d characters.") % {"count": MAX_CORRECTION_CHARS},
        )
    flag = MessageFlag.objects.create(
        client=client,
        conversation_id=message.conversation_id,
        message=message,
        reason=reason,
        correction=correction,
        flagged_by=actor if getattr(actor, "pk", None) else None,
    )
    # Open consoles (the inbox's "flagged" filter) hear of it once committed.
    conversation_changed(message.conversation_id, client.pk)
    return flag
