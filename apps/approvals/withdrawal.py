"""Approval requests withdrawn by the customer: their next message withdraws every request of
the conversation still waiting, unless it is an explicit yes to it — a no, or anything else (a
new request, a question, thanks), withdraws it. Deterministic: no model decides it.

Which answer a message gives is the reasoning guards' rule (`guards.confirmation_answer`); the
caller, the turn, passes it in (`answer=`) as it passes `confirmation_decision` to
`apps.tools.pending.pending_resolve`, so this layer never imports the reasoning layer and the
rule can be read and tested without a database.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy

from apps.approvals.models import ApprovalRequest, ApprovalStatus, WithdrawnBecause
from apps.approvals.services import action_words, internal_note, trace_step
from apps.clients.models import Client
from apps.conversations.models import Conversation, Message
from apps.core.tenant_sql import sql_rows
from apps.tools.pending import pending_close

# How a customer message answers a request: "yes", "no" or "other", from its text and the
# request's params (`apps.reasoning.guards.confirmation_answer`).
AnswerReader = Callable[[str, Mapping[str, Any]], str]

# Fixed replies (msgids, rendered in the conversation's language).
WITHDRAWN_TEXT = gettext_lazy(
    "Understood — I've withdrawn your request (%(action)s). It will not be carried out."
)
WITHDRAWN_NOTE_TEXT = gettext_lazy(
    "Your earlier request (%(action)s) has been withdrawn and will not be carried out. If you "
    "still want it, just ask again."
)
STILL_WAITING_TEXT = gettext_lazy(
    "Your request (%(action)s) is still waiting for a member of our team to check it. I'll let "
    "you know here as soon as it has been checked."
)
TOO_LATE_TEXT = gettext_lazy(
    "A member of our team had already approved your request (%(action)s) before your message "
    "arrived, so it is going ahead. I'll tell you the result here."
)


def approvals_open(*, client: Client, conversation: Conversation) -> list[ApprovalRequest]:
    """The conversation's requests a customer message may touch: waiting ones, and approved
    ones whose result the customer has not been told yet. One query; `handle_turn` asks it for
    every customer message and marks the message when there are some (`data["approvals"]`), so
    the turns of the others pay nothing.

    Almost every conversation has none, so whether there are any is asked first, in plain SQL
    (every customer message asks; building it through the ORM cost ≈ 1 ms): the query that
    joins four tables runs only when there are some."""
    table = ApprovalRequest._meta.db_table
    if not sql_rows(
        "approvals.open_exist",
        f"SELECT 1 FROM {table} WHERE client_id = %s AND conversation_id = %s"  # noqa: S608
        " AND (status = %s OR (status = %s AND finished_at IS NULL)) LIMIT 1",
        [client.pk, conversation.pk, ApprovalStatus.PENDING, ApprovalStatus.APPROVED],
        client_id=client.pk,
    ):
        return []
    return list(
        ApprovalRequest.objects.for_client(client)
        .filter(
            Q(status=ApprovalStatus.PENDING)
            | Q(status=ApprovalStatus.APPROVED, finished_at__isnull=True),
            conversation=conversation,
        )
        .select_related("tool", "pending_action", "trace", "requested_in")
        .order_by("pk")
    )


def approvals_withdraw(
    *,
    client: Client,
    conversation: Conversation,
    message: Message,
    answer: AnswerReader,
    candidates: list[ApprovalRequest] | None = None,
) -> list[ApprovalRequest]:
    """The customer's new `message` withdraws every request of the conversation that was asked
    before it and is still waiting — unless the message is an explicit yes to it
    (`guards.confirmation_answer`: "yes", "yes please", "sí" … with no other identifier). A no
    is `declined`; anything else (a new request, a question, thanks) is `new_message`.

    Called by `handle_turn` in the transaction that stores the message, with `conversation`
    locked: the same lock a teammate's decision takes first (`services.approval_approve`,
    `approval_deny`), so a decision and a
    withdrawal never interleave, and the conditional UPDATE lets exactly one of them win.
    `candidates`: `approvals_open`, when the caller has it."""
    if candidates is None:
        candidates = approvals_open(client=client, conversation=conversation)
    waiting = [
        a
        for a in candidates
        if a.status == ApprovalStatus.PENDING and a.requested_in.seq < message.seq
    ]
    withdrawn = []
    for approval in waiting:
        reading = answer(message.text, approval.params)
        if reading == "yes":
            continue
        because = WithdrawnBecause.DECLINED if reading == "no" else WithdrawnBecause.NEW_MESSAGE
        now = timezone.now()
        changed = (
            ApprovalRequest.objects.for_client(client)
            .filter(pk=approval.pk, status=ApprovalStatus.PENDING)
            .update(
                status=ApprovalStatus.WITHDRAWN,
                withdrawn_at=now,
                withdrawn_in=message,
                withdrawn_because=because,
                finished_at=now,
                updated_at=now,
            )
        )
        if not changed:
            continue
        approval.status, approval.withdrawn_at, approval.withdrawn_in = (
            ApprovalStatus.WITHDRAWN,
            now,
            message,
        )
        approval.withdrawn_because, approval.finished_at = because, now
        approval.conversation = conversation
        if approval.pending_action is not None:
            pending_close(client=client, pending=approval.pending_action)
        trace_step(
            approval,
            "approval_withdrawn",
            {"message": message.pk, "seq": message.seq, "because": because},
        )
        internal_note(
            approval,
            client,
            f"WITHDRAWN by the customer (message #{message.seq}, {because}): "
            f"{approval.tool.name} {json.dumps(approval.params, ensure_ascii=False)}",
            message=message.pk,
            because=because,
            outcome="withdrawn",
        )
        withdrawn.append(approval)
    return withdrawn


@dataclass
class WithdrawalReplies:
    """What the turn of a customer message tells them about the requests it touched."""

    replies: list[str] = field(default_factory=list)
    # The message only answered waiting requests (an explicit no, or a yes): these fixed
    # replies are the whole answer, and no model runs.
    answer_only: bool = False
    withdrawn: list[str] = field(default_factory=list)  # public ids

    def as_data(self) -> dict[str, Any]:
        return {"answer_only": self.answer_only, "withdrawn": self.withdrawn}


def withdrawal_replies(
    *,
    client: Client,
    conversation: Conversation,
    message: Message,
    answer: AnswerReader,
    confirmed: bool = False,
) -> WithdrawalReplies:
    """The fixed replies of the turn of `message` about the conversation's approval requests,
    in the active language — never a promise the requests' state does not keep:

    - a request it withdrew on a no: "I've withdrawn your request … it will not be carried out"
      (the whole answer);
    - a request it withdrew as a new message: a note before the model's answer to that message;
    - a request a teammate approved before the message arrived, when the message says no: "it
      had already been approved and is going ahead" (the whole answer);
    - a request still waiting after an explicit yes (and no other question was confirmed by
      it): "still waiting for a check" (the whole answer)."""
    result = WithdrawalReplies()
    touched = (
        ApprovalRequest.objects.for_client(client)
        .select_related("tool")
        .filter(conversation=conversation, requested_in__seq__lt=message.seq)
        .filter(
            Q(withdrawn_in=message)
            | Q(status=ApprovalStatus.PENDING)
            | Q(
                status=ApprovalStatus.APPROVED,
                decided_at__lte=message.created_at,
            )
            & (Q(finished_at__isnull=True) | Q(finished_at__gte=message.created_at))
        )
        .order_by("pk")
    )
    declined, notes, waiting, too_late = [], [], [], []
    for approval in touched:
        action = action_words(approval.tool, approval.params)
        if approval.withdrawn_in_id == message.pk:
            result.withdrawn.append(str(approval.public_id))
            if approval.withdrawn_because == WithdrawnBecause.DECLINED:
                declined.append(str(WITHDRAWN_TEXT) % {"action": action})
            else:
                notes.append(str(WITHDRAWN_NOTE_TEXT) % {"action": action})
        elif approval.status == ApprovalStatus.PENDING:
            if answer(message.text, approval.params) == "yes":
                waiting.append(str(STILL_WAITING_TEXT) % {"action": action})
        elif (
            approval.status == ApprovalStatus.APPROVED
            and answer(message.text, approval.params) == "no"
        ):
            too_late.append(str(TOO_LATE_TEXT) % {"action": action})
    if declined or too_late:
        result.replies, result.answer_only = [*declined, *too_late, *notes], True
    elif waiting and not notes and not confirmed:
        result.replies, result.answer_only = waiting, True
    else:
        result.replies = notes
    return result
