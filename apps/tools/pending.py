"""The one home of every `PendingAction` write: create (put a destructive call to the customer),
mark shown, resolve (settle it with the customer's next message), mark executed, expire.

Which status an answer gives is a rule, not bookkeeping: `pending_resolve` gathers the facts
(`OpenQuestion`) and asks the caller's pure `decide` function — the reasoning guards'
`confirmation_decision` — so the rule can be read and tested without a database, and this layer
never imports the reasoning layer.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.clients.models import Client
from apps.core.tenant_sql import sql_rows
from apps.tools.models import ClientTool, PendingAction, PendingActionStatus
from apps.tools.selectors import pending_declined_by

if TYPE_CHECKING:
    from apps.conversations.models import Conversation, Message


def params_hash(params: dict[str, Any]) -> str:
    """The canonical hash of a call's params: a confirmation is for exactly these."""
    canonical = json.dumps(params, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


DIGEST_LENGTH = 16


def params_digest(hash_or_params: str | dict[str, Any]) -> str:
    """The digest a confirmation question carries (`data.digest`) and the widget's Yes/No
    buttons send back: the first 16 hex characters of the params hash. With the action's id it
    binds a button to exactly the question (and params) it was shown with."""
    if isinstance(hash_or_params, dict):
        hash_or_params = params_hash(hash_or_params)
    return hash_or_params[:DIGEST_LENGTH]


@dataclass(frozen=True)
class StructuredAnswer:
    """The widget's Yes/No button press: `{"action", "digest", "answer"}` sent beside the text.
    It answers exactly one question; a press for any other (or changed) question is no yes."""

    action: int | None
    digest: str
    answer: str  # "yes" | "no" (anything else is never a yes)

    @classmethod
    def from_data(cls, data: Any) -> StructuredAnswer | None:
        """From a stored message's `data["confirm"]` (None when the message carried none). A
        malformed value still counts as a button press — one that matches no question."""
        if data is None:
            return None
        if not isinstance(data, dict):
            return cls(action=None, digest="", answer="")
        action = data.get("action")
        valid_action = isinstance(action, int) and not isinstance(action, bool)
        return cls(
            action=action if valid_action else None,
            digest=str(data.get("digest") or "").lower(),
            answer=str(data.get("answer") or ""),
        )


@dataclass(frozen=True)
class OpenQuestion:
    """What is known about one open confirmation question when a customer message arrives."""

    params: dict[str, Any]
    shown_before: bool  # the question was posted before this message was written
    expired: bool  # its time ran out
    first_reply: bool  # no customer or staff message came between the question and this one
    another_confirmed: bool  # a newer open question was already confirmed by this message
    action_id: int | None = None  # the pending action's id (as its question's data shows it)
    digest: str = ""  # params_digest of its params (as its question's data shows it)
    structured: StructuredAnswer | None = None  # the button pressed with this message, if any
    tool: str | None = None  # the tool's name: a typed yes may echo its action only


# The rule: the status this message gives the question (PENDING = leave it open).
Decide = Callable[[OpenQuestion, str], str]


def _deadline(at_the_latest: datetime | None) -> datetime:
    deadline = timezone.now() + timedelta(minutes=settings.REASONING_CONFIRMATION_TTL_MINUTES)
    return deadline if at_the_latest is None else min(deadline, at_the_latest)


@transaction.atomic
def pending_create(
    *,
    client: Client,
    conversation: Conversation,
    tool: ClientTool,
    params: dict[str, Any],
    proposed_in: Message,
    expires_at: datetime | None = None,
) -> PendingAction:
    """Put a destructive call to the customer. Any older open question is superseded.

    It expires `REASONING_CONFIRMATION_TTL_MINUTES` from now, or at `expires_at` when that is
    sooner: a question asked again keeps the first one's deadline, so asking again never
    extends the time a "yes" can run the action."""
    PendingAction.objects.for_client(client).filter(
        conversation=conversation,
        status__in=[PendingActionStatus.PENDING, PendingActionStatus.CONFIRMED],
    ).update(status=PendingActionStatus.SUPERSEDED, updated_at=timezone.now())
    return PendingAction.objects.create(
        client=client,
        conversation=conversation,
        tool=tool,
        params=params,
        params_hash=params_hash(params),
        proposed_in=proposed_in,
        expires_at=_deadline(expires_at),
        idempotency_key=f"pa-{uuid.uuid4().hex}",
    )


def pending_mark_shown(*, client: Client, pending_id: int, question: Message) -> None:
    """The confirmation question was posted to the customer: from now on it can be answered."""
    PendingAction.objects.for_client(client).filter(
        pk=pending_id, status=PendingActionStatus.PENDING
    ).update(question=question, updated_at=timezone.now())


@transaction.atomic
def pending_resolve(
    *, client: Client, conversation: Conversation, user_message: Message, decide: Decide
) -> PendingAction | None:
    """At the start of a turn: settle any open confirmation with this customer message. Returns
    the action this message confirmed, else None.

    `decide` is the confirmation rule (pure); this function only gathers its facts and records
    the statuses it gives. A turn that is re-run (its worker died) finds the action its message
    already confirmed, with the same idempotency key."""
    already = (
        PendingAction.objects.for_client(client)
        .select_related("tool")
        .filter(
            resolved_by=user_message,
            status__in=[PendingActionStatus.CONFIRMED, PendingActionStatus.EXECUTED],
        )
        .first()
    )
    if already is not None:
        return already
    now = timezone.now()
    open_actions = list(
        PendingAction.objects.for_client(client)
        .select_for_update(of=("self",))  # (question is a nullable join: lock only these rows)
        .select_related("tool", "question")
        .filter(conversation=conversation, status=PendingActionStatus.PENDING)
        .order_by("-created_at")
    )
    confirmed = None
    structured = StructuredAnswer.from_data((user_message.data or {}).get("confirm"))
    for pending in open_actions:
        question = pending.question
        shown_before = question is not None and question.seq < user_message.seq
        first_reply = shown_before and _first_reply(
            client=client, question=question, user_message=user_message
        )
        facts = OpenQuestion(
            params=pending.params,
            shown_before=shown_before,
            expired=pending.expires_at <= now,
            first_reply=first_reply,
            another_confirmed=confirmed is not None,
            action_id=pending.pk,
            digest=params_digest(pending.params_hash),
            structured=structured,
            tool=pending.tool.name,
        )
        status = decide(facts, user_message.text)
        if status == PendingActionStatus.PENDING:
            continue
        pending.status = status
        pending.resolved_by = user_message
        pending.save(update_fields=["status", "resolved_by", "updated_at"])
        if status == PendingActionStatus.CONFIRMED:
            confirmed = pending
    return confirmed


def _first_reply(*, client: Client, question: Message | None, user_message: Message) -> bool:
    """No customer or staff message came between the question and this answer."""
    from apps.conversations.models import Message, Role

    return question is not None and not (
        Message.objects.for_client(client)
        .filter(
            conversation_id=question.conversation_id,
            role__in=[Role.USER, Role.STAFF],
            seq__gt=question.seq,
            seq__lt=user_message.seq,
        )
        .exists()
    )


def pending_expired_by_answer(*, client: Client, user_message: Message) -> PendingAction | None:
    """The open question this typed message closed by not being a clear yes or no — still in
    time, answered first, with no button pressed — so the turn may ask it again (with the
    buttons). None when the message closed none that way."""
    if (user_message.data or {}).get("confirm") is not None:
        return None
    expired = (
        PendingAction.objects.for_client(client)
        .select_related("tool", "question")
        .filter(resolved_by=user_message, status=PendingActionStatus.EXPIRED)
        .order_by("-created_at")
        .first()
    )
    if expired is None or expired.expires_at <= timezone.now() or expired.question is None:
        return None
    if expired.question.seq >= user_message.seq:
        return None
    if not _first_reply(client=client, question=expired.question, user_message=user_message):
        return None
    return expired


def pending_touched(*, client: Client, conversation: Conversation, user_message: Message) -> bool:
    """Whether the conversation has an open question or this message settled one: one cheap
    query; when it says no (the common case) nothing about questions can change in this turn.
    Plain SQL: every turn asks it, and the ORM's building of the OR cost ≈ 5 times the
    statement (docs/benchmarks.md, `turn_profile.py --statements`)."""
    table = PendingAction._meta.db_table
    return bool(
        sql_rows(
            "tools.pending_touched",
            f"SELECT 1 FROM {table} WHERE client_id = %s AND (resolved_by_id = %s"  # noqa: S608
            " OR (conversation_id = %s AND status = %s)) LIMIT 1",
            [client.pk, user_message.pk, conversation.pk, PendingActionStatus.PENDING],
            client_id=client.pk,
        )
    )


def pending_settle(
    *,
    client: Client,
    conversation: Conversation,
    user_message: Message,
    decide: Decide,
    touched: bool | None = None,
) -> tuple[PendingAction | None, PendingAction | None]:
    """At the start of a turn: (the action this message confirmed, the one it declined) —
    exactly what `pending_resolve` and then `pending_declined_by` answer. `touched`: what
    `pending_touched` said (asked here when not given); when no question is open and this
    message settled none, neither can answer anything."""
    if touched is None:
        touched = pending_touched(
            client=client, conversation=conversation, user_message=user_message
        )
    if not touched:
        return None, None
    confirmed = pending_resolve(
        client=client, conversation=conversation, user_message=user_message, decide=decide
    )
    return confirmed, pending_declined_by(client=client, user_message=user_message)


def pending_mark_executed(*, client: Client, pending: PendingAction) -> None:
    """The confirmed action ran (whatever its outcome): it can never be confirmed again."""
    PendingAction.objects.for_client(client).filter(pk=pending.pk).update(
        status=PendingActionStatus.EXECUTED, updated_at=timezone.now()
    )
    pending.status = PendingActionStatus.EXECUTED


def pending_expire_open(*, client: Client, conversation: Conversation) -> int:
    """A person took over (or the question was never shown): no open question may be confirmed
    later by a stray "ok"."""
    return (
        PendingAction.objects.for_client(client)
        .filter(conversation=conversation, status=PendingActionStatus.PENDING)
        .update(status=PendingActionStatus.EXPIRED, updated_at=timezone.now())
    )


def pending_close(*, client: Client, pending: PendingAction) -> None:
    """A confirmed action that will never run (a teammate denied it, or no one approved it in
    time): it can never be confirmed or run later."""
    PendingAction.objects.for_client(client).filter(
        pk=pending.pk, status__in=[PendingActionStatus.PENDING, PendingActionStatus.CONFIRMED]
    ).update(status=PendingActionStatus.EXPIRED, updated_at=timezone.now())
