"""A teammate's approval for high-impact actions: one more gate after the customer's
confirmation and every guard, never instead of them.

A client marks a tool as needing approval (`ClientTool.approval_rule`, apps/tools/
approval_rules.py): always, or when a parameter is above a threshold. When the guards let such a
call run (`turn.act_on_tool_call`), it does not run: `approval_request_create` records an
`ApprovalRequest` with the exact tool, params and the idempotency key the run would have used,
and the customer is told the request is being checked. Then, outside any turn:

- `approval_approve` (a teammate, console or API): pending → approved with one conditional
  UPDATE, so of two concurrent approvals one wins and the other is refused; the run is queued
  (`reasoning.run_approved_action`, after commit) and `approval_run` calls the tool under the
  same idempotency key (`tool_execute`: at most once per key) and tells the customer the result;
- `approval_deny`: pending → denied with the teammate's reason, which the customer is told;
- `approvals_expire` (beat, `reasoning.expire_approvals`): a request nobody decided before its
  `expires_at` becomes a hand-off to a person (reason `approval_timeout`);
- `approvals_withdraw` (apps/approvals/withdrawal.py; the customer's next message, stored by
  `handle_turn`): a later customer message withdraws every request of the conversation still
  waiting, unless the message is an explicit yes to it. Pending → withdrawn is the same
  conditional UPDATE under the conversation's row lock as a teammate's decision, so of an
  approve and a withdrawal at the same moment exactly one wins; a withdrawn request never runs,
  and a later Approve is refused (409, `approval_withdrawn`).

A threshold rule is checked against sums, not single calls (`approval_gate`,
apps/approvals/sums.py): under a lock on the tool rows of the rule's group, so two racing calls
cannot both slip under it.

Every step is on the turn's trace (`approval_requested`, `approval_approved`, `approval_run`,
`approval_denied`, `approval_expired`, `approval_withdrawn`) and in the conversation's internal
messages (which also ring the console's live views). The task names (`reasoning.…`) are the
ones queued before this app existed: renaming them would strand queued tasks.
"""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from functools import cache, partial
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import Max, Model
from django.utils import timezone, translation
from django.utils.translation import gettext, gettext_lazy

from apps.approvals.models import ApprovalRequest, ApprovalStatus
from apps.approvals.sums import approval_basis, group_tools
from apps.clients.models import Client
from apps.conversations.models import (
    Conversation,
    ConversationStatus,
    Kind,
    Message,
    Role,
    Visibility,
)
from apps.conversations.services import message_append
from apps.core.exceptions import ApplicationError
from apps.core.models import TenantOwnedModel
from apps.core.outbound import emit_for_conversation
from apps.core.tenancy import tenant_scope
from apps.escalations.models import EscalationReason
from apps.escalations.services import escalation_create
from apps.tools import wording
from apps.tools.approval_rules import approval_needed, approval_timeout_minutes, sum_rule
from apps.tools.models import ClientTool, ExecutionStatus, FailureKind, PendingAction, ToolExecution
from apps.tools.pending import params_hash, pending_close, pending_mark_executed
from apps.tools.services import tool_execute, tool_execution_reserve, tool_render_result

logger = logging.getLogger(__name__)

# Fixed replies (msgids, rendered in the conversation's language).
PENDING_TEXT = gettext_lazy(
    "Thanks — a member of our team needs to check this request (%(action)s) before I can go "
    "ahead. I'll let you know here as soon as it has been checked."
)
DENIED_TEXT = gettext_lazy(
    "A member of our team checked your request (%(action)s) and could not approve it: %(reason)s"
)
TIMEOUT_TEXT = gettext_lazy(
    "Your request (%(action)s) is still waiting for a check, so I've passed your conversation "
    "to our support team — a person will follow up here."
)
# A result or a refusal is worded as for a tool run inside a turn (apps/tools/wording.py).
FAILED_TEXT = gettext_lazy(
    "I couldn't complete that just now because of a problem on our side. I've passed your "
    "request to our support team, who will follow up here."
)
MAX_REASON_CHARS = 500
EXPIRE_BATCH = 200
RUN_APPROVED_ACTION = "reasoning.run_approved_action"  # the task's stable name (tasks.py)


def action_words(tool: ClientTool, params: dict[str, Any]) -> str:
    """The action as the customer confirmed it, in the active language: "Request a refund —
    amount: 150, order number: TH-1" (the tool's display name and labels, apps/tools/wording.py).
    """
    details = wording.action_details(tool, params)
    action = wording.display_name(tool)
    return f"{action} — {details}" if details else action


def pending_text(tool: ClientTool, params: dict[str, Any]) -> str:
    """What the customer is told while the request waits (in the active language)."""
    return str(PENDING_TEXT) % {"action": action_words(tool, params)}


def _language(conversation: Conversation) -> str:
    return conversation.language or settings.LANGUAGE_CODE


def trace_step(approval: ApprovalRequest, name: str, output: dict[str, Any]) -> None:
    """Append a step to the trace of the turn that asked (outside that turn: it is closed).

    Through the request's own relation to its trace (the model it points to, and the trace's
    `steps`): this app sits below the reasoning layer, which calls it in every turn, so it never
    imports it (pyproject.toml, `apps-layers`)."""
    if approval.trace_id is None:
        return
    traces: Any = _trace_model()
    with transaction.atomic():
        trace = (
            traces.objects.select_for_update()
            .filter(pk=approval.trace_id, client_id=approval.client_id)
            .first()
        )
        if trace is None:
            return
        last = trace.steps.aggregate(last=Max("index"))["last"]
        trace.steps.create(
            client_id=approval.client_id,
            index=0 if last is None else last + 1,
            name=name,
            output={"approval": str(approval.public_id), **output},
        )


@cache  # the model class, looked up once per process
def _trace_model() -> type[Model]:
    related = ApprovalRequest._meta.get_field("trace").related_model
    assert isinstance(related, type)
    return related


def internal_note(approval: ApprovalRequest, client: Client, text: str, **data: Any) -> None:
    message_append(
        client=client,
        conversation=approval.conversation,
        role=Role.SYSTEM,
        kind=Kind.GUARD,
        visibility=Visibility.INTERNAL,
        text=text,
        data={"approval": str(approval.public_id), "tool": approval.tool.name, **data},
        trace=approval.trace,
    )


def _actor_email(actor: Any) -> str | None:
    return getattr(actor, "email", None) or None


# --- asked by the turn ---------------------------------------------------------------------------


def _asked(client: Client, idempotency_key: str) -> ApprovalRequest | None:
    """The request a call's idempotency key already has (a turn run again), or None."""
    return (
        ApprovalRequest.objects.for_client(client)
        .select_related("tool")
        .filter(idempotency_key=idempotency_key)
        .first()
    )


def approval_request_create(
    *,
    client: Client,
    conversation: Conversation,
    tool: ClientTool,
    params: dict[str, Any],
    idempotency_key: str,
    requested_in: Message,
    trace: TenantOwnedModel | None,
    pending: PendingAction | None = None,
    basis: dict[str, Any] | None = None,
) -> tuple[ApprovalRequest, bool]:
    """Hold this call for a teammate. Returns (the request, whether it is new). A turn that is
    run again finds the request its key already has; the same call (tool and params) still
    waiting in this conversation is not asked twice."""
    phash = params_hash(params)
    with transaction.atomic():
        existing = _asked(client, idempotency_key) or (
            ApprovalRequest.objects.for_client(client)
            .select_related("tool")
            .filter(
                conversation=conversation,
                tool=tool,
                params_hash=phash,
                status=ApprovalStatus.PENDING,
            )
            .first()
        )
        if existing is not None:
            return existing, False
        rule = dict(tool.approval_rule or {})
        approval = ApprovalRequest.objects.create(
            client=client,
            conversation=conversation,
            tool=tool,
            params=params,
            params_hash=phash,
            rule=rule,
            basis=basis or {},
            pending_action=pending,
            idempotency_key=idempotency_key,
            requested_in=requested_in,
            trace_id=None if trace is None else trace.pk,
            expires_at=timezone.now() + timedelta(minutes=approval_timeout_minutes(rule)),
        )
        emit_for_conversation(
            "approval.requested",
            client_id=client.pk,
            conversation=conversation,
            data={
                "approval": str(approval.public_id),
                "tool": tool.name,
                "expires_at": approval.expires_at.isoformat(),
            },
            content={"params": params},
        )
    return approval, True


def approval_gate(
    *,
    client: Client,
    conversation: Conversation,
    tool: ClientTool,
    params: dict[str, Any],
    idempotency_key: str,
    requested_in: Message,
    trace: TenantOwnedModel | None,
    pending: PendingAction | None = None,
) -> tuple[ApprovalRequest | None, bool]:
    """The last gate of a call every guard let run: (the request it is held in, whether it is
    new), or (None, False) when it may run now.

    A threshold rule is checked against the sums of `approval_sums.approval_basis` under a lock
    on the rows of the rule's group of tools (`select_for_update`, in primary-key order): a call
    that may run gets its `running` execution row before the lock is released
    (`tool_execution_reserve`), so a call racing it waits, then counts it."""
    rule = tool.approval_rule
    request = partial(
        approval_request_create,
        client=client,
        conversation=conversation,
        tool=tool,
        params=params,
        idempotency_key=idempotency_key,
        requested_in=requested_in,
        trace=trace,
        pending=pending,
    )
    if sum_rule(rule) is None:  # no rule, `always`, or one that cannot be read (fails closed)
        if not approval_needed(rule, params):
            return None, False
        return request()
    members = group_tools(client=client, tool=tool)
    with transaction.atomic():
        locked = list(
            ClientTool.objects.for_client(client)
            .select_for_update()
            .filter(pk__in=[t.pk for t in members])
            .order_by("pk")
        )
        asked = _asked(client, idempotency_key)
        if asked is not None:  # a turn run again: the request its key already has
            return asked, False
        if (
            ToolExecution.objects.for_client(client)
            .filter(idempotency_key=idempotency_key)
            .exists()
        ):
            return None, False  # let through before (a turn run again): it runs under its key
        basis = approval_basis(
            client=client,
            conversation=conversation,
            tool=tool,
            params=params,
            exclude_key=idempotency_key,
            tools=locked or members,
        )
        if approval_needed(rule, params) or basis["tripped"]:
            return request(basis=basis)
        tool_execution_reserve(
            client=client,
            tool=tool,
            params=params,
            idempotency_key=idempotency_key,
            conversation=conversation,
            trace=trace,
            pending_action=pending,
        )
    return None, False


# --- decided by a teammate -----------------------------------------------------------------------


def _decide(
    *, client: Client, approval: ApprovalRequest, status: str, actor: Any, reason: str = ""
) -> ApprovalRequest:
    """pending → `status`, if it is still pending and not past its time (one conditional UPDATE:
    of two concurrent decisions, exactly one changes the row). Raises 409 otherwise.

    The conversation's row is locked first, as the customer's message that may withdraw the
    request locks it (`handle_turn` → `approvals_withdraw`): one order of locks, no deadlock,
    and a decision and a withdrawal are strictly one after the other."""
    _locked_conversation(client, approval)
    now = timezone.now()
    changed = (
        ApprovalRequest.objects.for_client(client)
        .filter(pk=approval.pk, status=ApprovalStatus.PENDING, expires_at__gt=now)
        .update(
            status=status,
            decided_by=actor if getattr(actor, "pk", None) else None,
            decided_at=now,
            reason=reason,
            updated_at=now,
        )
    )
    current = approval_reload(client=client, approval=approval)
    if not changed:
        if current.status == ApprovalStatus.WITHDRAWN:
            raise ApplicationError(
                withdrawn_words(current) + " " + gettext("Nothing was run."),
                status=409,
                code="approval_withdrawn",
            )
        if current.status == ApprovalStatus.PENDING:  # past its time: the sweeper hands it off
            raise ApplicationError(
                gettext("This request timed out and is being handed to a person."),
                status=409,
                code="approval_expired",
            )
        raise ApplicationError(
            gettext("This request was already decided (%(status)s).")
            % {"status": current.get_status_display()},
            status=409,
            code="approval_decided",
        )
    emit_for_conversation(
        "approval.decided",
        client_id=client.pk,
        conversation=current.conversation,
        data={
            "approval": str(current.public_id),
            "tool": current.tool.name,
            "status": status,
            "decided_by": _actor_email(actor),
        },
        content={"denial_reason": reason} if reason else {},
    )
    return current


def approval_reload(*, client: Client, approval: ApprovalRequest) -> ApprovalRequest:
    return (
        ApprovalRequest.objects.for_client(client)
        .select_related("tool", "conversation", "pending_action", "trace", "decided_by")
        .get(pk=approval.pk)
    )


@transaction.atomic
def approval_approve(*, client: Client, approval: ApprovalRequest, actor: Any) -> ApprovalRequest:
    """A teammate approves: the call runs once, in a worker (`reasoning.run_approved_action`,
    queued after commit), under the idempotency key the turn chose."""
    approved = _decide(
        client=client, approval=approval, status=ApprovalStatus.APPROVED, actor=actor
    )
    by = _actor_email(actor)
    trace_step(approved, "approval_approved", {"by": by})
    internal_note(approved, client, f"APPROVED by {by or 'an API key'}: {approved.tool.name}")
    approval_id, client_id = approved.pk, client.pk
    transaction.on_commit(lambda: _enqueue_run(approval_id, client_id))
    return approved


def _enqueue_run(approval_id: int, client_id: int) -> None:
    """Queue the approved call by its task's name (`tasks.py` imports this module, so this one
    never imports it; the app config registers the task in every process). Never raises: with
    no broker configured (tasks run eagerly) or one that refuses the message, it runs here."""
    with tenant_scope(client_id):
        if current_app.conf.task_always_eager:
            approval_run(client_id=client_id, approval_id=approval_id)
            return
        try:
            current_app.tasks[RUN_APPROVED_ACTION].delay(approval_id, client_id=client_id)
        except Exception:
            logger.exception("could not queue the approved action; running it in-process")
            approval_run(client_id=client_id, approval_id=approval_id)


@transaction.atomic
def approval_deny(
    *, client: Client, approval: ApprovalRequest, actor: Any, reason: str
) -> ApprovalRequest:
    """A teammate denies, saying why: the call never runs and the customer is told the reason."""
    reason = " ".join(str(reason or "").split())
    if not reason:
        raise ApplicationError(
            gettext("Say why: the customer is told."), {"field": "reason"}, code="invalid"
        )
    if len(reason) > MAX_REASON_CHARS:
        raise ApplicationError(
            gettext("Keep the reason under %(n)s characters.") % {"n": MAX_REASON_CHARS},
            {"field": "reason"},
        )
    denied = _decide(
        client=client, approval=approval, status=ApprovalStatus.DENIED, actor=actor, reason=reason
    )
    if denied.pending_action is not None:
        pending_close(client=client, pending=denied.pending_action)
    by = _actor_email(actor)
    trace_step(denied, "approval_denied", {"by": by, "reason": reason})
    internal_note(denied, client, f"DENIED by {by or 'an API key'}: {reason}")
    conversation = _locked_conversation(client, denied)
    told: Message | None = None
    if conversation.status == ConversationStatus.OPEN:
        with translation.override(_language(conversation)):
            text = str(DENIED_TEXT) % {
                "action": action_words(denied.tool, denied.params),
                "reason": reason,
            }
        told = _tell(client, denied, conversation, text, outcome="denied")
    return _finished(denied, told)


def _locked_conversation(client: Client, approval: ApprovalRequest) -> Conversation:
    conversation = (
        Conversation.objects.for_client(client).select_for_update().get(pk=approval.conversation_id)
    )
    approval.conversation = conversation
    return conversation


def _tell(
    client: Client,
    approval: ApprovalRequest,
    conversation: Conversation,
    text: str,
    *,
    outcome: str,
    **data: Any,
) -> Message:
    """The assistant tells the customer (only while it owns the conversation)."""
    return message_append(
        client=client,
        conversation=conversation,
        role=Role.ASSISTANT,
        text=text,
        data={"approval": str(approval.public_id), "outcome": outcome, **data},
        trace=approval.trace,
        language=conversation.language,
    )


def _finished(approval: ApprovalRequest, told: Message | None) -> ApprovalRequest:
    approval.outcome_message = told
    approval.finished_at = timezone.now()
    approval.save(update_fields=["outcome_message", "finished_at", "updated_at"])
    return approval


# --- the approved run (a worker) -----------------------------------------------------------------


def approval_run(*, client_id: int, approval_id: int) -> ApprovalRequest | None:
    """Run an approved call and tell the customer the result. Safe to run twice: the tool runs
    at most once per idempotency key, and the customer is told once (`finished_at`)."""
    approval = (
        ApprovalRequest.objects.filter(client_id=client_id, pk=approval_id)
        .select_related("client", "tool", "conversation", "pending_action", "trace")
        .first()
    )
    if approval is None or approval.status != ApprovalStatus.APPROVED:
        return approval
    if approval.finished_at is not None:
        return approval
    client = approval.client
    # Outside any transaction: the execution row is committed before the call (tool_execute).
    execution = tool_execute(
        client=client,
        tool=approval.tool,
        params=approval.params,
        idempotency_key=approval.idempotency_key,
        conversation=approval.conversation,
        trace=approval.trace,
        pending_action=approval.pending_action,
    )
    with transaction.atomic():
        locked = (
            ApprovalRequest.objects.for_client(client)
            .select_for_update(of=("self",))  # (pending_action, trace: nullable joins)
            .select_related("tool", "pending_action", "trace")
            .get(pk=approval.pk)
        )
        if locked.finished_at is not None:
            return locked  # another worker told the customer
        locked.execution = execution
        locked.save(update_fields=["execution", "updated_at"])
        return _report_run(client, locked, execution)


def _report_run(
    client: Client, approval: ApprovalRequest, execution: ToolExecution
) -> ApprovalRequest:
    ok = execution.status == ExecutionStatus.SUCCEEDED
    if approval.pending_action is not None:
        pending_mark_executed(client=client, pending=approval.pending_action)
    outcome = {"ok": ok, "result": execution.result, "error": execution.error}
    trace_step(
        approval,
        "approval_run",
        {
            **outcome,
            "tool": approval.tool.name,
            "params": approval.params,
            "idempotency_key": approval.idempotency_key,
            "execution": execution.pk,
            "attempts": execution.attempts,
        },
    )
    message_append(
        client=client,
        conversation=approval.conversation,
        role=Role.TOOL,
        kind=Kind.TOOL_RESULT,
        visibility=Visibility.INTERNAL,
        text=json.dumps(execution.result, ensure_ascii=False)
        if ok
        else f"failed: {execution.error}",
        data={"approval": str(approval.public_id), "execution": execution.pk, **outcome},
        trace=approval.trace,
    )
    conversation = _locked_conversation(client, approval)
    language = _language(conversation)
    technical = not ok and execution.failure_kind != FailureKind.REFUSED
    if conversation.status != ConversationStatus.OPEN:
        # A person owns the conversation: the result is theirs to tell (internal message above).
        return _finished(approval, None)
    if technical:
        with translation.override(language):
            handoff = str(FAILED_TEXT)
        escalation_create(
            client=client,
            conversation=conversation,
            reason=EscalationReason.TOOL_FAILURE,
            detail=f"{approval.tool.name} (approved) failed ({execution.failure_kind}) after "
            f"{execution.attempts} attempt(s): {execution.error}",
            trace=approval.trace,
            handoff_text=handoff,
        )
        return _finished(approval, None)
    with translation.override(language):
        if ok:
            text = tool_render_result(
                tool=approval.tool, params=approval.params, execution=execution
            ) or wording.result_text(approval.tool, approval.params, execution.result)
        else:
            text = wording.error_text(
                approval.tool,
                approval.params,
                error=execution.error,
                code=execution.error_code,
                business_language=client.language,
            )
    told = _tell(
        client,
        approval,
        conversation,
        text,
        outcome="succeeded" if ok else "refused",
        tool=approval.tool.name,
        execution=execution.pk,
    )
    return _finished(approval, told)


# --- nobody decided in time (beat) ---------------------------------------------------------------


def approvals_expire(*, now: Any = None, limit: int = EXPIRE_BATCH) -> int:
    """Hand every request left undecided past its time to a person. Bounded per run (the next
    run takes the rest); idempotent. Returns how many it expired."""
    now = now or timezone.now()
    due = list(
        ApprovalRequest.objects.unscoped("the approval sweeper looks at every client's requests")
        .filter(status=ApprovalStatus.PENDING, expires_at__lte=now)
        .order_by("expires_at")
        .values_list("pk", "client_id")[:limit]
    )
    expired = 0
    for approval_id, client_id in due:
        with tenant_scope(client_id):
            try:
                if approval_expire(client_id=client_id, approval_id=approval_id, now=now):
                    expired += 1
            except Exception:
                logger.exception("expiring an approval failed", extra={"approval": approval_id})
    return expired


@transaction.atomic
def approval_expire(*, client_id: int, approval_id: int, now: Any = None) -> bool:
    """One request past its time: expired, and the conversation handed to a person (reason
    `approval_timeout`). False when it was decided (or withdrawn) meanwhile."""
    now = now or timezone.now()
    conversation_id = (
        ApprovalRequest.objects.filter(client_id=client_id, pk=approval_id)
        .values_list("conversation_id", flat=True)
        .first()
    )
    if conversation_id is None:
        return False
    # The conversation's row first, as every decision and withdrawal takes it (`_decide`).
    Conversation.objects.filter(client_id=client_id, pk=conversation_id).select_for_update().first()
    changed = ApprovalRequest.objects.filter(
        client_id=client_id, pk=approval_id, status=ApprovalStatus.PENDING, expires_at__lte=now
    ).update(status=ApprovalStatus.EXPIRED, updated_at=timezone.now())
    if not changed:
        return False
    approval = (
        ApprovalRequest.objects.filter(client_id=client_id)
        .select_related("client", "tool", "pending_action", "trace")
        .get(pk=approval_id)
    )
    client = approval.client
    if approval.pending_action is not None:
        pending_close(client=client, pending=approval.pending_action)
    minutes = approval_timeout_minutes(approval.rule)
    trace_step(approval, "approval_expired", {"minutes": minutes})
    internal_note(approval, client, f"EXPIRED: no teammate decided within {minutes} min")
    conversation = _locked_conversation(client, approval)
    with translation.override(_language(conversation)):
        handoff = str(TIMEOUT_TEXT) % {"action": action_words(approval.tool, approval.params)}
    escalation_create(
        client=client,
        conversation=conversation,
        reason=EscalationReason.APPROVAL_TIMEOUT,
        detail=f"{approval.tool.name} {json.dumps(approval.params, ensure_ascii=False)} "
        f"waited {minutes} min for a teammate's approval",
        trace=approval.trace,
        handoff_text=handoff,
    )
    _finished(approval, None)
    return True


def withdrawn_words(approval: ApprovalRequest) -> str:
    """'Withdrawn by the customer at 2026-03-02 09:20 (message #7).' — for the approver."""
    at = approval.withdrawn_at
    when = timezone.localtime(at).strftime("%Y-%m-%d %H:%M") if at is not None else "?"
    seq = approval.withdrawn_in.seq if approval.withdrawn_in is not None else "?"
    return gettext("Withdrawn by the customer at %(when)s (message #%(seq)s).") % {
        "when": when,
        "seq": seq,
    }
