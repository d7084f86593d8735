"""Running tools exactly once per idempotency key, and rendering their results."""

from __future__ import annotations

import logging
import re
import string
from typing import TYPE_CHECKING, Any

from celery.exceptions import SoftTimeLimitExceeded
from django.db import IntegrityError, connection, transaction

from apps.clients.models import Client
from apps.core.deadlines import DeadlineExceeded
from apps.core.models import TenantOwnedModel
from apps.core.outbound import emit
from apps.tools.executors import ExecutorOutcome, executor_for
from apps.tools.mcp import mcp_tool_review
from apps.tools.models import (
    ClientTool,
    ExecutionStatus,
    ExecutorType,
    FailureKind,
    PendingAction,
    ToolExecution,
)

if TYPE_CHECKING:
    from apps.conversations.models import Conversation

logger = logging.getLogger(__name__)

_MAX_ATTEMPTS_STORED = 32767  # PositiveSmallIntegerField
# An idempotency key is unique across clients; the row found is checked against the client next.
KEY_IS_GLOBAL = "idempotency keys are unique across clients"


def tool_execute(
    *,
    client: Client,
    tool: ClientTool,
    params: dict[str, Any],
    idempotency_key: str,
    conversation: Conversation | None = None,
    trace: TenantOwnedModel | None = None,
    pending_action: PendingAction | None = None,
) -> ToolExecution:
    """Run `tool` at most once per `idempotency_key` and return its `ToolExecution`.

    A finished execution with this key is returned as it is, without calling the tool again;
    a `running` one (a crashed earlier attempt) is run again with the same key. Tool failures
    are recorded on the row, never raised.

    Must not be called inside `transaction.atomic()`: the running row has to be committed
    before the tool is called, so a redelivered turn finds it (enforced with `durable=True`).
    """
    if tool.client_id != client.pk:
        raise ValueError("tool belongs to another client")
    for related in (conversation, trace, pending_action):
        if related is not None and related.client_id != client.pk:
            raise ValueError(f"{type(related).__name__} belongs to another client")

    execution, should_run = _execution_claim(
        client=client,
        tool=tool,
        params=params,
        idempotency_key=idempotency_key,
        conversation=conversation,
        trace=trace,
        pending_action=pending_action,
    )
    if not should_run:
        return execution
    executed = _execution_run(client=client, tool=tool, execution=execution)
    public_id = str(conversation.public_id) if conversation is not None else ""
    emit(
        "tool.executed",
        client_id=client.pk,
        conversation=public_id,
        data={
            "conversation": public_id or None,
            "tool": tool.name,
            "status": executed.status,
            "attempts": executed.attempts,
            "latency_ms": executed.latency_ms,
            "failure_kind": executed.failure_kind,
            "idempotency_key": executed.idempotency_key,
        },
        content={"params": executed.params, "result": executed.result, "error": executed.error},
    )
    return executed


def tool_execution_reserve(
    *,
    client: Client,
    tool: ClientTool,
    params: dict[str, Any],
    idempotency_key: str,
    conversation: Conversation | None = None,
    trace: TenantOwnedModel | None = None,
    pending_action: PendingAction | None = None,
) -> ToolExecution:
    """The `running` row of a call about to run, written inside the caller's transaction: an
    approval threshold check that holds its lock (apps/approvals/services.py, `approval_gate`)
    counts the call before it is made, so a racing call sees it. `tool_execute` then finds the
    row and runs the tool under the same key."""
    execution, _ = ToolExecution.objects.for_client(client).get_or_create(
        idempotency_key=idempotency_key,
        defaults={
            "client": client,
            "tool": tool,
            "params": params,
            "conversation": conversation,
            "trace_id": None if trace is None else trace.pk,
            "pending_action": pending_action,
            "status": ExecutionStatus.RUNNING,
        },
    )
    return execution


def _execution_claim(
    *,
    client: Client,
    tool: ClientTool,
    params: dict[str, Any],
    idempotency_key: str,
    conversation: Conversation | None,
    trace: TenantOwnedModel | None,
    pending_action: PendingAction | None,
) -> tuple[ToolExecution, bool]:
    """Find or create (and commit) the row for `idempotency_key`. Returns it and whether this
    worker should run the tool."""
    with transaction.atomic(durable=True):
        existing = (
            ToolExecution.objects.unscoped(KEY_IS_GLOBAL)
            .filter(idempotency_key=idempotency_key)
            .first()
        )
        if existing is not None:
            _check_same_call(existing, client=client, tool=tool)
            # running = an earlier attempt died mid-call: run again under the same key.
            return existing, existing.status == ExecutionStatus.RUNNING
        try:
            with transaction.atomic():  # savepoint: a lost race leaves the outer block usable
                created = ToolExecution.objects.create(
                    client=client,
                    tool=tool,
                    params=params,
                    idempotency_key=idempotency_key,
                    conversation=conversation,
                    trace_id=None if trace is None else trace.pk,
                    pending_action=pending_action,
                    status=ExecutionStatus.RUNNING,
                )
            return created, True
        except IntegrityError:
            winner = (
                ToolExecution.objects.unscoped(KEY_IS_GLOBAL)
                .filter(idempotency_key=idempotency_key)
                .first()
            )
            if winner is None:  # the violation was not about the key: a real error
                raise
    # Another worker inserted the key between our read and our insert and is calling the tool
    # right now, so we must not: hand back its row as it stands.
    _check_same_call(winner, client=client, tool=tool)
    logger.info(
        "tool execution claimed by another worker",
        extra={"idempotency_key": idempotency_key, "execution": winner.pk},
    )
    return winner, False


def _check_same_call(execution: ToolExecution, *, client: Client, tool: ClientTool) -> None:
    # Keys are ours (per PendingAction / turn), so a mismatch is a bug. Never hand over or re-run
    # another tenant's execution, nor report one tool's outcome as another's.
    if execution.client_id != client.pk:
        raise ValueError("idempotency key belongs to another client")
    if execution.tool_id != tool.pk:
        raise ValueError("idempotency key was used for another tool")


def _execution_run(*, client: Client, tool: ClientTool, execution: ToolExecution) -> ToolExecution:
    """Run the tool for a `running` row and record the outcome.

    The row stays locked (FOR NO KEY UPDATE) while the tool runs, so a second worker holding
    the same key waits and then finds the finished row instead of calling the tool again. If
    this worker dies, the database drops the lock and a redelivery re-runs with the same key.
    """
    no_key = connection.features.has_select_for_no_key_update
    with transaction.atomic(durable=True):
        locked = (
            ToolExecution.objects.select_for_update(no_key=no_key)
            .filter(pk=execution.pk, client_id=execution.client_id)
            .first()
        )
        if locked is None or locked.status != ExecutionStatus.RUNNING:
            return locked or execution  # finished by the worker we waited for
        # The stored params are what this key stands for: the client dedupes on key + payload.
        outcome = _run(client=client, tool=tool, execution=locked)
        locked.status = ExecutionStatus.SUCCEEDED if outcome.ok else ExecutionStatus.FAILED
        locked.result = outcome.result
        locked.error = outcome.error
        locked.error_code = outcome.error_code
        locked.failure_kind = _failure_kind(outcome)
        locked.attempts = min(locked.attempts + outcome.attempts, _MAX_ATTEMPTS_STORED)
        locked.latency_ms = outcome.latency_ms
        locked.save(
            update_fields=[
                "status",
                "result",
                "error",
                "error_code",
                "failure_kind",
                "attempts",
                "latency_ms",
                "updated_at",
            ]
        )
    if not outcome.ok:
        logger.info(
            "tool execution failed",
            extra={
                "tool": tool.name,
                "execution": locked.pk,
                "error": outcome.error,
                "retryable": outcome.retryable_failure,
            },
        )
    return locked


def _failure_kind(outcome: ExecutorOutcome) -> str:
    if outcome.ok:
        return FailureKind.NONE
    if outcome.refused:
        return FailureKind.REFUSED
    if outcome.timed_out:
        return FailureKind.TIMED_OUT
    return FailureKind.UNAVAILABLE if outcome.retryable_failure else FailureKind.ERROR


def _run(*, client: Client, tool: ClientTool, execution: ToolExecution) -> ExecutorOutcome:
    if tool.customer_scoped:
        # The second line behind the guards (`guards.check_tool_call`): a customer-scoped tool
        # never runs without a verified customer to act for.
        conversation = execution.conversation if execution.conversation_id else None
        if conversation is None or not conversation.customer_verified:
            return ExecutorOutcome.not_run(
                f"Tool {tool.name!r} is customer scoped and the customer is not verified."
            )
    executor = executor_for(tool.executor_type)
    if executor is None:
        return ExecutorOutcome.not_run(
            f"Tool {tool.name!r} has an unknown executor type {tool.executor_type!r}."
        )
    try:
        return executor.run(client=client, tool=tool, execution=execution)
    except Exception as exc:
        # Executors report failures as outcomes; anything raised (a time limit, a bug) must
        # still end the run on record, never leave it `running`.
        logger.exception("tool executor raised", extra={"tool": tool.name})
        timed_out = isinstance(exc, SoftTimeLimitExceeded | DeadlineExceeded)
        return ExecutorOutcome(
            ok=False,
            result=None,
            error="The tool's time ran out." if timed_out else "The tool failed unexpectedly.",
            attempts=1,
            latency_ms=0,
            retryable_failure=timed_out,
            timed_out=timed_out,
        )


class _BlankMissing(dict[str, Any]):
    """Template values: a key the template names but the data lacks renders as ""."""

    def __missing__(self, key: str) -> str:
        return ""


def _blank_missing(value: Any) -> Any:
    if isinstance(value, dict):
        return _BlankMissing({str(k): _blank_missing(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_blank_missing(v) for v in value]
    return value


_ATTRIBUTE_ACCESS = re.compile(r"^[^\[]*\.|\]\.")
_MAX_FORMAT_NUMBER = 200


def _template_is_safe(template: str) -> bool:
    """Reject attribute access (`{result.__class__...}` could reach server internals) and huge
    widths (`{x:>999999999}`). Only `{name}` and `{name[key]}` lookups are allowed."""
    for _, field_name, format_spec, _ in string.Formatter().parse(template):
        if field_name is None:
            continue
        if _ATTRIBUTE_ACCESS.search(field_name):
            return False
        if format_spec and (
            "{" in format_spec
            or any(int(n) > _MAX_FORMAT_NUMBER for n in re.findall(r"\d+", format_spec))
        ):
            return False
    return True


def tool_render_result(
    *, tool: ClientTool, params: dict[str, Any], execution: ToolExecution
) -> str | None:
    """The tool's `result_template` filled with `params` and `result`, or None when the tool has
    no template, did not succeed, or the template cannot be rendered (the assistant composes
    the reply instead)."""
    template = tool.result_template
    if not template or execution.status != ExecutionStatus.SUCCEEDED:
        return None
    values = _blank_missing({**params, "result": execution.result or {}})
    try:
        if not _template_is_safe(template):
            logger.warning("unsafe tool result template", extra={"tool": tool.name})
            return None
        return template.format_map(values)
    except Exception:  # a client-authored template must never break a turn
        logger.warning("tool result template failed", extra={"tool": tool.name}, exc_info=True)
        return None


@transaction.atomic
def tool_update(
    *,
    client: Client,
    tool: ClientTool,
    enabled: bool | None = None,
    description: str | None = None,
) -> ClientTool:
    """Switch a tool on/off and/or change its description; nothing else about a tool (its
    kind, schema, endpoint or secret) can be changed this way."""
    locked = ClientTool.objects.for_client(client).select_for_update().get(pk=tool.pk)
    changed: list[str] = []
    if enabled is not None and locked.enabled != enabled:
        locked.enabled = enabled
        changed.append("enabled")
        if enabled and locked.executor_type == ExecutorType.MCP:
            # Enabling an MCP tool reviews its definition as the server lists it now.
            mcp_tool_review(tool=locked)
            changed.append("mcp_reviewed_fingerprint")
    if description is not None and locked.description != description:
        locked.description = description
        changed.append("description")
    if changed:
        locked.save(update_fields=[*changed, "updated_at"])
    return locked
